"""Independent faults: each link fails and each client straggles on its own coin."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fedgame.mechanisms.base import FaultDraw
from fedgame.registry import register
from fedgame.views import ClientView, RoundInfo


@register("faults", "independent")
class IndependentFaults:
    """Per round: client-server link ``i`` is down with probability ``link_failure``; client
    ``i`` straggles (misses the upload deadline) with its own ``straggle_prob``.

    All draws are independent across clients and rounds.
    """

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        link_failure: float = Field(0.0, ge=0.0, le=1.0)

    def __init__(self, config: Config) -> None:
        self.link_failure = config.link_failure

    def draw(
        self,
        clients: Sequence[ClientView],
        *,
        graph: Any = None,
        info: RoundInfo,
        rng: np.random.Generator,
    ) -> FaultDraw:
        n = len(clients)
        p_straggle = np.array([c.straggle_prob for c in clients], dtype=float)
        link_up = rng.random(n) >= self.link_failure
        straggler = rng.random(n) < p_straggle
        return FaultDraw(link_up=link_up, straggler=straggler)


@register("faults", "none")
class NoFaults:
    """Every link up, no stragglers (ignores the clients' straggle probabilities)."""

    def __init__(self, config: object) -> None:
        del config

    def draw(
        self,
        clients: Sequence[ClientView],
        *,
        graph: Any = None,
        info: RoundInfo,
        rng: np.random.Generator,
    ) -> FaultDraw:
        n = len(clients)
        return FaultDraw(link_up=np.ones(n, dtype=bool), straggler=np.zeros(n, dtype=bool))
