"""Weighted-sum aggregators: update = Σ_k w_k u_k / Σ_k w_k."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from fedgame.registry import register
from fedgame.views import ClientView, column_of


class WeightedSum:
    """Base for sum-decomposable aggregators (secure aggregation can wrap these)."""

    def __init__(self, config: object) -> None:
        self.config = config

    def weights(self, clients: Sequence[ClientView]) -> np.ndarray:
        raise NotImplementedError

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
        w = torch.as_tensor(self.weights(clients), dtype=updates.dtype, device=updates.device)
        return (w / w.sum()) @ updates


@register("aggregation", "fedavg")
class FedAvg(WeightedSum):
    """FedAvg: weights proportional to each client's dataset size |D_k| (McMahan et al. 2017)."""

    def weights(self, clients: Sequence[ClientView]) -> np.ndarray:
        return column_of(clients, "dataset_size")


@register("aggregation", "mean")
class Mean(WeightedSum):
    """Plain mean of the received updates (uniform 1/K weights)."""

    def weights(self, clients: Sequence[ClientView]) -> np.ndarray:
        return np.ones(len(clients), dtype=float)
