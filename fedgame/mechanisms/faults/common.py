"""Shared pieces of the fault models: link draws and straggler-count laws.

A fault model keeps nothing of a round: its ``FaultDraw`` is the round's record, which the
model hands, once the uploads are over, to the mechanisms that must know which selected
clients straggled and which client-client edges failed (secure aggregation, LightDP's
metrics). Every fault model here offers ``straggler_pmf(clients, *, graph)``: the law of the
number of stragglers among ``clients`` in one round (LightDP-FL's g(s), paper 004 Sec.
V-C), consumed in ``prepare``/``plan``.

Timing: stragglers are decided in phase 1 with the rest of the round's faults, but they only
take effect in phase 7 (upload), after every selected client has trained and committed its
noise (phase 6). That is the LightDP-FL situation: a straggler's pairwise noise is already in
its partners' uploads when its own upload goes missing.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fedgame.errors import ScenarioError
from fedgame.views import ClientView, column_of

if TYPE_CHECKING:
    pass

#: a probability in [0, 1] (validated; bad values name the key)
Prob = Annotated[float, Field(ge=0.0, le=1.0)]


class LinkConfig(BaseModel):
    """Link failures shared by every fault model.

    ``link_failure``: each client-server link is down for the whole round with this
    probability (the client is unreachable and does not train). ``edge_failure``: each
    client-client graph edge is down this round with this probability (``failed_edges``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    link_failure: Prob = Field(
        0.0, description="probability a client-server link is down for a round, [0, 1]"
    )
    edge_failure: Prob = Field(
        0.0, description="probability a client-client graph edge is down for a round, [0, 1]"
    )


def check_server_reachable(link_failure: float, *, key: str) -> None:
    """A fault model that takes every client-server link down is a configuration error."""
    if link_failure >= 1.0:
        raise ScenarioError(
            key,
            link_failure,
            "must be < 1: with 1 every client-server link is down (disconnected server)",
        )


#: each topology's sorted edge array, built once per graph: a run's topology is built once
#: and never changed, and walking the adjacency of a million nodes costs ~0.1 s per round
_EDGES: weakref.WeakKeyDictionary[Any, np.ndarray] = weakref.WeakKeyDictionary()


def sorted_edges(graph: Any) -> np.ndarray:
    """The graph's edges as sorted ``(min, max)`` pairs ``[E, 2]`` (computed once per graph)."""
    if graph is None:
        return np.zeros((0, 2), dtype=np.int64)
    edges = _EDGES.get(graph)
    if edges is None:
        pairs = np.sort(np.array(list(graph.edges()), dtype=np.int64).reshape(-1, 2), axis=1)
        edges = _EDGES[graph] = pairs[np.lexsort((pairs[:, 1], pairs[:, 0]))]
    return edges


def draw_links(
    n: int, graph: Any, *, link_failure: float, edge_failure: float, rng: np.random.Generator
) -> tuple[np.ndarray, tuple[tuple[int, int], ...]]:
    """Client-server links up [n] and the failed client-client edges (sorted pairs).

    Edge coins are drawn only when ``edge_failure > 0``: otherwise the graph is not read, so
    the draws after these (e.g. straggler coins) do not depend on the topology.
    """
    link_up = rng.random(n) >= link_failure
    if edge_failure <= 0:
        return link_up, ()
    edges = sorted_edges(graph)
    down = rng.random(len(edges)) < edge_failure
    failed = tuple((int(i), int(j)) for i, j in edges[down].tolist())
    return link_up, failed


def poisson_binomial(probs: Sequence[float] | np.ndarray) -> np.ndarray:
    """pmf of the number of successes of independent Bernoulli(p_i) trials (length n + 1)."""
    pmf = np.zeros(len(probs) + 1)
    pmf[0] = 1.0
    for k, p in enumerate(np.asarray(probs, dtype=float), start=1):
        pmf[1 : k + 1] = pmf[1 : k + 1] * (1 - p) + pmf[:k] * p
        pmf[0] *= 1 - p
    return pmf


def neighbourhood(graph: Any, centre: int, radius: int) -> list[int]:
    """Clients within ``radius`` hops of ``centre`` (the centre included)."""
    import networkx as nx

    if graph is None or radius == 0:
        return [centre]
    return sorted(nx.single_source_shortest_path_length(graph, centre, cutoff=radius))


def straggle_probs(clients: Sequence[ClientView]) -> np.ndarray:
    """Each client's straggle probability (a column read on ``ClientViews``)."""
    return column_of(clients, "straggle_prob")
