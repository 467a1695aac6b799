"""WeiAvg (Liu et al., VLDB 2021; baseline of paper 000): weights proportional to eps_n."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedgame import reads
from fedgame.mechanisms.aggregation.weighted import WeightedSum
from fedgame.registry import register
from fedgame.views import ClientView


@register("aggregation", "weighted_eps", reads=(reads.BUDGET_EPSILON,))
class WeightedEpsilon(WeightedSum):
    """WeiAvg: each received update weighted by its client's total budget eps_n (note 000 §6.4)."""

    def weights(self, clients: Sequence[ClientView]) -> np.ndarray:
        return np.array([c.epsilon_total for c in clients], dtype=float)
