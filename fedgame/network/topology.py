"""Client-client topologies as networkx graphs (nodes are client ids 0..N-1).

Every client also has a link to the server; that link is not a graph edge. Pairwise
mechanisms (masks, pairwise noise, secret shares) exist only on graph edges. Random
generators are seeded from the ``topology`` stream of the SeedPlan: the generator passed to
``build`` yields one integer seed for networkx, so the same scenario seed gives the same graph.
Every built-in topology declares :class:`ExpectsEdges` (``expected_edges(num_clients)``) so the
preflight checks can size the graph before it is built (networkx keeps about
:data:`BYTES_PER_EDGE` bytes per edge).
"""

from __future__ import annotations

import math
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from fedgame.errors import ScenarioError
from fedgame.registry import register

if TYPE_CHECKING:
    import networkx as nx

#: approximate memory networkx needs per undirected edge (two adjacency dict entries)
BYTES_PER_EDGE = 400
#: largest edge file read (about two million "i j" lines)
MAX_EDGE_FILE_BYTES = 32 << 20


class Topology(Protocol):
    """A client-client graph over ids 0..N-1, seeded from the ``topology`` stream."""

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph: ...


@runtime_checkable
class ExpectsEdges(Protocol):
    """Capability of a topology: its expected edge count for N clients; the memory estimate
    (:mod:`fedgame.scenario.footprint`) reads it, counting no edges for a topology without it."""

    def expected_edges(self, num_clients: int) -> float: ...


def _pairs(n: int) -> float:
    return n * (n - 1) / 2


def _seed(rng: np.random.Generator) -> int:
    """One networkx seed drawn from the topology stream."""
    return int(rng.integers(0, 2**31 - 1))


def _clients(scenario: Any) -> int:
    return int(scenario.population.clients)


@register("topology", "star")
class Star:
    """Clients talk only to the server: no client-client edges."""

    def __init__(self, config: object) -> None:
        del config

    def expected_edges(self, num_clients: int) -> float:
        return 0.0

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        import networkx as nx

        return nx.empty_graph(num_clients)


@register("topology", "complete")
class Complete:
    """Every pair of clients shares a link (the complete graph K_N)."""

    def __init__(self, config: object) -> None:
        del config

    def expected_edges(self, num_clients: int) -> float:
        return _pairs(num_clients)

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        import networkx as nx

        return nx.complete_graph(num_clients)


@register("topology", "erdos_renyi")
class ErdosRenyi:
    """G(N, p): each pair of clients is linked independently with probability ``p``."""

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        p: float = Field(0.2, ge=0.0, le=1.0, description="edge probability")

    def __init__(self, config: Config) -> None:
        self.p = config.p

    def expected_edges(self, num_clients: int) -> float:
        return self.p * _pairs(num_clients)

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        import networkx as nx

        return nx.gnp_random_graph(num_clients, self.p, seed=_seed(rng))


@register("topology", "watts_strogatz")
class WattsStrogatz:
    """Small world: ring lattice with ``k`` nearest neighbours, each edge rewired w.p. ``p``."""

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        k: PositiveInt = Field(
            4, description="each client's neighbours in the ring before rewiring"
        )
        p: float = Field(0.1, ge=0.0, le=1.0, description="edge probability")

    def __init__(self, config: Config) -> None:
        self.k, self.p = config.k, config.p

    def expected_edges(self, num_clients: int) -> float:
        return num_clients * (self.k // 2)

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        n = _clients(scenario)
        if config.k >= n:
            raise ScenarioError(f"{key}.k", config.k, f"must be < population.clients ({n})")

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        import networkx as nx

        return nx.watts_strogatz_graph(num_clients, self.k, self.p, seed=_seed(rng))


@register("topology", "barabasi_albert")
class BarabasiAlbert:
    """Preferential attachment: each new client links to ``m`` existing ones."""

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        m: PositiveInt = Field(2, description="edges each new client attaches with")

    def __init__(self, config: Config) -> None:
        self.m = config.m

    def expected_edges(self, num_clients: int) -> float:
        return self.m * max(num_clients - self.m, 0)

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        n = _clients(scenario)
        if config.m >= n:
            raise ScenarioError(f"{key}.m", config.m, f"must be < population.clients ({n})")

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        import networkx as nx

        return nx.barabasi_albert_graph(num_clients, self.m, seed=_seed(rng))


@register("topology", "random_geometric")
class RandomGeometric:
    """Clients at uniform points of the unit square, linked when closer than ``radius``.

    Node attribute ``pos`` holds the position (regions for correlated outages).
    """

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        radius: PositiveFloat = Field(
            0.3, description="clients closer than this in the unit square are linked"
        )

    def __init__(self, config: Config) -> None:
        self.radius = config.radius

    def expected_edges(self, num_clients: int) -> float:
        return _pairs(num_clients) * square_distance_cdf(self.radius)

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        import networkx as nx

        return nx.random_geometric_graph(num_clients, self.radius, seed=_seed(rng))


def square_distance_cdf(r: float) -> float:
    """P(‖u − v‖ ≤ r) for u, v uniform on the unit square (the square's border included).

    With s = r²: πs − 8/3·s^(3/2) + s²/2 for s ≤ 1; 1/3 − 2s − s²/2 + 4/3·(2s + 1)·√(s − 1)
    + 2s·arcsin(2/s − 1) for 1 < s ≤ 2; 1 beyond (Philip, *The probability distribution of
    the distance between two random points in a box*, 2007). πr² alone overcounts by ~30 % at
    r = 0.3.

    >>> round(square_distance_cdf(1.0), 4), square_distance_cdf(2.0 ** 0.5)
    (0.9749, 1.0)
    """
    s = r * r
    if s <= 1.0:
        return math.pi * s - 8.0 / 3.0 * s**1.5 + s * s / 2.0
    if s >= 2.0:
        return 1.0
    root = math.sqrt(s - 1.0)
    value = 1 / 3 - 2 * s - s * s / 2 + 4 / 3 * (2 * s + 1) * root + 2 * s * math.asin(2 / s - 1)
    return min(1.0, value)


def read_edges(source: str | list[Any], *, key: str = "edges") -> list[tuple[int, int]]:
    """Edges from a file of ``"i j"`` lines (``#`` comments) or an inline list of pairs."""
    if isinstance(source, str):
        text = _read_edge_file(Path(source).expanduser(), source, key=key)
        rows = [ln.split("#", 1)[0].split() for ln in text.splitlines()]
        pairs: list[Any] = [r for r in rows if r]
    else:
        pairs = list(source)
    edges = []
    for pair in pairs:
        try:
            i, j = (int(v) for v in pair)
        except (TypeError, ValueError):
            raise ScenarioError(key, pair, "each edge is two integer client ids 'i j'") from None
        edges.append((i, j))
    return edges


def _read_edge_file(path: Path, source: str, *, key: str) -> str:
    """A regular UTF-8 file of at most ``MAX_EDGE_FILE_BYTES`` bytes (no devices, no FIFOs)."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
        data = _head(path, MAX_EDGE_FILE_BYTES + 1) if regular else b""
    except (OSError, ValueError) as exc:  # ValueError: a NUL byte in the path
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise ScenarioError(key, source, f"cannot be read: {reason or exc}") from None
    if not regular:
        raise ScenarioError(key, source, "a regular file of 'i j' lines (not a device)")
    if len(data) > MAX_EDGE_FILE_BYTES:
        raise ScenarioError(key, source, f"an edge file of at most {MAX_EDGE_FILE_BYTES} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(key, source, f"UTF-8 text (bad byte at offset {exc.start})") from None


def _head(path: Path, size: int) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(size)


def check_edges(edges: list[tuple[int, int]], num_clients: int, *, key: str) -> None:
    """Raise ScenarioError on an edge naming an unknown client or a self-loop."""
    for i, j in edges:
        if not (0 <= i < num_clients and 0 <= j < num_clients):
            raise ScenarioError(
                key, [i, j], f"edges name clients 0..{num_clients - 1} (population.clients)"
            )
        if i == j:
            raise ScenarioError(key, [i, j], "an edge joins two different clients")


@register("topology", "edge_list")
class EdgeList:
    """A fixed graph: ``edges`` is a file path of ``"i j"`` lines or an inline list of pairs."""

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        edges: str | list[tuple[int, int]] = Field(
            description="a file of 'i j' lines, or an inline list of [i, j] pairs"
        )

    def __init__(self, config: Config) -> None:
        self.source = config.edges

    def expected_edges(self, num_clients: int) -> float:
        return float(len(read_edges(self.source)))

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        edges = read_edges(config.edges, key=f"{key}.edges")
        check_edges(edges, _clients(scenario), key=f"{key}.edges")

    def build(self, num_clients: int, *, rng: np.random.Generator) -> nx.Graph:
        import networkx as nx

        edges = read_edges(self.source)
        check_edges(edges, num_clients, key="edges")
        graph = nx.empty_graph(num_clients)
        graph.add_edges_from(edges)
        return graph
