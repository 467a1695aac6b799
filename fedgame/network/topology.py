"""Client-client topologies as networkx graphs (nodes are client ids 0..N-1).

Every client also has a link to the server; that link is not a graph edge. Pairwise
mechanisms (masks, pairwise noise) exist only on graph edges.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from fedgame.registry import register


@register("topology", "star")
class Star:
    """Clients talk only to the server: no client-client edges."""

    def __init__(self, config: object) -> None:
        del config

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        graph = nx.empty_graph(num_clients)
        return graph


@register("topology", "complete")
class Complete:
    """Every pair of clients shares a link (the complete graph K_N)."""

    def __init__(self, config: object) -> None:
        del config

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        return nx.complete_graph(num_clients)
