"""Independent faults: each link fails and each client straggles on its own coin."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field

from fedgame import reads
from fedgame.mechanisms.base import FaultDraw
from fedgame.mechanisms.faults.common import (
    LinkConfig,
    Prob,
    check_server_reachable,
    draw_links,
    poisson_binomial,
    straggle_probs,
)
from fedgame.registry import register
from fedgame.views import ClientView, RoundInfo


@register("faults", "independent", reads=reads.independent_faults)
class IndependentFaults:
    """Per round: client-server link ``i`` is down with probability ``link_failure``; each
    client-client edge is down with ``edge_failure``; client ``i`` straggles (misses the upload
    deadline) with its own ``straggle_prob``, or because its upload is lost
    (``upload_failure``, the per-link Bernoulli model of paper 004 Fig. 4).

    All draws are independent across clients, edges and rounds.
    """

    class Config(LinkConfig):
        upload_failure: Prob = Field(
            0.0,
            description="probability a trained update is lost in upload, per client-round, [0, 1]",
        )

    def __init__(self, config: Config) -> None:
        self.config = config
        self.link_failure = config.link_failure

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_server_reachable(config.link_failure, key=f"{key}.link_failure")
        check_server_reachable(config.upload_failure, key=f"{key}.upload_failure")

    def _late_probs(self, clients: Sequence[ClientView]) -> np.ndarray:
        p = straggle_probs(clients)
        return 1.0 - (1.0 - p) * (1.0 - self.config.upload_failure)

    def straggler_pmf(self, clients: Sequence[ClientView], *, graph: Any = None) -> np.ndarray:
        """Poisson-binomial law of the straggler count among ``clients``."""
        return poisson_binomial(self._late_probs(clients))

    def draw(
        self,
        clients: Sequence[ClientView],
        *,
        graph: Any = None,
        info: RoundInfo,
        rng: np.random.Generator,
    ) -> FaultDraw:
        n = len(clients)
        link_up, failed = draw_links(
            n,
            graph,
            link_failure=self.link_failure,
            edge_failure=self.config.edge_failure,
            rng=rng,
        )
        straggler = rng.random(n) < straggle_probs(clients)
        if self.config.upload_failure > 0:
            straggler |= rng.random(n) < self.config.upload_failure
        return FaultDraw(link_up, straggler, failed)


@register("faults", "none")
class NoFaults:
    """Every link up, no stragglers (ignores the clients' straggle probabilities)."""

    def __init__(self, config: object) -> None:
        del config

    def straggler_pmf(self, clients: Sequence[ClientView], *, graph: Any = None) -> np.ndarray:
        pmf = np.zeros(len(clients) + 1)
        pmf[0] = 1.0
        return pmf

    def draw(
        self,
        clients: Sequence[ClientView],
        *,
        graph: Any = None,
        info: RoundInfo,
        rng: np.random.Generator,
    ) -> FaultDraw:
        n = len(clients)
        draw = FaultDraw(link_up=np.ones(n, dtype=bool), straggler=np.zeros(n, dtype=bool))
        return draw
