"""Stop-gap adapters for the selection-paper analyses (papers 000-002).

The local privacy mechanisms size every client's noise for one common planned count T. The
selection plug-ins ``bcs``, ``privacy_aware``, ``unbiased``, ``power_of_choice``,
``round_robin`` and ``optimal_queries`` plan per-client counts T_n and expose them as
``planned_participations(client_id)`` and ``budget_fraction(client_id)``. Until the
mechanisms read these hooks themselves, these subclasses (registered as ``*_hooked``) do: the
noise of client n is sized for its own T_n and budget share, as the papers prescribe.
"""

from __future__ import annotations

import fedgame.mechanisms.aggregation.weighted_eps
import fedgame.mechanisms.selection.bcs
import fedgame.mechanisms.selection.optimal_queries
import fedgame.mechanisms.selection.power_of_choice
import fedgame.mechanisms.selection.presampled
import fedgame.mechanisms.selection.round_robin
import fedgame.plugins  # noqa: F401
from fedgame.privacy.dpsgd_local import LocalDpSgd as DpsgdLocal
from fedgame.privacy.gaussian_local import LocalGaussian as GaussianLocal
from fedgame.privacy.laplace_local import LocalLaplace as LaplaceLocal
from fedgame.registry import register


def _t(sel, cid: int) -> int:
    f = getattr(sel, "planned_participations", None)
    return max(1, int(f(cid))) if f else 0


@register("privacy", "gaussian_local_hooked")
class HookedGaussianLocal(GaussianLocal):
    """``gaussian_local`` with per-client T_n from the selection (dpfl_bcs: remaining budget)."""

    def prepare(self, ctx, *, rng):
        super().prepare(ctx, rng=rng)
        self.sel = ctx.components["selection"]
        self.base = None

    def noise_multiplier(self, client, *, epsilon_round=None):
        t = _t(self.sel, client.client_id)
        if t:
            self.planned = t
            share = self.sel.budget_fraction(client.client_id)
            if share < 1.0:
                z = super().noise_multiplier(client, epsilon_round=epsilon_round)
                return z / max(share, 1e-12)  # sigma ~ 1/eps_rem (ln(1/delta) change ignored)
        return super().noise_multiplier(client, epsilon_round=epsilon_round)


@register("privacy", "laplace_local_hooked")
class HookedLaplaceLocal(LaplaceLocal):
    """``laplace_local`` with per-release epsilon = eps_total * share / T_n."""

    def prepare(self, ctx, *, rng):
        super().prepare(ctx, rng=rng)
        self.sel = ctx.components["selection"]

    def _eps(self, client):
        t = _t(self.sel, client.client_id)
        return client.epsilon_total * self.sel.budget_fraction(client.client_id) / t

    def next_charge(self, client):
        return self._charge(self._eps(client))

    def plan(self, clients, responses, *, info):
        import dataclasses

        views = [dataclasses.replace(c, epsilon_round=self._eps(c)) for c in clients]
        return super().plan(views, responses, info=info)


@register("privacy", "dpsgd_local_hooked")
class HookedDpsgdLocal(DpsgdLocal):
    """``dpsgd_local`` with sigma_k sized for the realised count T_k (paper 001 Eq. 6)."""

    def prepare(self, ctx, *, rng):
        super().prepare(ctx, rng=rng)
        self.sel = ctx.components["selection"]

    def terms(self, client):
        t = _t(self.sel, client.client_id)
        if t:
            self.planned = t
        return super().terms(client)
