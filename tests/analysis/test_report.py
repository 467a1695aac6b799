"""``fedgame report`` writes report.md and the figures it links, for a sweep and for a run,
with only the sections that apply to the mechanisms used."""

from __future__ import annotations

import re

import pandas as pd

from fedgame.analysis import figures, load_sweep
from fedgame.cli import main


def _linked(report):
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report.read_text())


def _sweep_and_report(path, out):
    assert main(["sweep", str(path), "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    sweep_dir = load_sweep(out).path
    assert main(["report", str(sweep_dir)]) == 0
    return sweep_dir / "report" / "report.md"


def _game(tiny):
    tiny["population"]["privacy_value"] = 1.0
    tiny["privacy"] = {"kind": "zcdp_gaussian", "clip": 1.0}
    tiny["incentive"] = {"kind": "qi_dpfl", "dim": 650}
    tiny["policy"] = {"kind": "best_response"}
    tiny["selection"] = {"kind": "all"}
    return tiny


def test_sweep_report_without_incentive(tiny, write_scenario, tmp_path, capsys):
    tiny["rounds"] = 2
    tiny["population"]["clients"] = 8
    tiny["sweep"] = {
        "grid": {"population.clients": [8, 10], "selection.k": [3, 5]},
        "replicates": 2,
    }
    report = _sweep_and_report(write_scenario(tiny), tmp_path / "out")
    assert str(report) in capsys.readouterr().out
    text = report.read_text()
    assert "`population.clients` ∈ {8, 10} × `selection.k` ∈ {3, 5}" in text
    assert "2 replicates per grid point" in text and "Runs: 8 completed" in text
    for row in (
        "| incentive | none |",
        "| policy | always |",
        "| selection | uniform | k ∈ {3, 5} |",
        "| privacy | gaussian | clip=1",
        "| aggregation | fedavg |",
    ):
        assert row in text
    assert "Summary per grid point" in text
    header = next(line for line in text.splitlines() if line.startswith("| population.clients"))
    assert "| participation_rate | upload_rate |" in header  # straggler rates tell apart
    assert "`upload_rate`: Mean upload rate" in text
    assert "fewer than 3 runs has no band: each of its runs is drawn" in text
    assert "Equilibrium" not in text and "elasticity" not in text
    assert "total_reward" not in text and "server_cost" not in text
    linked = _linked(report)
    assert {"accuracy.png", "participation.png", "epsilon_cdf.png"} <= set(linked)
    assert "heatmap_final_accuracy.png" in linked and "trajectories.png" not in linked
    for name in linked:
        assert (report.parent / name).read_bytes()[:4] == b"\x89PNG"


def test_sweep_report_with_incentive(tiny, write_scenario, tmp_path):
    tiny = _game(tiny)
    tiny["rounds"] = 2
    tiny["sweep"] = {"grid": {"population.clients": [8, 10]}, "replicates": 1}
    text = _sweep_and_report(write_scenario(tiny), tmp_path / "out").read_text()
    assert "1 replicate per grid point" in text and "1 replicates" not in text
    assert "| incentive | qi_dpfl |" in text and "| policy | best_response |" in text
    assert "## Equilibrium" in text and "Response to `population.clients`" in text
    assert "elasticity" in text and "| nash_gap_max |" in text
    assert "trajectories.png" in text
    assert not re.search(r"\d[eE]-1[3-9]", text)  # no floating-point noise printed as data


def test_run_report(tiny, write_scenario, tmp_path):
    tiny["rounds"] = 2
    path = write_scenario(tiny)
    assert main(["run", str(path), "--out", str(tmp_path / "res"), "--quiet"]) == 0
    assert main(["report", str(tmp_path / "res" / "tiny"), "--out", str(tmp_path / "rep")]) == 0
    report = tmp_path / "rep" / "report.md"
    text = report.read_text()
    assert "Final metrics" in text and "Status: completed; 2 rounds; seed 3" in text
    assert "| incentive | none |" in text and "| selection | uniform | k=5 |" in text
    assert "total_reward" not in text and "trajectories.png" not in text
    linked = _linked(report)
    assert "accuracy.png" in linked
    assert all((report.parent / name).is_file() for name in linked)


def test_run_report_of_a_game_names_its_market_metrics(tiny, write_scenario, tmp_path):
    tiny = _game(tiny)
    tiny["rounds"] = 2
    assert main(["run", str(write_scenario(tiny)), "--out", str(tmp_path), "--quiet"]) == 0
    assert main(["report", str(tmp_path / "tiny"), "--out", str(tmp_path / "rep")]) == 0
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "| reward |" in text and "| sum_rho |" in text and "trajectories.png" in text


def test_report_of_nothing_fails(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(tmp_path)]) == 2  # a folder without results is bad input too
    assert "it holds no results" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_figures_skip_missing_columns(tmp_path):
    rounds = pd.DataFrame({"run_id": ["a"] * 3, "round": [1, 2, 3], "test_accuracy": [0.1] * 3})
    assert figures.trajectories(rounds, path=tmp_path / "t.png") is None
    assert figures.participation_curves(rounds, path=tmp_path / "p.png") is None
    assert figures.accuracy_curves(rounds, path=tmp_path / "a.png") == tmp_path / "a.png"
    table = pd.DataFrame({"x": [1, 1, 2, 2], "y": [0, 1, 0, 1], "v": [1.0, 2.0, 3.0, 4.0]})
    assert figures.heatmap(table, x="x", y="y", value="v", path=tmp_path / "h.png").is_file()
    assert figures.heatmap(table, x="x", y="y", value="w", path=tmp_path / "w.png") is None
