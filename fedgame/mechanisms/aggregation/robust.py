"""Robust aggregators (not sum-decomposable: secure aggregation cannot wrap them)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fedgame.registry import register
from fedgame.views import ClientView


def coordinate_median(updates: torch.Tensor) -> torch.Tensor:
    """Coordinate-wise median of the rows ``[K, P] -> [P]`` (mean of the two middle values
    when K is even; Yin et al. 2018, "Byzantine-robust distributed learning", median rule)."""
    k = updates.shape[0]
    ordered = updates.sort(dim=0).values
    if k % 2:
        return ordered[k // 2]
    return 0.5 * (ordered[k // 2 - 1] + ordered[k // 2])


@register("aggregation", "median")
class CoordinateMedian:
    """Coordinate-wise median of the received updates (Yin et al. 2018).

    Robust to a minority of arbitrary (Byzantine or very noisy) updates; ignores weights. It
    is not a weighted sum, so neither secure aggregation nor central noise calibrated to a
    mean's sensitivity can wrap it (both are refused at validation).
    """

    def __init__(self, config: object) -> None:
        self.config = config

    def aggregate(
        self,
        updates: torch.Tensor,
        *,
        clients: Sequence[ClientView],
        dropped: Sequence[ClientView] = (),
        rng: np.random.Generator | None = None,
    ) -> torch.Tensor | None:
        if updates.shape[0] == 0:
            return torch.zeros(updates.shape[1], dtype=updates.dtype, device=updates.device)
        return coordinate_median(updates)
