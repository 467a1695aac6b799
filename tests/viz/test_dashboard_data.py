"""The dashboard's data and knobs without a browser: states, knobs -> overrides, live and replay
models (the views read only what these give)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("solara", reason="the viz extra (solara) is not installed")

from fedgame.cli import main
from fedgame.scenario.load import validate
from fedgame.viz.curves import curve_options, panels_for
from fedgame.viz.data import STATES, client_states
from fedgame.viz.knobs import gamma_start, knobs, model_params, overrides
from fedgame.viz.live import DashboardModel
from fedgame.viz.replay import ReplayModel


def test_each_client_gets_the_first_state_that_holds():
    frame = pd.DataFrame(
        {
            "round": [1, 1, 1, 1, 1, 1, 0],
            "selected": [True, True, False, False, False, False, False],
            "uploaded": [True, False, False, False, False, False, False],
            "straggled": [False, True, False, False, False, False, False],
            "link_up": [True, True, False, True, True, True, True],
            "decline_reason": ["", "", "", "budget", "", "price", ""],
            "participating": [True, True, True, False, True, False, False],
        }
    )
    assert client_states(frame).tolist() == [
        STATES[0], STATES[1], STATES[2], STATES[3], STATES[4], STATES[5], STATES[6]
    ]  # fmt: skip


def test_moved_knobs_become_validated_overrides_and_a_bad_mix_keeps_the_scenario(tiny):
    scenario = validate(tiny)
    start = {k.keyword: k.value for k in knobs(scenario)}
    assert overrides(scenario, start) == ({}, [])
    assert "incentive__gamma" not in model_params(scenario)  # incentive none: γ not shown
    assert "population__clients" in model_params(scenario)
    keys, notes = overrides(scenario, {**start, "population__clients": 15})
    assert keys == {"population__clients": 15} and notes == []
    model = DashboardModel(scenario, population__clients=15)
    assert model.scenario.population.clients == 15 and model.notice == ""
    bad = DashboardModel(scenario, population__clients=3)  # k = 5 > N = 3 for uniform selection
    assert bad.scenario.population.clients == 12
    assert bad.notice.startswith("kept the scenario's settings: key 'selection.k' has value 5")


def test_the_gamma_knob_shows_only_under_an_incentive_with_gamma():
    from pathlib import Path

    from fedgame.scenario.load import load_scenario

    scenarios = Path(__file__).resolve().parents[2] / "scenarios"
    with_gamma = model_params(load_scenario(scenarios / "qi_dpfl_digits.yaml"))
    assert with_gamma["incentive__gamma"]["value"] == 0.5
    assert "incentive__gamma" not in model_params(load_scenario(scenarios / "quickstart.yaml"))


def test_the_knobs_follow_the_reward_kind_chosen_on_the_page(tiny):
    scenario = validate(tiny)  # incentive: none
    assert scenario.incentive.kind == "none" and "incentive__gamma" not in model_params(scenario)
    chosen = model_params(scenario, "qi_dpfl")
    assert chosen["incentive__gamma"]["value"] == 0.5  # the kind's default
    assert list(chosen)[-2:] == ["incentive__kind", "incentive__gamma"]  # last: nothing moves
    assert list(model_params(scenario)) == list(chosen)[:-1]
    assert [k.key for k in knobs(scenario, "none")] == [k.key for k in knobs(scenario)]
    # γ at the chosen kind's start leaves the kind as configured; moved, it is applied
    start = {k.keyword: k.value for k in knobs(scenario)}
    keys, notes = overrides(scenario, {**start, "incentive__kind": "qi_dpfl"})
    assert keys == {"incentive": {"kind": "qi_dpfl"}} and notes == []
    keys, notes = overrides(scenario, {**start, "incentive__kind": "max", "incentive__gamma": 0.7})
    assert keys == {"incentive": {"kind": "max", "gamma": 0.7}} and notes == []
    _, notes = overrides(scenario, {**start, "incentive__gamma": 0.7})  # none has no γ
    assert notes == ["γ not applied: incentive 'none' has no γ"]


def test_gamma_starts_at_the_scenarios_own_under_every_kind_with_gamma(tiny):
    tiny["incentive"] = {"kind": "qi_dpfl", "gamma": 0.3}
    scenario = validate(tiny)
    assert gamma_start(scenario, "stackelberg") == 0.3 and gamma_start(scenario, "none") is None
    assert model_params(scenario, "max")["incentive__gamma"]["value"] == 0.3
    assert "incentive__gamma" not in model_params(scenario, "none")
    start = {k.keyword: k.value for k in knobs(scenario)}
    keys, _ = overrides(scenario, {**start, "incentive__kind": "max"})
    assert keys["incentive"]["kind"] == "max" and keys["incentive"]["gamma"] == 0.3


@pytest.mark.filterwarnings("ignore:.*use_state.*:UserWarning")  # Mesa's own component
def test_reset_reads_the_kind_and_gamma_the_page_keeps(tiny):
    import solara

    from fedgame.viz.app import following_kind

    scenario = validate(tiny)
    kind, gamma = solara.reactive("none"), solara.reactive(0.5)
    hidden = following_kind(scenario, kind, gamma)
    assert hidden["incentive__kind"]["value"] is kind and hidden["incentive__gamma"] is gamma
    kind.value = "stackelberg"
    shown = following_kind(scenario, kind, gamma)
    assert shown["incentive__gamma"]["type"] == "SliderFloat"
    assert shown["incentive__gamma"]["value"] is gamma
    gamma.value = 0.65  # what SolaraViz's Reset passes: the page's reactives themselves
    model = DashboardModel(scenario, incentive__kind=kind, incentive__gamma=gamma)
    assert model.scenario.incentive.kind == "stackelberg" and model.notice == ""
    assert model.settings["incentive"]["gamma"] == 0.65


def test_the_live_model_offers_rounds_and_the_current_clients(tiny):
    model = DashboardModel(validate(tiny))
    assert model.current_clients()["round"].eq(0).all() and len(model.history()) == 1
    model.step()
    model.step()
    assert len(model.history()) == 3 and model.current_clients()["round"].eq(2).all()
    assert len(model.current_clients()) == 12
    assert {p.title for p in panels_for(model.history())} >= {"test accuracy", "participants"}
    options = curve_options(model.history(), rounds_planned=3, clients=12)
    assert options["participants"]["yAxis"]["max"] == 12
    assert options["test accuracy"]["xAxis"]["max"] == 3
    assert [x for x, _ in options["test accuracy"]["series"][0]["data"]] == [0, 1, 2]


def test_the_accuracy_line_joins_the_measured_rounds_other_lines_keep_their_gaps():
    rounds = pd.DataFrame(
        {
            "round": [0, 1, 2, 3, 4],
            "test_accuracy": [0.1, np.nan, np.nan, 0.5, np.nan],  # eval_every 3
            "participants": [5, 5, np.nan, 5, 5],
        }
    )
    options = curve_options(rounds, rounds_planned=6)
    accuracy = options["test accuracy"]["series"][0]
    assert accuracy["connectNulls"] is True
    assert [v for _, v in accuracy["data"]] == [0.1, None, None, 0.5, None]
    assert options["participants"]["series"][0]["connectNulls"] is False


def test_a_line_measured_every_few_rounds_marks_its_points_at_any_length():
    """Past 40 rounds lines drop their symbols, except one with unmeasured rounds before its
    last value (``training.eval_every``), whose symbols show which rounds were measured."""
    n = 60
    every = np.linspace(0.1, 0.9, n)
    sparse = np.where(np.arange(n) % 3 == 0, every, np.nan)
    for values, marked in ((every, False), (sparse, True)):
        rounds = pd.DataFrame({"round": range(n), "test_accuracy": values})
        series = curve_options(rounds, rounds_planned=n)["test accuracy"]["series"][0]
        assert series["showSymbol"] is marked
    cut = pd.DataFrame(
        {"round": range(n), "test_accuracy": np.where(np.arange(n) < 50, every, np.nan)}
    )
    assert curve_options(cut, rounds_planned=n)["test accuracy"]["series"][0]["showSymbol"] is False


def test_a_replay_steps_through_the_recorded_rounds_and_stops(tiny, write_scenario, tmp_path):
    path = write_scenario(tiny)
    assert main(["run", str(path), "--quiet", "--out", str(tmp_path / "out")]) == 0
    replay = ReplayModel(tmp_path / "out" / "tiny")
    assert replay.rounds_planned == 3 and replay.graph.number_of_nodes() == 12
    assert replay.steps == 1 and replay.current_clients()["round"].eq(1).all()  # not empty
    for _ in range(2):
        replay.step()
    assert replay.current_clients()["round"].eq(3).all() and not replay.running
    replay.step()  # past the end: stays at the last round
    assert replay.steps == 3 and not replay.running
    replay.jump(2)
    assert replay.current_clients()["round"].eq(2).all() and len(replay.history()) == 2
    assert replay.running
    replay.jump(99)
    assert replay.steps == 3


def test_a_run_folder_with_set_is_refused(tmp_path, capsys):
    (tmp_path / "manifest.json").write_text("{}")
    assert main(["dashboard", str(tmp_path), "--set", "rounds=2"]) == 2
    assert "only with a scenario file" in capsys.readouterr().err


def test_a_folder_without_runs_is_refused(tmp_path, capsys):
    assert main(["dashboard", str(tmp_path)]) == 2
    assert "no run folder (manifest.json)" in capsys.readouterr().err


def test_a_venv_on_system_packages_finds_their_front_end_files(tmp_path, monkeypatch):
    """Packages from the base interpreter keep Solara's assets and the widget extensions under
    its prefix; the dashboard points Solara there when the environment has none of its own."""
    import sys

    from fedgame.viz.serve import base_prefix_env

    base, venv = tmp_path / "base", tmp_path / "venv"
    for folder in ("share/solara/cdn", "share/jupyter/nbextensions", "etc/jupyter/nbconfig"):
        (base / folder).mkdir(parents=True)
        (base / folder / "file").write_text("x")
    (venv / "share/solara/cdn").mkdir(parents=True)  # Solara makes it, empty, on a first start
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "base_prefix", str(base))
    monkeypatch.setenv("JUPYTER_PATH", "/elsewhere")
    monkeypatch.delenv("JUPYTER_CONFIG_PATH", raising=False)
    assert base_prefix_env() == {
        "SOLARA_ASSETS_PROXY_CACHE_DIR": str(base / "share/solara/cdn"),
        "JUPYTER_PATH": f"/elsewhere{os.pathsep}{base / 'share/jupyter'}",
        "JUPYTER_CONFIG_PATH": str(base / "etc/jupyter"),
    }
    (venv / "share/solara/cdn" / "own").write_text("x")  # the environment's own files win
    assert "SOLARA_ASSETS_PROXY_CACHE_DIR" not in base_prefix_env()
    monkeypatch.setattr(sys, "prefix", str(base))  # not a virtual environment
    assert base_prefix_env() == {}


def test_a_loopback_address_is_told_from_others():
    from fedgame.viz.serve import is_loopback

    assert all(map(is_loopback, ("127.0.0.1", "127.1.2.3", "::1", "localhost")))
    assert not any(map(is_loopback, ("0.0.0.0", "192.168.1.4", "::", "example.org")))


def test_the_mechanism_panel_draws_the_incentives_own_columns_and_only_those():
    rounds = pd.DataFrame({"round": [0, 1, 2], "test_accuracy": [0.1, 0.5, 0.6]})
    assert "mechanism" not in curve_options(rounds, rounds_planned=3)  # no family column
    nan = rounds.assign(price=float("nan"))
    assert "mechanism" not in curve_options(nan, rounds_planned=3)  # recorded only as NaN
    auction = rounds.assign(clearing_price=[float("nan"), 0.59, 0.69], shading=[0, 0.0, 0.03])
    panel = curve_options(auction, rounds_planned=3)["mechanism"]
    assert [s["name"] for s in panel["series"]] == ["clearing price", "shading"]
    assert panel["series"][0]["data"] == [[0, None], [1, 0.59], [2, 0.69]]


def test_a_live_posted_price_run_fills_the_mechanism_panel_round_by_round(tiny):
    tiny.update(incentive={"kind": "optimal_price", "cap": 0.05}, policy={"kind": "seller"})
    model = DashboardModel(validate(tiny))
    model.step()
    first = curve_options(model.history(), rounds_planned=3)["mechanism"]
    model.step()
    second = curve_options(model.history(), rounds_planned=3)["mechanism"]
    assert [s["name"] for s in second["series"]] == ["posted price"]
    prices = model.history()["price"].to_numpy()
    assert len(first["series"][0]["data"]) == 2 and len(second["series"][0]["data"]) == 3
    assert second["series"][0]["data"][2][1] == round(float(prices[2]), 6)
    assert prices[1] > 0
