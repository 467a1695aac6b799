"""``fedgame report`` shows the economics of runs whose incentive bought something."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from fedgame.analysis.economics import METRICS, economics_metrics
from fedgame.cli import main


def _game(tiny):
    tiny["rounds"] = 3
    tiny["population"]["privacy_value"] = 1.0
    tiny["population"]["budget"] = {"epsilon": 100.0, "delta": 1e-5}
    tiny["privacy"] = {"kind": "zcdp_gaussian", "clip": 1.0}
    tiny["incentive"] = {"kind": "qi_dpfl", "dim": 650, "lam": 0.01}
    tiny["policy"] = {"kind": "best_response"}
    tiny["selection"] = {"kind": "all"}
    return tiny


def test_a_game_runs_report_has_the_economics_table_and_figure(tiny, write_scenario, tmp_path):
    assert main(["run", str(write_scenario(_game(tiny))), "--out", str(tmp_path), "--quiet"]) == 0
    assert main(["report", str(tmp_path / "tiny"), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "## Economics" in text and "![Economics per round](economics.png)" in text
    assert (tmp_path / "rep" / "economics.png").read_bytes()[:4] == b"\x89PNG"
    rounds = pd.read_parquet(next((tmp_path / "tiny").glob("*/rounds.parquet")))
    cost = rounds["econ_server_cost"].sum()
    assert cost > 0
    row = re.search(r"\| econ_total_cost \| ([^|]+) \|", text)
    assert row is not None and float(row.group(1)) == pytest.approx(cost, rel=1e-3)
    assert not re.search(r"\d[eE]-1[3-9]", text)  # no floating-point noise printed as data


def test_no_section_for_runs_that_bought_nothing(tiny, write_scenario, tmp_path):
    tiny["rounds"] = 2
    assert main(["run", str(write_scenario(tiny)), "--out", str(tmp_path), "--quiet"]) == 0
    assert main(["report", str(tmp_path / "tiny"), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "Economics" not in text and not (tmp_path / "rep" / "economics.png").exists()


def test_per_run_metrics_by_hand():
    rounds = pd.DataFrame(
        {
            "run_id": ["a", "a", "a"],
            "round": [1, 2, 3],
            "econ_server_cost": [1.0, 2.0, 3.0],
            "econ_client_surplus": [0.5, -0.25, 0.0],
            "econ_welfare": [4.0, -1.0, 0.5],
            "econ_ir_violations": [0, 2, 1],
            "econ_regret_max": [0.0, 0.3, 0.1],
            "econ_fairness": [np.nan, 0.5, 0.7],
            "econ_accuracy_per_cost_to_date": [3.0, 2.0, 1.5],
        }
    )
    got = economics_metrics(rounds).iloc[0]
    want = [6.0, 0.25, 3.5, 3.0, 0.3, 0.4 / 3, 0.6, 1.5]
    np.testing.assert_allclose(got[list(METRICS)].to_numpy(float), want, rtol=1e-12)
