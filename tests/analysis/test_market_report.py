"""``fedgame report`` on a sweep of market runs: the Market section, per server and grid point."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedgame.analysis import load_sweep
from fedgame.analysis.market import market_metrics, market_summary, server_metrics
from fedgame.cli import main

DUOPOLY = Path(__file__).resolve().parents[2] / "scenarios" / "duopoly.yaml"


def _rounds() -> pd.DataFrame:
    """Two servers, three rounds, one run; nobody delivers in round 3 (budgets spent)."""
    nan = math.nan
    return pd.DataFrame(
        {
            "run_id": ["r0"] * 6,
            "replicate": [0] * 6,
            "round": [1, 1, 2, 2, 3, 3],
            "server": ["A", "B"] * 3,
            "test_accuracy": [0.2, 0.3, 0.5, 0.4, 0.5, 0.4],
            "market_share": [0.5, 0.5, 0.75, 0.25, nan, nan],
            "payments_total": [4.0, 4.0, 6.0, 2.0, 0.0, 0.0],
            "server_cost": [3.0, 3.5, 2.0, 5.0, nan, nan],
            "hhi": [0.5, 0.5, 0.625, 0.625, nan, nan],
            "leaders_converged": [True, True, False, False, True, True],
            "epsilon_spent_mean": [10.0, 10.0, 20.0, 20.0, 20.0, 20.0],
            "epsilon_spent_max": [12.0, 12.0, 30.0, 30.0, 30.0, 30.0],
        }
    )


def test_server_metrics_by_hand():
    rows = server_metrics(_rounds()).set_index("server")
    assert rows.loc["A", "final_accuracy"] == 0.5 and rows.loc["B", "final_accuracy"] == 0.4
    assert rows.loc["A", "market_share"] == pytest.approx((0.5 + 0.75) / 2)  # round 3: no trade
    assert rows.loc["B", "market_share"] == pytest.approx((0.5 + 0.25) / 2)
    assert rows.loc["A", "server_payments"] == 10.0 and rows.loc["B", "server_payments"] == 6.0
    assert rows.loc["A", "server_cost_bought"] == 5.0 and rows.loc["B", "server_cost_bought"] == 8.5
    assert (rows["rounds_bought"] == 2.0).all()


def test_market_metrics_by_hand():
    (row,) = market_metrics(_rounds()).to_dict("records")
    assert row["final_epsilon_mean"] == 20.0 and row["final_epsilon_max"] == 30.0
    assert row["hhi_mean"] == pytest.approx((0.5 + 0.625) / 2)
    assert row["leaders_converged_share"] == pytest.approx(2 / 3)
    assert row["total_payments"] == 16.0 and row["rounds_traded"] == 2.0


def test_summary_over_replicates_is_the_t_interval_of_the_runs():
    """Two replicates of one grid point: the per-server mean and its 95% t-interval."""
    a, b = _rounds(), _rounds()
    b["run_id"], b["replicate"] = "r1", 1
    b["test_accuracy"] = b["test_accuracy"] + 0.1
    frame = pd.concat([a, b], ignore_index=True).assign(seed=7)
    servers, market = market_summary(frame, ["seed"])
    row = servers.set_index("server").loc["A"]
    assert row["n"] == 2 and row["final_accuracy"] == pytest.approx(0.55)
    half = 12.7062047 * np.std([0.5, 0.6], ddof=1) / math.sqrt(2)  # t_{0.975, 1}
    assert row["final_accuracy_hi"] - row["final_accuracy"] == pytest.approx(half, rel=1e-6)
    assert market["n"].tolist() == [2] and market["total_payments"].tolist() == [16.0]


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """``fedgame sweep`` of the shipped duopoly (2 rounds, 8 clients, slack budgets) over
    server B's gamma, 2 replicates; then ``fedgame report`` on the sweep folder."""
    out = tmp_path_factory.mktemp("market_sweep")
    argv = ["sweep", str(DUOPOLY), "--out", str(out), "--executor", "serial", "--quiet"]
    argv += ["--grid", "servers.1.incentive.gamma=0.5,0.8", "--replicates", "2"]
    for override in (
        "rounds=2",
        "population.clients=8",
        "population.budget.epsilon=50",
        "training.device=cpu",
    ):
        argv += ["--set", override]
    assert main(argv) == 0
    sweep = load_sweep(out)
    assert main(["report", str(sweep.path)]) == 0
    return sweep, sweep.path / "report" / "report.md"


def test_a_market_sweep_report_has_a_row_per_grid_point_and_server(swept):
    sweep, report = swept
    text = report.read_text()
    assert "## Market: per server" in text and "Servers: A, B." in text
    assert "Summary per grid point" not in text and "## Equilibrium" not in text
    rows = [line for line in text.splitlines() if re.match(r"\| 0\.[58] \| [AB] \| 2 \|", line)]
    assert len(rows) == 4  # 2 grid points x 2 servers, n = 2 replicates each
    # each row's final accuracy is the mean over its two runs, read from the runs' own tables
    for line in rows:
        gamma, server = line.split(" | ")[0].strip("| "), line.split(" | ")[1]
        finals = []
        for run in sweep.plan_runs:
            if f"{run['point']['servers.1.incentive.gamma']:g}" != gamma:
                continue
            own = pd.read_parquet(sweep.path / "runs" / run["run_id"] / "rounds.parquet")
            own = own[own["server"] == server].sort_values("round")
            finals.append(float(own["test_accuracy"].iloc[-1]))
        assert len(finals) == 2
        cell = line.split(" | ")[3]
        assert float(cell.split(" ")[0]) == pytest.approx(np.mean(finals), abs=5e-4)
    assert "### Market per grid point" in text and "| hhi_mean |" in text


def test_the_market_figure_is_drawn_and_linked(swept):
    _, report = swept
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report.read_text())
    assert "market.png" in linked and "epsilon_cdf.png" in linked
    assert "accuracy.png" not in linked  # the one-server curves would mix the servers
    for name in linked:
        assert (report.parent / name).read_bytes()[:4] == b"\x89PNG"
    assert (report.parent / "market.png").stat().st_size > 20_000


def test_a_sweep_of_replicates_only_has_one_row_per_server(tmp_path):
    from fedgame.analysis.market import market_section

    lines = market_section(_rounds(), tmp_path, by=[])
    text = "\n".join(lines)
    assert "| server | n | final_accuracy |" in text
    assert re.search(r"^\| A \| 1 \| 0\.5 \|", text, re.M) and re.search(
        r"^\| B \| 1 \|", text, re.M
    )
    assert (tmp_path / "market.png").read_bytes()[:4] == b"\x89PNG"
    assert market_section(_rounds().drop(columns="server"), tmp_path) == []  # one server
