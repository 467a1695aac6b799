"""The command line: run, validate, list; usage errors; checks made before a run."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

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


def test_validate_makes_the_run_checks_and_reports_memory(tiny, write_scenario, tmp_path, capsys):
    path = write_scenario(tiny)
    assert main(["validate", str(path), "--out", str(tmp_path / "res")]) == 0
    out = capsys.readouterr().out
    assert "ok (tiny, 12 clients, 3 rounds, cpu, memory about" in out
    assert not (tmp_path / "res").exists()
    (tmp_path / "res").write_text("not a folder")
    assert main(["validate", str(path), "--out", str(tmp_path / "res")]) == 2
    err = capsys.readouterr().err
    assert "'--out'" in err and "is a file" in err


def test_run_checks_the_output_before_the_first_round(tiny, write_scenario, tmp_path, capsys):
    path = write_scenario(tiny)
    blocker = tmp_path / "res" / "tiny"
    blocker.parent.mkdir()
    blocker.write_text("in the way")
    assert main(["run", str(path), "--out", str(tmp_path / "res"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "'--out'" in err and "is a file" in err
    assert blocker.read_text() == "in the way"


def test_a_run_time_data_error_names_file_and_dotted_key(tiny, write_scenario, tmp_path, capsys):
    folder = tmp_path / "mnist"
    folder.mkdir()
    for name, shape in (
        ("train-images-idx3-ubyte", (40, 28, 28)),
        ("train-labels-idx1-ubyte", (40,)),
        ("t10k-images-idx3-ubyte", (10, 28, 28)),
        ("t10k-labels-idx1-ubyte", (10,)),
    ):
        header = bytes([0, 0, 8, len(shape)]) + b"".join(d.to_bytes(4, "big") for d in shape)
        body = bytes(40 if name.startswith("train-images") else int(np.prod(shape)))
        (folder / name).write_bytes(header + body)  # the training images stop short
    tiny["population"]["clients"] = 4
    del tiny["population"]["privacy_value"]  # no chosen plug-in reads it: a warning line
    tiny["selection"]["k"] = 2
    tiny["data"]["dataset"] = {"kind": "mnist", "path": str(folder)}
    path = write_scenario(tiny)
    assert main(["validate", str(path)]) == 0  # the headers are fine
    capsys.readouterr()
    assert main(["run", str(path), "--out", str(tmp_path / "res"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert str(path) in err and "'data.dataset.path'" in err and "truncated" in err
    assert not (tmp_path / "res").exists()


def test_usage_errors_are_one_line(capsys):
    for argv in (["run"], ["run", "x.yaml", "--replicate", "many"], ["bogus"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err
        assert err.startswith("fedgame: ") and err.count("\n") == 1, err


def test_a_reader_that_leaves_early_ends_the_listing_quietly():
    """`fedgame list | head`: writing to a pipe nobody reads ends with 141 and no message."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader has already left: the first write fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "fedgame", "list"],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write_end)
    assert done.returncode == 141
    assert done.stderr == ""
