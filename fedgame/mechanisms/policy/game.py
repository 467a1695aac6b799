"""Follower policies of the QI-DPFL Stackelberg game (paper 003 §III-B2, Theorem 1).

A client picks its zCDP budget ρ_i for the round; the incentive's ``Offer`` announces the total
reward R_t, the players (everyone not in ``Offer.excluded`` and reachable) and, in
``Offer.plan``, the utility family: ``phi`` (φ_1), ``quadratic`` (1 for a quadratic privacy
cost) and ``cap`` (a per-client budget cap). ν_i are public (note 003 §3.4), so a client with
complete information can compute the whole equilibrium; it is computed once per round and
cached (O(N) per round for the closed form). Remaining budgets are read in zCDP units:
ρ_left = ρ(ε_total) - ρ(ε_spent) with ρ(ε) the inverse of ε = ρ + 2·sqrt(ρ ln(1/δ)) (exact for
the ``zcdp`` accountant).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, PositiveFloat

from fedgame.game.equilibrium import FollowerUtility, solve_followers
from fedgame.game.stackelberg import follower_equilibrium
from fedgame.privacy.calibrate import epsilon_to_zcdp
from fedgame.registry import register
from fedgame.views import ClientView, MarketView, Offer, Response


def players(offer: Offer, market: MarketView) -> list[ClientView]:
    """The round's players: reachable clients the leader did not exclude."""
    return [c for c in market.clients if c.reachable and c.client_id not in offer.excluded]


def rho_remaining(view: ClientView) -> float:
    """Remaining zCDP budget ρ(ε_total) - ρ(ε_spent) at the client's δ (inf without a budget)."""
    if not math.isfinite(view.epsilon_total):
        return math.inf
    total = epsilon_to_zcdp(view.epsilon_total, delta=view.delta)
    spent = epsilon_to_zcdp(min(view.epsilon_spent, view.epsilon_total), delta=view.delta)
    return max(total - spent, 0.0)


def equilibrium(
    offer: Offer, clients: list[ClientView], *, caps: np.ndarray | None = None
) -> tuple[dict[int, float], bool, float]:
    """Followers' equilibrium ρ* for ``clients`` at the offer: (ρ by id, converged, residual).

    Linear uncapped utilities use Theorem 1 on the active set; others the damped numeric
    best-response iteration.
    """
    if offer.reward <= 0 or not clients:
        return {c.client_id: 0.0 for c in clients}, True, 0.0
    nu = np.array([c.privacy_value for c in clients], dtype=float)
    phi = float(offer.plan.get("phi", 1.0))
    cap = float(offer.plan.get("cap", math.inf))
    quadratic = bool(offer.plan.get("quadratic", 0.0))
    if math.isfinite(cap):
        caps = np.full(nu.size, cap) if caps is None else np.minimum(caps, cap)
    ids = [c.client_id for c in clients]
    if not quadratic and caps is None:
        rho = follower_equilibrium(nu, reward=offer.reward, phi=phi)
        return dict(zip(ids, rho.tolist())), True, 0.0
    kind: Literal["linear", "quadratic"] = "quadratic" if quadratic else "linear"
    u = FollowerUtility(nu, offer.reward, phi, cost=kind, caps=caps)
    eq = solve_followers(u, analytic=True)
    return dict(zip(ids, eq.rho.tolist())), eq.converged, eq.residual


class _Cached:
    """Per-round cache of the equilibrium, keyed by the round's offer and market objects."""

    def __init__(self) -> None:
        self._key: tuple | None = None
        self._value: dict[int, float] = {}

    def equilibrium_for(self, offer: Offer, market: MarketView) -> dict[int, float]:
        key = (market.info.round, id(offer), id(market))
        if key != self._key:
            self._value = self.compute(offer, market)
            self._key = key
        return self._value

    def compute(self, offer: Offer, market: MarketView) -> dict[int, float]:
        return equilibrium(offer, players(offer, market))[0]


@register("policy", "best_response")
class BestResponse(_Cached):
    """Complete information: play the equilibrium budget ρ_i* (Theorem 1; numeric otherwise).

    Declines with reason ``inactive`` outside the active set (ρ_i* = 0), ``no_reward`` when
    R_t = 0, and ``budget`` when ρ_i* exceeds its remaining zCDP budget.
    """

    def __init__(self, config: object) -> None:
        super().__init__()
        del config

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        if offer.reward <= 0:
            return Response(me.client_id, participate=False, reason="no_reward")
        rho = self.equilibrium_for(offer, market).get(me.client_id, 0.0)
        if rho <= 0:
            return Response(me.client_id, participate=False, reason="inactive")
        if rho > rho_remaining(me):
            return Response(me.client_id, participate=False, reason="budget")
        return Response(me.client_id, participate=True, rho=rho)


@register("policy", "budget_aware")
class BudgetAware(_Cached):
    """Best response in the game where every budget is capped by what is left of it.

    Each player's cap is its remaining zCDP budget (public, as ν); players with less than
    ``min_rho`` left leave the game (reason ``budget``), so clients drop out as budgets run
    out. The capped equilibrium is solved numerically (best responses clipped to the cap).
    """

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        min_rho: PositiveFloat = 1e-6

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.min_rho = config.min_rho

    def compute(self, offer: Offer, market: MarketView) -> dict[int, float]:
        live = [c for c in players(offer, market) if rho_remaining(c) >= self.min_rho]
        caps = np.minimum([rho_remaining(c) for c in live], 1e300)  # inf: no budget
        return equilibrium(offer, live, caps=caps)[0]

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        if rho_remaining(me) < self.min_rho:
            return Response(me.client_id, participate=False, reason="budget")
        if offer.reward <= 0:
            return Response(me.client_id, participate=False, reason="no_reward")
        rho = self.equilibrium_for(offer, market).get(me.client_id, 0.0)
        if rho <= 0:
            return Response(me.client_id, participate=False, reason="inactive")
        return Response(me.client_id, participate=True, rho=min(rho, rho_remaining(me)))


@register("policy", "fixed")
class FixedRho:
    """Take part every round at a constant zCDP budget ``rho`` while the budget lasts."""

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        rho: PositiveFloat = 0.1

    def __init__(self, config: Config) -> None:
        self.rho = config.rho

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        if self.rho > rho_remaining(me):
            return Response(me.client_id, participate=False, reason="budget")
        return Response(me.client_id, participate=True, rho=self.rho)
