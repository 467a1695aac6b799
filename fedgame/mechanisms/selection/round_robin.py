"""Round-robin selection (paper 002 Alg. 1): query t goes to clients (t b + j) mod N, j < b.

Every client then replies exactly b T/N times (up to rounding), which the Laplace accounting
of paper 002 relies on; the exact count of each client over the active rounds is exposed to
the privacy mechanism through ``planned_participations(client_id)``. Rounds after
``active_rounds`` select nobody (column ``queries_active`` = 0).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from fedgame.errors import ScenarioError
from fedgame.registry import Example, register
from fedgame.views import ClientView, RoundInfo, Selection, SetupContext


def round_robin_counts(*, num_clients: int, per_round: int, rounds: int) -> np.ndarray:
    """Replies of each client over ``rounds`` round-robin queries of ``per_round`` clients."""
    slots = np.arange(rounds * per_round) % num_clients
    return np.bincount(slots, minlength=num_clients)


@register("selection", "round_robin")
class RoundRobin:
    """b clients per round in a fixed cyclic order (paper 002's FedSGD-DPC)."""

    example = Example({"b": 3})

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        b: PositiveInt = Field(1, description="clients queried per round")
        active_rounds: PositiveInt | None = Field(
            None, description="rounds that query anyone (default: all)"
        )

    round_columns: tuple[str, ...] = ("queries_active", "queries_b", "queries_T")

    def __init__(self, config: Any) -> None:
        self.config = config
        self.b = config.b
        self.active_rounds: int | None = config.active_rounds
        self.n = 0

    @staticmethod
    def check_scenario(config: Any, scenario: Any, *, key: str) -> None:
        n = scenario.population.clients
        if config.b > n:
            raise ScenarioError(f"{key}.b", config.b, f"must be <= population.clients ({n})")

    def expected_fraction(self, num_clients: int) -> float:
        return min(self.b / num_clients, 1.0)

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        self.n = ctx.num_clients
        self.rounds = ctx.rounds
        if self.active_rounds is None:
            self.active_rounds = ctx.rounds

    @property
    def queries(self) -> int:
        return min(self.active_rounds or self.rounds, self.rounds)

    def select(
        self, candidates: Sequence[ClientView], *, info: RoundInfo, rng: np.random.Generator
    ) -> tuple[Selection, dict[str, float]]:
        """The round's block of ``b`` clients (none after the active rounds), with
        ``queries_active`` and the plan's metrics (:meth:`plan_metrics`)."""
        n = self.n or info.num_clients
        if info.round > self.queries:
            return Selection(()), {"queries_active": 0.0, **self.plan_metrics()}
        start = (info.round - 1) * self.b
        planned = {(start + j) % n for j in range(self.b)}
        ids = tuple(sorted(c.client_id for c in candidates if c.client_id in planned))
        chosen = Selection(ids, {c.client_id: self.b / n for c in candidates})
        return chosen, {"queries_active": 1.0, **self.plan_metrics()}

    def planned_participations(self, client_id: int) -> int:
        """Exact replies of the client over the active rounds."""
        counts = round_robin_counts(num_clients=self.n, per_round=self.b, rounds=self.queries)
        return int(counts[client_id])

    def budget_fraction(self, client_id: int) -> float:
        return 1.0

    def plan_metrics(self) -> dict[str, float]:
        """The plan's figures, the same every round: clients per query b and queries T."""
        return {"queries_b": float(self.b), "queries_T": self.queries}
