"""``fedgame report`` writes report.md and the figures it links, for a sweep and for a run."""

from __future__ import annotations

import re

import pandas as pd

from fedgame.analysis import figures, load_sweep
from fedgame.cli import main


def _linked(report):
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", report.read_text())


def test_sweep_report(tiny, write_scenario, tmp_path, capsys):
    tiny["rounds"] = 2
    tiny["population"]["clients"] = 8
    tiny["sweep"] = {"grid": {"population.clients": [8, 10], "selection.k": [3, 5]}}
    path = write_scenario(tiny)
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    sweep_dir = load_sweep(out).path
    assert main(["report", str(sweep_dir)]) == 0
    report = sweep_dir / "report" / "report.md"
    assert str(report) in capsys.readouterr().out
    text = report.read_text()
    assert "Summary per grid point" in text and "Equilibrium" in text
    linked = _linked(report)
    assert {"accuracy.png", "participation.png", "epsilon_cdf.png"} <= set(linked)
    assert "heatmap_final_accuracy.png" in linked
    for name in linked:
        assert (report.parent / name).read_bytes()[:4] == b"\x89PNG"


def test_run_report(tiny, write_scenario, tmp_path):
    tiny["rounds"] = 2
    path = write_scenario(tiny)
    assert main(["run", str(path), "--out", str(tmp_path / "res"), "--quiet"]) == 0
    assert main(["report", str(tmp_path / "res" / "tiny"), "--out", str(tmp_path / "rep")]) == 0
    report = tmp_path / "rep" / "report.md"
    assert "Final metrics" in report.read_text()
    linked = _linked(report)
    assert "accuracy.png" in linked
    assert all((report.parent / name).is_file() for name in linked)


def test_report_of_nothing_fails(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing")]) == 2
    assert main(["report", str(tmp_path)]) == 1
    assert "neither a run folder nor a sweep folder" in capsys.readouterr().err


def test_figures_skip_missing_columns(tmp_path):
    rounds = pd.DataFrame({"run_id": ["a"] * 3, "round": [1, 2, 3], "test_accuracy": [0.1] * 3})
    assert figures.trajectories(rounds, path=tmp_path / "t.png") is None
    assert figures.participation_curves(rounds, path=tmp_path / "p.png") is None
    assert figures.accuracy_curves(rounds, path=tmp_path / "a.png") == tmp_path / "a.png"
    table = pd.DataFrame({"x": [1, 1, 2, 2], "y": [0, 1, 0, 1], "v": [1.0, 2.0, 3.0, 4.0]})
    assert figures.heatmap(table, x="x", y="y", value="v", path=tmp_path / "h.png").is_file()
    assert figures.heatmap(table, x="x", y="y", value="w", path=tmp_path / "w.png") is None
