"""Topology plug-ins: seeded, reproducible graphs and edge-list validation."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame import registry
from fedgame.cli import main
from fedgame.errors import ScenarioError
from fedgame.network.topology import check_edges, read_edges, square_distance_cdf

RANDOM = [
    ("erdos_renyi", {"p": 0.3}),
    ("watts_strogatz", {"k": 4, "p": 0.3}),
    ("barabasi_albert", {"m": 2}),
    ("random_geometric", {"radius": 0.4}),
]


def build(kind: str, params: dict, seed: int, n: int = 30):
    topo = registry.create("topology", kind, params)
    return topo.build(n, rng=np.random.default_rng(seed))


@pytest.mark.parametrize(("kind", "params"), RANDOM)
def test_random_topologies_are_seeded(kind, params):
    a, b, c = build(kind, params, 1), build(kind, params, 1), build(kind, params, 2)
    assert sorted(a.nodes()) == list(range(30))
    assert sorted(a.edges()) == sorted(b.edges())
    assert sorted(a.edges()) != sorted(c.edges())


def test_complete_and_star():
    assert build("complete", {}, 0, 6).number_of_edges() == 15
    assert build("star", {}, 0, 6).number_of_edges() == 0


def test_edge_list_from_file_and_inline(tmp_path):
    path = tmp_path / "edges.txt"
    path.write_text("# ring\n0 1\n1 2\n2 0  # closing edge\n")
    g = build("edge_list", {"edges": str(path)}, 0, 4)
    assert sorted(g.edges()) == [(0, 1), (0, 2), (1, 2)] and g.number_of_nodes() == 4
    assert read_edges([[3, 1]]) == [(3, 1)]
    with pytest.raises(ScenarioError, match="edges"):
        check_edges([(0, 9)], 5, key="edges")


def test_edge_list_naming_unknown_client_exits_2(tmp_path, write_scenario, tiny, capsys):
    tiny["network"]["topology"] = {"kind": "edge_list", "edges": [[0, 1], [2, 40]]}
    assert main(["validate", str(write_scenario(tiny))]) == 2
    assert "network.topology.edges" in capsys.readouterr().err


def test_topology_parameters_checked_against_population(write_scenario, tiny, capsys):
    tiny["network"]["topology"] = {"kind": "barabasi_albert", "m": 12}
    assert main(["validate", str(write_scenario(tiny))]) == 2
    assert "network.topology.m" in capsys.readouterr().err
    tiny["network"]["topology"] = {"kind": "erdos_renyi", "p": 1.5}
    assert main(["validate", str(write_scenario(tiny))]) == 2
    assert "network.topology.p" in capsys.readouterr().err


@pytest.mark.parametrize("radius", [0.05, 0.3, 0.7, 1.0, 1.2, 1.35, 1.5])
def test_square_distance_cdf_matches_sampled_pairs(radius):
    """The unit square's pair-distance law (random_geometric's expected edges), both pieces
    and the border, against 200,000 sampled pairs (within 4 standard errors)."""
    rng = np.random.default_rng(11)
    d = np.linalg.norm(rng.random((200_000, 2)) - rng.random((200_000, 2)), axis=1)
    sampled = float((d <= radius).mean())
    se = max(np.sqrt(sampled * (1 - sampled) / d.size), 1e-6)
    assert abs(square_distance_cdf(radius) - sampled) <= 4 * se
