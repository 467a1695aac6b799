"""Uniform selection: K clients per round, uniformly without replacement."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from fedgame.errors import ScenarioError
from fedgame.registry import Example, register
from fedgame.views import ClientView, RoundInfo, Selection, UniformProbabilities, ids_of


@register("selection", "uniform")
class UniformSelection:
    """Choose ``k`` of the candidates uniformly at random without replacement.

    When fewer than ``k`` clients are available, all of them are selected.
    """

    example = Example({"k": 4})

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        k: PositiveInt = Field(
            10, description="clients selected per round (all when fewer are willing)"
        )

    def __init__(self, config: Config) -> None:
        self.k = config.k

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        clients = scenario.population.clients
        if config.k > clients:
            raise ScenarioError(f"{key}.k", config.k, f"must be <= population.clients ({clients})")

    def expected_fraction(self, num_clients: int) -> float:
        return min(self.k / num_clients, 1.0)

    def select(
        self, candidates: Sequence[ClientView], *, info: RoundInfo, rng: np.random.Generator
    ) -> Selection:
        pool = ids_of(candidates)
        ids = pool
        if len(ids) > self.k:
            ids = np.sort(rng.choice(ids, size=self.k, replace=False))
        p = min(self.k / max(len(candidates), 1), 1.0)
        return Selection(tuple(ids.tolist()), UniformProbabilities(pool, p))
