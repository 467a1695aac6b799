"""The command line: run, validate, list."""

from __future__ import annotations

import json

from fedgame.cli import main


def test_list_shows_families_and_components(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for word in ("selection:", "uniform", "privacy:", "gaussian", "dataset:", "digits"):
        assert word in out


def test_list_one_family(capsys):
    assert main(["list", "aggregation"]) == 0
    out = capsys.readouterr().out
    assert "fedavg" in out and "dataset:" not in out
    assert main(["list", "nonsense"]) == 2


def test_run_writes_results_and_prints_summary(tiny, write_scenario, tmp_path, capsys):
    path = write_scenario(tiny)
    out = tmp_path / "res"
    assert main(["run", str(path), "--out", str(out), "--set", "rounds=2"]) == 0
    printed = capsys.readouterr().out
    assert "tiny: 2 rounds" in printed and "results:" in printed
    runs = list((out / "tiny").iterdir())
    assert len(runs) == 1
    manifest = json.loads((runs[0] / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["rounds_completed"] == 2


def test_quiet_run_prints_nothing(tiny, write_scenario, tmp_path, capsys):
    path = write_scenario(tiny)
    assert main(["run", str(path), "--out", str(tmp_path), "--quiet", "--set", "rounds=1"]) == 0
    captured = capsys.readouterr()
    assert captured.out == ""


def test_diverged_run_exit_code_and_message(tiny, write_scenario, tmp_path, capsys):
    tiny["privacy"] = {"kind": "none"}
    tiny["training"]["lr"] = 1e39
    path = write_scenario(tiny)
    assert main(["run", str(path), "--out", str(tmp_path), "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "run stopped" in err and "non-finite" in err
