"""The noise a round leaves in the aggregate: paper 004's columns, from the round's plan.

Rounds gain ``colluders`` (colluders among the round's selected clients),
``residual_noise_var`` (per-coordinate noise variance left in the equal-weight average of the
received uploads) and ``update_norm`` (L2 norm of the mean of the selected clients' clipped
updates, before noise: the signal that noise is measured against); clients gain
``effective_noise_var`` (per-coordinate variance of the noise on its contribution that the
server plus the colluders cannot remove; 0 for a colluder, NaN when not selected).

A mechanism keeps none of this between phases: the columns are computed from the round's
frozen :class:`~fedgame.privacy.base.PrivacyPlan` once the uploads are over (its noise std
and design, and the fault draw the model adds to it), and ``update_norm`` is the metric
``privatise`` returns with the noised updates (:meth:`ReportsNoise.clip_updates`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from fedgame.privacy.base import PrivacyPlan, clip_rows
from fedgame.views import SetupContext

if TYPE_CHECKING:
    import torch


class ReportsNoise:
    """Mixin: paper 004's noise columns (the module docstring) from the round's plan
    (the ``ReportsRelease`` capability).

    A mechanism clips through :meth:`clip_updates`, returns ``(updates, metrics)`` from
    ``privatise`` and defines :meth:`residual_and_effective`.
    """

    round_columns: tuple[str, ...] = ("colluders", "residual_noise_var", "update_norm")
    client_columns: tuple[str, ...] = ("effective_noise_var",)
    #: every client's colluder flag, fixed over the run (set-up state)
    colluder: np.ndarray = np.zeros(0, dtype=bool)

    def prepare_report(self, ctx: SetupContext) -> None:
        """Every client's colluder flag (fixed over the run)."""
        self.colluder = np.array([c.colluder for c in ctx.clients], dtype=bool)

    def colluders(self, plan: PrivacyPlan) -> np.ndarray:
        """Mask over ``plan.client_ids`` of the colluders among them."""
        ids = list(plan.client_ids)
        return self.colluder[ids] if self.colluder.size else np.zeros(len(ids), dtype=bool)

    @staticmethod
    def clip_updates(updates: torch.Tensor, clip: float) -> tuple[torch.Tensor, dict[str, Any]]:
        """Each row clipped to L2 norm ``clip``, and the metric ``update_norm``: the norm of
        their mean (a 0-d tensor, read once the phase is over)."""
        clipped = clip_rows(updates, clip)
        return clipped, {"update_norm": clipped.mean(dim=0).norm()}

    def residual_and_effective(
        self, plan: PrivacyPlan, late: np.ndarray, colluders: np.ndarray
    ) -> tuple[float, Any]:
        """(residual variance of the average, effective variance per selected client)."""
        raise NotImplementedError

    def release_metrics(
        self, plan: PrivacyPlan
    ) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
        """The round's ``colluders`` and ``residual_noise_var``, and each selected client's
        ``effective_noise_var`` (none before the round's faults are known)."""
        late = plan.stragglers()
        if late is None or not plan.client_ids:
            return {}, {}
        colluders = self.colluders(plan)
        residual, effective = self.residual_and_effective(plan, late, colluders)
        rounds = {"colluders": float(colluders.sum()), "residual_noise_var": residual}
        clients = {"effective_noise_var": dict(zip(plan.client_ids, map(float, effective)))}
        return rounds, clients
