"""Power-of-Choice selection (Cho, Wang & Joshi 2022): the k largest local losses of d candidates.

Each round the server samples d candidates without replacement with probability proportional
to data size, queries their local losses at the current global model and keeps the k with
the largest. ``proxy: local_loss`` simulates that query on the learner's data (a client
reports F_n(w) honestly and for free: Power-of-Choice has no privacy accounting for it, note
001 §8.6); ``proxy: emd`` uses what the server already knows, each client's label-skew EMD
to the population (a larger skew means a larger loss under the global model), and is the
fallback when no learner is available. The selection is adaptive, so T_k is unknown in
advance: as in note 001 §7.2, each client's noise is sized for a participation cap
ceil(cap_factor * k * T * p^u_k) (hook ``planned_participations``) and a client stops being
eligible once it has taken part that often.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from fedgame.errors import ScenarioError
from fedgame.registry import Example, register
from fedgame.views import ClientView, RoundInfo, Selection, SetupContext


@register("selection", "power_of_choice")
class PowerOfChoice:
    """The k highest-loss clients among d size-weighted candidates (Cho et al. 2022)."""

    example = Example({"k": 3, "d": 5})

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        k: PositiveInt = Field(10, description="clients selected per round")
        d: PositiveInt | None = Field(
            None,
            description=(
                "candidates drawn by dataset size before picking the k highest proxies (default 2k)"
            ),
        )
        proxy: Literal["local_loss", "emd"] = Field(
            "local_loss", description="local_loss (the clients' loss on the global model) or emd"
        )
        cap_factor: PositiveFloat = Field(
            2.0, description="participation cap: cap_factor x expected participations"
        )

    round_columns = ("poc_proxy_emd",)

    def __init__(self, config: Config) -> None:
        self.config = config
        self.k = config.k
        self.d = config.d or 2 * config.k
        self.caps = np.zeros(0, dtype=int)
        self.learner = None

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        n = scenario.population.clients
        if config.k > n:
            raise ScenarioError(f"{key}.k", config.k, f"must be <= population.clients ({n})")
        if config.d is not None and not config.k <= config.d <= n:
            raise ScenarioError(f"{key}.d", config.d, f"in [k={config.k}, {n}]")

    def expected_fraction(self, num_clients: int) -> float:
        return min(self.k / num_clients, 1.0)

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        from fedgame.mechanisms.selection.probe import learner_of

        sizes = np.array([max(c.dataset_size, 1) for c in ctx.clients], dtype=float)
        pu = sizes / sizes.sum()
        self.caps = np.ceil(self.config.cap_factor * self.k * ctx.rounds * pu).astype(int)
        self.learner = learner_of(ctx) if self.config.proxy == "local_loss" else None

    def select(
        self, candidates: Sequence[ClientView], *, info: RoundInfo, rng: np.random.Generator
    ) -> Selection:
        from fedgame.mechanisms.selection.probe import client_losses

        pool = [c for c in candidates if c.participations < self.caps[c.client_id]]
        if not pool:
            return Selection(())
        sizes = np.array([max(c.dataset_size, 1) for c in pool], dtype=float)
        d = min(self.d, len(pool))
        pick = rng.choice(len(pool), size=d, replace=False, p=sizes / sizes.sum())
        chosen = [pool[i] for i in pick]
        ids = [c.client_id for c in chosen]
        if self.learner is not None:
            score = client_losses(self.learner, ids, seed=int(rng.integers(2**31)))
        else:
            score = np.array([c.emd for c in chosen])
        top = np.argsort(-score, kind="stable")[: self.k]
        sel = tuple(sorted(ids[i] for i in top))
        return Selection(sel, {c.client_id: d / len(pool) for c in pool})

    def planned_participations(self, client_id: int) -> int:
        """The participation cap the client's noise is sized for."""
        return int(self.caps[client_id])

    def budget_fraction(self, client_id: int) -> float:
        return 1.0

    def round_metrics(self) -> dict[str, float]:
        return {"poc_proxy_emd": float(self.learner is None)}


__all__ = ["PowerOfChoice"]
