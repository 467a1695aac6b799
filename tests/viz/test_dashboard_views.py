"""The dashboard's views without a browser: the network's layout, links and hover rows, the
curves' axes and noise, a sweep's runs for the replay."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("solara", reason="the viz extra (solara) is not installed")

from fedgame.cli import main
from fedgame.scenario.load import validate
from fedgame.viz.curves import curve_options
from fedgame.viz.data import denoised
from fedgame.viz.live import DashboardModel
from fedgame.viz.network import MAX_LINKS, SPRING_MAX, layout, network_option, sketch
from fedgame.viz.replay import ReplayModel, RunChoice, sweep_runs
from fedgame.viz.table import client_rows, round_table


def _xy(positions: dict[int, np.ndarray]) -> np.ndarray:
    return np.array([positions[i] for i in sorted(positions)])


def test_a_complete_graph_of_200_clients_is_summarised_and_its_clients_spread_out():
    graph = nx.complete_graph(200)
    positions = layout(graph)
    xy = _xy(positions)
    gaps = np.linalg.norm(xy[:, None] - xy[None], axis=-1)[np.triu_indices(200, 1)]
    assert np.abs(xy).max() == pytest.approx(1.0) and gaps.min() > 0.07  # no grey disc
    plan = sketch(graph, positions)
    assert plan.links == () and not plan.star
    assert plan.caption.startswith("complete graph: all 19,900 client-client links, not drawn")
    small = nx.complete_graph(10)
    assert len(sketch(small, layout(small)).links) == 45  # small ones are drawn


def test_a_dense_graph_draws_every_kth_link_and_says_so():
    graph = nx.watts_strogatz_graph(200, 30, 0.1, seed=1)  # 3,000 links
    plan = sketch(graph, layout(graph))
    k = -(-3000 // MAX_LINKS)
    assert len(plan.links) == len(range(0, 3000, k)) <= MAX_LINKS
    assert plan.caption.startswith(f"{len(plan.links):,} of 3,000 client-client links drawn")
    assert set(plan.links) <= {(min(a, b), max(a, b)) for a, b in graph.edges}
    sparse = nx.watts_strogatz_graph(200, 4, 0.1, seed=1)
    assert len(sketch(sparse, layout(sparse)).links) == 400


def test_layouts_spring_for_small_graphs_a_spiral_in_id_order_above_the_limit():
    small = _xy(layout(nx.path_graph(SPRING_MAX)))
    big = _xy(layout(nx.watts_strogatz_graph(SPRING_MAX + 40, 6, 0.1, seed=3)))
    steps = np.linalg.norm(np.diff(big, axis=0), axis=1)
    assert np.allclose(steps, steps.mean(), rtol=0.1)  # ring neighbours side by side
    assert np.linalg.norm(big, axis=1).min() < 0.3  # the disc is used, not only its rim
    assert not np.allclose(np.linalg.norm(small, axis=1), 1.0)
    star = _xy(layout(nx.empty_graph(30)))
    assert np.allclose(np.linalg.norm(star, axis=1), 1.0)  # around the server
    geo = nx.random_geometric_graph(30, 0.3, seed=2)
    xy = np.array([layout(geo)[n] for n in range(30)])
    own = np.array([geo.nodes[n]["pos"] for n in range(30)])
    assert xy.min() == -1 and xy.max() == 1
    assert np.allclose(np.argsort(xy[:, 0]), np.argsort(own[:, 0]))  # the topology's own


@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=30))
def test_noise_is_zeroed_and_nothing_else_changes(values):
    out = denoised(np.array(values))
    scale = max(1.0, max(abs(v) for v in values))
    for v, o in zip(values, out):
        assert o == (0.0 if abs(v) < 1e-12 * scale else v)


def test_a_nash_gap_of_1e_17_is_drawn_as_0_on_axes_that_span_the_planned_rounds():
    rounds = pd.DataFrame({
        "round": [0, 1, 2], "test_accuracy": [np.nan, 0.4, 0.5],
        "nash_gap_max": [np.nan, 1e-17, 3e-17], "nash_gap_mean": [np.nan, 2e-18, 0.0],
    })  # fmt: skip
    options = curve_options(rounds, rounds_planned=30, clients=50)
    gap = options["Nash gap"]
    assert [p[1] for s in gap["series"] for p in s["data"]] == [None, 0.0, 0.0] * 2
    assert gap["yAxis"]["min"] == 0 and gap["xAxis"] == {**gap["xAxis"], "min": 0, "max": 30}
    accuracy = options["test accuracy"]
    assert accuracy["yAxis"]["max"] == 1.0 and accuracy["series"][0]["data"][0] == [0, None]
    assert "participants" not in options  # not recorded: no panel


def test_hovering_a_client_shows_its_row_and_a_click_outlines_it(tiny):
    model = DashboardModel(validate(tiny))
    model.step()
    clients = model.current_clients()
    table = round_table(clients)
    rows = client_rows(table)
    assert set(rows) == set(range(12))
    row = table[table["client_id"] == 4].iloc[0]
    assert rows[4].startswith("<b>client 4</b><br/>behaviour: ")
    assert f"state: {row['state']}" in rows[4] and "{" not in rows[4]
    option = network_option(clients, model.positions, sketch(model.graph, model.positions),
                            rows=rows, selected=4)  # fmt: skip
    nodes = {n["id"]: n for n in option["series"][0]["data"]}
    assert nodes["4"]["tooltip"]["formatter"] == rows[4] and nodes["4"]["value"] == 4
    assert nodes["4"]["itemStyle"]["borderWidth"] > nodes["5"]["itemStyle"]["borderWidth"]
    assert "server" in nodes  # star topology: the server in the middle


def test_a_sweep_lists_its_runs_and_the_replay_opens_any_of_them(tiny, write_scenario, tmp_path):
    path = write_scenario({**tiny, "rounds": 2})
    out = tmp_path / "out"
    argv = ["sweep", str(path), "--grid", "population.straggle_prob=0.0,0.3", "--executor",
            "serial", "--quiet", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    (sweep,) = (out / "tiny").glob("sweep-*")
    runs = sweep_runs(sweep)
    assert len(runs) == 2
    assert sorted(label.split(": ", 1)[1] for label in runs) == [
        "straggle_prob=0.0 · replicate=0", "straggle_prob=0.3 · replicate=0"
    ]  # fmt: skip
    first, second = runs.values()
    assert sweep_runs(first) == runs  # from one of its runs too
    choice = RunChoice(first)
    replay = ReplayModel(choice)
    assert replay.run_dir == first and replay.steps == 1
    choice.path = second  # the page chose another run: Reset opens it
    assert ReplayModel(choice).run_dir == second
    assert sweep_runs(tmp_path) == {}
