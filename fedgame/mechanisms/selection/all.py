"""Full participation: every available client is selected every round."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedgame.registry import register
from fedgame.views import ClientView, RoundInfo, Selection, ids_of


@register("selection", "all")
class AllSelection:
    """Select every candidate (every reachable client that chose to take part)."""

    def __init__(self, config: object) -> None:
        del config

    def expected_fraction(self, num_clients: int) -> float:
        return 1.0

    def select(
        self, candidates: Sequence[ClientView], *, info: RoundInfo, rng: np.random.Generator
    ) -> Selection:
        ids = tuple(np.sort(ids_of(candidates)).tolist())
        return Selection(ids, dict.fromkeys(ids, 1.0))
