"""The noise a round leaves in the aggregate: paper 004's columns, from the round's plan.

Rounds gain ``colluders`` (colluders among the round's selected clients),
``residual_noise_var`` (per-coordinate noise variance left in the equal-weight average of the
received uploads) and ``update_norm`` (L2 norm of the mean of the selected clients' clipped
updates, before noise: the signal that noise is measured against); clients gain
``effective_noise_var`` (per-coordinate variance of the noise on its contribution that the
server plus the colluders cannot remove; 0 for a colluder, NaN when not selected).

What the columns need is one frozen :class:`RoundNoise` per round: the round's
:class:`~fedgame.privacy.base.PrivacyPlan` (its noise std and design), then the clipped
updates' norm (``privatise``) and the fault draw (``observe_faults``, once uploads are over),
each a new object replacing the last, never a field mutated in place.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from fedgame.mechanisms.base import FaultDraw
from fedgame.privacy.base import PrivacyPlan, clip_rows
from fedgame.views import RoundInfo, SetupContext

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class RoundNoise:
    """One round's noise, as the reporting phase reads it.

    ``colluders``: mask over ``plan.client_ids``; ``update_norm``: a 0-d tensor (read when
    the round is reported, so the GPU is not synchronised in ``privatise``); ``draw``: the
    round's faults, known once uploads are over.
    """

    plan: PrivacyPlan
    round: int
    colluders: np.ndarray
    update_norm: Any = None
    draw: FaultDraw | None = None

    @property
    def ids(self) -> tuple[int, ...]:
        return self.plan.client_ids

    def stragglers(self) -> np.ndarray | None:
        """Mask over the selected clients of those whose upload is lost, if known."""
        if self.draw is None:
            return None
        return np.asarray(self.draw.straggler, dtype=bool)[list(self.ids)]

    def failed_edges(self) -> set[tuple[int, int]]:
        """Client-client links down this round (empty until the draw is known)."""
        return set() if self.draw is None else set(self.draw.failed_edges)


class ReportsNoise:
    """Mixin: paper 004's noise columns (the module docstring) from the round's RoundNoise.

    A mechanism calls :meth:`start_round` with the plan it returns, clips through
    :meth:`clip_updates`, and defines :meth:`residual_and_effective`.
    """

    round_columns: tuple[str, ...] = ("colluders", "residual_noise_var", "update_norm")
    client_columns: tuple[str, ...] = ("effective_noise_var",)
    colluder: np.ndarray = np.zeros(0, dtype=bool)
    #: the round's noise, or None before the first plan / after a round without one
    round_noise: RoundNoise | None = None

    def prepare_report(self, ctx: SetupContext) -> None:
        """Every client's colluder flag (fixed over the run)."""
        self.colluder = np.array([c.colluder for c in ctx.clients], dtype=bool)
        self.round_noise = None

    def start_round(self, plan: PrivacyPlan, *, info: RoundInfo) -> PrivacyPlan:
        """Keep ``plan`` as the round's noise; returns it."""
        ids = list(plan.client_ids)
        coll = self.colluder[ids] if self.colluder.size else np.zeros(len(ids), dtype=bool)
        self.round_noise = RoundNoise(plan, info.round, coll)
        return plan

    def clip_updates(self, updates: torch.Tensor, clip: float) -> torch.Tensor:
        """Each row clipped to L2 norm ``clip``; the norm of their mean joins the round."""
        clipped = clip_rows(updates, clip)
        if self.round_noise is not None:
            norm = clipped.mean(dim=0).norm()
            self.round_noise = dataclasses.replace(self.round_noise, update_norm=norm)
        return clipped

    def observe_faults(self, draw: FaultDraw, *, info: RoundInfo) -> None:
        """The round's faults, handed over once the uploads are over (``ObservesFaults``)."""
        noise = self.round_noise
        fresh = noise is not None and noise.round == info.round
        self.round_noise = dataclasses.replace(noise, draw=draw) if noise and fresh else None

    def residual_and_effective(self, noise: RoundNoise, late: np.ndarray) -> tuple[float, Any]:
        """(residual variance of the average, effective variance per selected client)."""
        raise NotImplementedError

    def round_metrics(self) -> dict[str, float]:
        noise = self.round_noise
        if noise is None or noise.draw is None or not noise.ids:
            return {}
        late = noise.stragglers()
        assert late is not None
        return {
            "colluders": float(noise.colluders.sum()),
            "residual_noise_var": self.residual_and_effective(noise, late)[0],
            "update_norm": math.nan if noise.update_norm is None else float(noise.update_norm),
        }

    def client_metrics(self) -> dict[str, dict[int, float]]:
        noise = self.round_noise
        if noise is None or noise.draw is None or not noise.ids:
            return {}
        late = noise.stragglers()
        assert late is not None
        effective = self.residual_and_effective(noise, late)[1]
        return {"effective_noise_var": dict(zip(noise.ids, map(float, effective)))}
