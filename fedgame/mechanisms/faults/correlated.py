"""Fault models with dependence: a bounded straggler count, and regional outages."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, NonNegativeInt

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.mechanisms.base import FaultDraw
from fedgame.mechanisms.faults.common import (
    LinkConfig,
    Prob,
    check_server_reachable,
    draw_links,
    neighbourhood,
    poisson_binomial,
    straggle_probs,
)
from fedgame.registry import register
from fedgame.views import ClientView, RoundInfo


@register("faults", "bounded_stragglers", reads=reads.edges)
class BoundedStragglers:
    """Per round S ~ Uniform{0, ..., max_stragglers} stragglers, a uniformly random subset.

    The straggler law of paper 004 Example 1 (S <= S_bar, g uniform). Stragglers are drawn
    among all N clients; ``straggler_pmf`` is exact when every client is selected. Link
    failures as in ``LinkConfig``; per-client ``straggle_prob`` is ignored.
    """

    class Config(LinkConfig):
        max_stragglers: NonNegativeInt = Field(
            0, description="S_bar: stragglers per round ~ Uniform{0..S_bar}, < population.clients"
        )

    def __init__(self, config: Config) -> None:
        self.config = config
        self.max_stragglers = config.max_stragglers

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_server_reachable(config.link_failure, key=f"{key}.link_failure")
        n = scenario.population.clients
        if config.max_stragglers >= n:
            raise ScenarioError(
                f"{key}.max_stragglers",
                config.max_stragglers,
                f"must be < population.clients ({n})",
            )

    def straggler_pmf(self, clients: Sequence[ClientView], *, graph: Any = None) -> np.ndarray:
        s_bar = min(self.max_stragglers, len(clients))
        pmf = np.zeros(len(clients) + 1)
        pmf[: s_bar + 1] = 1.0 / (s_bar + 1)
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
        cfg = self.config
        link_up, failed = draw_links(
            n, graph, link_failure=cfg.link_failure, edge_failure=cfg.edge_failure, rng=rng
        )
        count = int(rng.integers(0, min(cfg.max_stragglers, n) + 1))
        straggler = np.zeros(n, dtype=bool)
        straggler[rng.choice(n, size=count, replace=False)] = True
        return FaultDraw(link_up, straggler, failed, {"straggler_count": count})


@register("faults", "correlated", reads=reads.outages)
class CorrelatedOutages:
    """Regional outages: with probability ``outage_prob`` per round, a uniformly random
    client's ``radius``-hop graph neighbourhood fails together.

    ``effect="offline"``: the region's client-server links are down for the round (its
    clients are unreachable and do not train); ``effect="straggle"``: the region's uploads are
    lost after training (stragglers). Independent link failures and per-client
    ``straggle_prob`` coins come on top.
    """

    class Config(LinkConfig):
        outage_prob: Prob = Field(
            0.1, description="probability of a regional outage per round, [0, 1]"
        )
        radius: NonNegativeInt = Field(
            1, description="graph hops around the outage's centre that fail with it, >= 0"
        )
        effect: Literal["offline", "straggle"] = Field(
            "offline", description="offline: links down, no training; straggle: uploads lost"
        )
        use_straggle_prob: bool = Field(True, description="also draw per-client straggle coins")

    def __init__(self, config: Config) -> None:
        self.config = config

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_server_reachable(config.link_failure, key=f"{key}.link_failure")
        covers_all = scenario.network.topology.kind == "complete" and config.radius >= 1
        if config.effect == "offline" and config.outage_prob >= 1.0 and covers_all:
            raise ScenarioError(
                f"{key}.outage_prob",
                config.outage_prob,
                "must be < 1 here: on a complete graph every outage takes all client-server "
                "links down (disconnected server)",
            )

    def straggler_pmf(self, clients: Sequence[ClientView], *, graph: Any = None) -> np.ndarray:
        """Mixture over the outage centre of Poisson-binomial laws (region forced late)."""
        base = straggle_probs(clients) if self.config.use_straggle_prob else np.zeros(len(clients))
        pmf = poisson_binomial(base)
        if self.config.effect != "straggle" or self.config.outage_prob == 0 or graph is None:
            return pmf
        pos = {c.client_id: k for k, c in enumerate(clients)}
        n_all = graph.number_of_nodes()
        mix = np.zeros_like(pmf)
        for centre in range(n_all):
            probs = base.copy()
            for j in neighbourhood(graph, centre, self.config.radius):
                if j in pos:
                    probs[pos[j]] = 1.0
            mix += poisson_binomial(probs) / n_all
        return (1 - self.config.outage_prob) * pmf + self.config.outage_prob * mix

    def draw(
        self,
        clients: Sequence[ClientView],
        *,
        graph: Any = None,
        info: RoundInfo,
        rng: np.random.Generator,
    ) -> FaultDraw:
        n = len(clients)
        cfg = self.config
        link_up, failed = draw_links(
            n, graph, link_failure=cfg.link_failure, edge_failure=cfg.edge_failure, rng=rng
        )
        straggler = np.zeros(n, dtype=bool)
        if cfg.use_straggle_prob:
            straggler = rng.random(n) < straggle_probs(clients)
        region: list[int] = []
        if rng.random() < cfg.outage_prob:
            region = neighbourhood(graph, int(rng.integers(0, n)), cfg.radius)
            if cfg.effect == "offline":
                link_up[region] = False
            else:
                straggler[region] = True
        draw = FaultDraw(link_up, straggler, failed, {"outage_region": tuple(region)})
        return draw
