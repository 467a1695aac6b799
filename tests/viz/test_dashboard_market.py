"""The dashboard's market view without a browser: knobs -> overrides, the live market's rounds
and clients, the per-server curves, the network of deliveries, the table and the status line,
and a replay that draws what the live model drew."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("solara", reason="the viz extra (solara) is not installed")

from fedgame.market.spec import server_scenarios
from fedgame.scenario.load import load_scenario, validate
from fedgame.viz.app import build, status_line
from fedgame.viz.live import DashboardModel
from fedgame.viz.market import MarketDashboardModel, market_knobs, market_overrides
from fedgame.viz.market_views import (
    NONE,
    NOT_YET,
    client_groups,
    group_colours,
    market_curve_options,
    market_network_option,
    market_round_table,
    market_settings_line,
    market_status_line,
    served_label,
    server_colour,
    server_names,
)
from fedgame.viz.network import layout, sketch
from fedgame.viz.replay import ReplayModel
from fedgame.viz.table import client_rows

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
ASYMMETRIC = SCENARIOS / "duopoly_asymmetric.yaml"


def _small(path: Path = ASYMMETRIC, *more: str):
    return load_scenario(path, ["population.clients=8", "rounds=3", *more])


def _rounds(**columns) -> pd.DataFrame:
    """A two-server rounds table of rounds 1 and 2 (rows A1, B1, A2, B2)."""
    base = {"round": [1, 1, 2, 2], "server": ["A", "B", "A", "B"]}
    return pd.DataFrame({**base, **columns})


def test_a_market_offers_the_shared_knobs_and_a_gamma_per_server_and_no_reward_kind():
    scenario = _small()
    names = {k.keyword: k.value for k in market_knobs(scenario)}
    assert names["servers__0__incentive__gamma"] == 0.8  # Big's own
    assert names["servers__1__incentive__gamma"] == 0.5  # Small inherits the market's
    assert "incentive__kind" not in names and "incentive__gamma" not in names
    assert {"population__clients", "rounds", "seed", "population__budget__epsilon"} <= set(names)
    assert market_overrides(scenario, names) == {}  # nothing moved, nothing changed
    keys = market_overrides(scenario, {**names, "servers__1__incentive__gamma": 0.55, "seed": 4})
    assert keys["seed"] == 4
    assert [s["name"] for s in keys["servers"]] == ["Big", "Small"]
    assert keys["servers"][0]["incentive"] == {"gamma": 0.8}  # kept as it was
    assert keys["servers"][1]["incentive"] == {"gamma": 0.55}


def test_a_market_whose_servers_select_for_themselves_offers_no_shared_k():
    import yaml

    tree = yaml.safe_load(ASYMMETRIC.read_text())
    tree["selection"] = {"kind": "uniform", "k": 4}
    assert "selection__k" in {k.keyword for k in market_knobs(validate(tree))}
    tree["servers"][1]["selection"] = {"kind": "all"}
    assert "selection__k" not in {k.keyword for k in market_knobs(validate(tree))}


def test_moving_a_servers_gamma_changes_its_offer_and_only_on_that_server():
    scenario = _small()
    start = MarketDashboardModel(scenario)
    moved = MarketDashboardModel(scenario, servers__1__incentive__gamma=0.8)
    assert moved.notice == ""
    assert [s.config("incentive").gamma for s in server_scenarios(moved.scenario)] == [0.8, 0.8]
    start.step()
    moved.step()
    before, after = start.history().set_index("server"), moved.history().set_index("server")
    assert after.loc["Small", "reward"] > before.loc["Small", "reward"] * 1.2  # a bigger R*
    assert after.loc["Small", "reward"] == pytest.approx(after.loc["Big", "reward"])  # symmetric


def test_a_knob_mix_that_does_not_validate_keeps_the_scenario_and_says_why():
    scenario = _small()
    model = MarketDashboardModel(scenario, population__budget__epsilon=-1.0)
    assert model.scenario.population.budget == scenario.population.budget
    assert model.notice.startswith("kept the scenario's settings: key 'population.budget.epsilon'")


def test_a_one_server_scenario_builds_the_one_server_model(tiny, write_scenario):
    model, params = build({"scenario": str(write_scenario(tiny))})
    assert type(model) is DashboardModel and server_names(model.settings) == ()
    assert "incentive__kind" in params  # the reward-kind knob, as before
    market, params = build({"scenario": str(ASYMMETRIC)})
    assert type(market) is MarketDashboardModel and server_names(market.settings) == (
        "Big",
        "Small",
    )
    assert "incentive__kind" not in params


def test_the_live_market_offers_complete_rounds_and_the_round_zero_clients():
    model = MarketDashboardModel(_small())
    first = model.current_clients()
    assert len(first) == 8 and first["round"].eq(0).all() and model.history().empty
    assert set(client_groups(first, ("Big", "Small"))) == {NOT_YET}
    model.step()
    model.step()
    history = model.history()
    assert history["server"].tolist() == ["Big", "Small", "Big", "Small"]
    assert history["round"].tolist() == [1, 1, 2, 2]
    clients = model.current_clients()
    assert clients["round"].eq(2).all() and len(clients) == 8
    model.recorder.rounds.append({"round": 3, "server": "Big"})  # a round being recorded
    assert len(model.history()) == 4  # not shown until its clients rows are there too


def test_each_server_gets_a_line_of_its_own_values_and_the_hhi_one_per_round():
    rounds = _rounds(
        test_accuracy=[0.1, 0.2, 0.3, 0.4],
        market_share=[0.75, 0.25, 0.5, 0.5],
        hhi=[0.625, 0.625, 0.5, 0.5],
        reward=[3.0, 1.0, 2.0, 2.0],
        uploaded=[5, 3, 4, 4],
        epsilon_spent_mean=[1.0, 1.0, 2.0, 2.0],
    )
    options = market_curve_options(rounds, ("A", "B"), rounds_planned=10, clients=8)
    assert "server cost" not in options and "payments" not in options  # not recorded
    accuracy = options["test accuracy"]
    assert [s["name"] for s in accuracy["series"]] == ["A", "B"]
    assert accuracy["series"][0]["data"] == [[1, 0.1], [2, 0.3]]
    assert accuracy["series"][1]["data"] == [[1, 0.2], [2, 0.4]]
    assert [s["color"] for s in accuracy["series"]] == [server_colour(0), server_colour(1)]
    assert accuracy["yAxis"]["max"] == 1.0 and accuracy["xAxis"]["max"] == 10
    share = options["market share (Σρ won)"]["series"]
    assert share[0]["data"] == [[1, 0.75], [2, 0.5]]
    hhi = options["Herfindahl index (HHI)"]["series"]
    assert hhi[0]["data"] == [[1, 0.625], [2, 0.5]]  # one point per round, not per row
    assert hhi[1]["name"].startswith("1/S = 0.5") and hhi[1]["data"] == [[1, 0.5], [2, 0.5]]
    assert options["clients served"]["yAxis"]["max"] == 8
    assert options["ε spent (one ledger)"]["series"][0]["data"] == [[1, 1.0], [2, 2.0]]


def test_a_client_is_grouped_by_whom_it_served():
    assert served_label("") == NONE
    assert served_label("A") == "served A"
    assert served_label("A,B") == "served A and B"
    assert served_label("A,B,C") == "served A, B and C"
    frame = pd.DataFrame({"round": [1] * 4, "served": ["A,B", "B", "", "A,B,C"]})
    groups = client_groups(frame, ("A", "B", "C")).tolist()
    assert groups == ["served A and B", "served B", NONE, "served A, B and C"]
    colours = group_colours(groups, ("A", "B", "C"))
    assert list(colours) == ["served B", "served A and B", "served A, B and C", NONE]
    assert colours["served B"] == server_colour(1)  # a lone server's client in its colour
    assert len(set(colours.values())) == 4


def test_the_network_draws_each_delivery_from_its_server_and_each_clients_row():
    clients = pd.DataFrame(
        {
            "round": [1, 1, 1],
            "client_id": [0, 1, 2],
            "served": ["A,B", "A", ""],
            "servers_served": [2, 1, 0],
            "epsilon_spent": [2.0, 1.0, 0.0],
            "epsilon_total": [4.0, 4.0, 4.0],
        }
    )
    import networkx as nx

    graph = nx.empty_graph(3)
    positions = layout(graph)
    table = market_round_table(clients)
    assert table["client_id"].tolist() == [0, 1, 2]  # most servers served first
    rows = client_rows(table)
    option = market_network_option(
        clients, positions, sketch(graph, positions), ("A", "B"), rows=rows, selected=1
    )
    series = option["series"][0]
    links = {(link["source"], link["target"]) for link in series["links"]}
    assert links == {("server:A", "0"), ("server:B", "0"), ("server:A", "1")}
    nodes = {node["id"]: node for node in series["data"]}
    assert nodes["server:A"]["label"]["formatter"] == "A" and "server:B" in nodes
    assert nodes["1"]["tooltip"]["formatter"].startswith("<b>client 1</b><br/>served: A")
    assert nodes["1"]["itemStyle"]["borderWidth"] == 3.5  # the pinned client
    assert nodes["0"]["symbolSize"] == pytest.approx(8 + 14 * 0.5)  # half its budget left
    assert option["legend"]["data"] == ["served A", "served A and B", NONE]


def test_the_status_and_settings_lines_name_each_server():
    rounds = _rounds(test_accuracy=[0.1, 0.2, 0.31, 0.42], hhi=[0.5] * 4,
                     epsilon_spent_mean=[1.0, 1.0, 2.5, 2.5])  # fmt: skip
    line = market_status_line(rounds, ("A", "B"), step=2, planned=5, clients=8, step_seconds=0.25)
    assert line == (
        "round 2 of 5 · 8 clients · 2 servers · test accuracy A 0.310, B 0.420 · HHI 0.50 · "
        "mean ε spent 2.50 · simulated in 0.25 s"
    )
    settings = MarketDashboardModel(_small()).settings
    assert market_settings_line(settings).endswith(
        "servers Big (incentive: {gamma: 0.8}), Small · leaders: best_response"
    )


def test_a_market_replay_draws_what_the_live_market_drew(tmp_path):
    from fedgame.api import run

    scenario = _small()
    live = MarketDashboardModel(scenario)
    for _ in range(3):
        live.step()
    run(scenario, out=tmp_path)
    replay = ReplayModel(tmp_path / scenario.name)
    for _ in range(2):
        replay.step()
    names = server_names(replay.settings)
    assert names == ("Big", "Small") and replay.steps == 3
    drawn = market_curve_options(live.history(), names, rounds_planned=3, clients=8)
    again = market_curve_options(replay.history(), names, rounds_planned=3, clients=8)
    assert again == drawn
    pd.testing.assert_frame_equal(
        market_round_table(replay.current_clients()),
        market_round_table(live.current_clients()),
        check_dtype=False,
    )
    assert status_line(replay).split(" · ")[:5] == status_line(live).split(" · ")[:5]
    assert np.isfinite(replay.history()["hhi"]).all()
