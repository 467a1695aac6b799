"""Fault models: reproducible draws, straggler laws, validation of probabilities."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from fedgame import registry
from fedgame.cli import main
from fedgame.mechanisms.faults.common import poisson_binomial
from fedgame.mechanisms.faults.deadline import deadline_miss_probability
from fedgame.views import ClientView, RoundInfo

N = 30
GRAPH = nx.complete_graph(N)


def views(p: float = 0.2, sizes=None) -> list[ClientView]:
    sizes = sizes or [100] * N
    return [
        ClientView(i, sizes[i], 0.0, 1.0, 10.0, 1e-5, 0.0, 1.0, 1e-6, p, False) for i in range(N)
    ]


MODELS = [
    ("independent", {"link_failure": 0.1, "edge_failure": 0.05, "upload_failure": 0.05}),
    ("bounded_stragglers", {"max_stragglers": 8, "link_failure": 0.1, "edge_failure": 0.05}),
    ("correlated", {"outage_prob": 0.5, "radius": 1, "edge_failure": 0.05}),
    ("deadline", {"deadline": 0.15, "edge_failure": 0.05}),
]


def draw(kind, params, seed, rnd=1, graph=GRAPH):
    model = registry.create("faults", kind, params)
    return model.draw(
        views(), graph=graph, info=RoundInfo(rnd, 5, N), rng=np.random.default_rng([seed, rnd])
    )


@pytest.mark.parametrize(("kind", "params"), MODELS)
def test_draws_reproducible_from_seed(kind, params):
    a, b, c = draw(kind, params, 7), draw(kind, params, 7), draw(kind, params, 8)
    same = (
        np.array_equal(a.link_up, b.link_up)
        and np.array_equal(a.straggler, b.straggler)
        and a.failed_edges == b.failed_edges
    )
    assert same
    differ = (
        not np.array_equal(a.link_up, c.link_up)
        or not np.array_equal(a.straggler, c.straggler)
        or a.failed_edges != c.failed_edges
    )
    assert differ
    assert all(i < j and GRAPH.has_edge(i, j) for i, j in a.failed_edges)
    assert len(a.failed_edges) > 0  # 435 edges at 5%


def test_poisson_binomial_matches_binomial():
    from scipy.stats import binom

    np.testing.assert_allclose(
        poisson_binomial([0.05] * 50), binom.pmf(range(51), 50, 0.05), atol=1e-12
    )


def pmf_check(kind, params, graph=GRAPH, reps=3000):
    model = registry.create("faults", kind, params)
    pmf = model.straggler_pmf(views(), graph=graph)
    counts = np.bincount(
        [int(draw(kind, params, s, graph=graph).straggler.sum()) for s in range(reps)],
        minlength=N + 1,
    )
    assert pmf.sum() == pytest.approx(1.0)
    mean_pmf = float(np.arange(N + 1) @ pmf)
    assert counts @ np.arange(N + 1) / reps == pytest.approx(mean_pmf, abs=0.15 + 0.05 * mean_pmf)


def test_straggler_laws_match_draws():
    pmf_check("independent", {"upload_failure": 0.1})
    pmf_check("bounded_stragglers", {"max_stragglers": 8})
    ring = nx.cycle_graph(N)
    pmf_check("correlated", {"outage_prob": 0.5, "radius": 2, "effect": "straggle"}, graph=ring)
    pmf_check("deadline", {"deadline": 0.15, "compute_sigma": 0.4, "upload_latency": 0.03})


def test_bounded_never_exceeds_s_bar():
    assert (
        max(
            draw("bounded_stragglers", {"max_stragglers": 4}, s).straggler.sum() for s in range(200)
        )
        == 4
    )


def test_correlated_outage_takes_a_neighbourhood_offline():
    ring = nx.cycle_graph(N)
    d = draw(
        "correlated", {"outage_prob": 1.0, "radius": 1, "use_straggle_prob": False}, 3, graph=ring
    )
    region = d.details["outage_region"]
    assert len(region) == 3 and np.flatnonzero(~d.link_up).tolist() == list(region)


def test_deadline_probability_closed_forms():
    p = deadline_miss_probability(
        work_time=0.1, compute_sigma=0.5, upload_latency=0.0, deadline=0.2
    )
    from scipy.stats import norm

    assert p == pytest.approx(norm.sf(np.log(2) / 0.5))
    assert deadline_miss_probability(
        work_time=0.1, compute_sigma=0.0, upload_latency=0.05, deadline=0.2
    ) == pytest.approx(np.exp(-2))
    d = draw("deadline", {"deadline": 0.15}, 1)
    assert np.array_equal(d.straggler, d.details["finish_time"] > 0.15)


@pytest.mark.parametrize(
    ("faults", "key"),
    [
        ({"kind": "independent", "link_failure": 1.0}, "network.faults.link_failure"),
        ({"kind": "independent", "upload_failure": 1.0}, "network.faults.upload_failure"),
        ({"kind": "independent", "edge_failure": -0.1}, "network.faults.edge_failure"),
        ({"kind": "correlated", "outage_prob": 1.2}, "network.faults.outage_prob"),
        ({"kind": "bounded_stragglers", "max_stragglers": 12}, "network.faults.max_stragglers"),
    ],
)
def test_bad_fault_settings_exit_2(faults, key, tiny, write_scenario, capsys):
    tiny["network"]["faults"] = faults
    assert main(["validate", str(write_scenario(tiny))]) == 2
    assert key in capsys.readouterr().err
