"""Sweeps in this process: tables, common random numbers, resume, failing runs."""

from __future__ import annotations

import dataclasses
import json
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedgame.analysis import load_sweep
from fedgame.cli import main
from fedgame.run.grid import plan_sweep
from fedgame.run.sweep import run_status, run_sweep


@pytest.fixture
def small(tiny, write_scenario):
    tiny["rounds"] = 2
    tiny["population"]["clients"] = 8
    tiny["sweep"] = {"grid": {"selection.k": [3, 5]}, "replicates": 2}
    return write_scenario(tiny)


def test_sweep_writes_one_row_per_run_and_round(small, tmp_path):
    plan = plan_sweep(small, out=tmp_path)
    summary = run_sweep(plan, executor="serial", progress=False)
    assert (summary.done, summary.skipped, len(summary.failed)) == (4, 0, 0)
    sweep = load_sweep(tmp_path)
    rounds = sweep.rounds
    assert len(rounds) == 4 * 2
    assert {"selection.k", "replicate", "run_id", "status", "round", "test_accuracy"} <= set(rounds)
    assert sorted(rounds["selection.k"].unique()) == [3, 5]
    assert (rounds["selected"] <= rounds["selection.k"]).all()
    assert (rounds["status"] == "completed").all()
    assert len(sweep.runs) == 4
    assert sweep.runs["final_accuracy"].between(0, 1).all()
    assert len(sweep.clients) == 4 * 2 * 8
    info = json.loads((plan.sweep_dir / "sweep.json").read_text())
    assert info["status"] == "completed"
    assert info["summary"]["done"] == 4


def test_common_random_numbers_across_grid_points(small, tmp_path):
    run_sweep(plan_sweep(small, out=tmp_path), executor="serial", progress=False)
    clients = load_sweep(tmp_path).clients
    cols = ["round", "client_id", "dataset_size", "privacy_value", "link_up", "straggled"]

    def draws(k, rep):
        sel = clients[(clients["selection.k"] == k) & (clients["replicate"] == rep)]
        return sel[cols].sort_values(["round", "client_id"]).reset_index(drop=True)

    pd.testing.assert_frame_equal(draws(3, 0), draws(5, 0))
    pd.testing.assert_frame_equal(draws(3, 1), draws(5, 1))
    assert not draws(3, 0)[["dataset_size", "privacy_value"]].equals(
        draws(3, 1)[["dataset_size", "privacy_value"]]
    )


def test_resume_skips_finished_runs_and_redoes_partial_ones(small, tmp_path):
    plan = plan_sweep(small, out=tmp_path)
    run_sweep(plan, executor="serial", progress=False)
    again = run_sweep(plan, executor="serial", progress=False)
    assert (again.done, again.skipped) == (0, 4)
    # a crash mid-write: tables there, manifest missing, a temp file left over
    crashed = plan.run_dir(plan.runs[1])
    (crashed / "manifest.json").unlink()
    (crashed / ".rounds.parquet.abc.tmp").write_bytes(b"half")
    assert run_status(crashed) is None
    first = plan.run_dir(plan.runs[0])
    stamp = (first / "manifest.json").stat().st_mtime_ns
    third = run_sweep(plan, executor="serial", progress=False)
    assert (third.done, third.skipped) == (1, 3)
    assert run_status(crashed) == "completed"
    assert not list(crashed.glob("*.tmp"))
    assert (first / "manifest.json").stat().st_mtime_ns == stamp
    rounds = load_sweep(plan.sweep_dir).rounds
    assert rounds.groupby("run_id").size().to_dict() == {r.run_id: 2 for r in plan.runs}


def _truncated_mnist(folder: Path) -> Path:
    """IDX files whose headers are right (so the preflight passes) but whose training images
    stop short (so loading them fails inside the run)."""
    folder.mkdir()
    for name, shape in (
        ("train-images-idx3-ubyte", (40, 28, 28)),
        ("train-labels-idx1-ubyte", (40,)),
        ("t10k-images-idx3-ubyte", (10, 28, 28)),
        ("t10k-labels-idx1-ubyte", (10,)),
    ):
        header = bytes([0, 0, 0x08, len(shape)]) + struct.pack(f">{len(shape)}I", *shape)
        payload = bytes(int(np.prod(shape)))
        if name.startswith("train-images"):
            payload = payload[:100]
        (folder / name).write_bytes(header + payload)
    return folder


def test_a_failing_run_is_recorded_and_the_rest_finish(small, tmp_path, capsys):
    # the truncated files pass the header checks of the preflight, then fail to load
    folder = _truncated_mnist(tmp_path / "mnist")
    args = ["sweep", str(small), "--out", str(tmp_path), "--executor", "serial", "--quiet"]
    grid = f"data.dataset=[digits, {{kind: mnist, path: {folder}}}]"
    code = main([*args, "--grid", grid, "--replicates", "1"])
    assert code == 1
    assert "failed" in capsys.readouterr().err
    runs = load_sweep(tmp_path).runs
    kinds = runs["data.dataset"].map(lambda v: "mnist" if "mnist" in v else v)
    runs = runs.assign(kind=kinds).set_index("kind")
    assert set(runs.loc["digits", "status"]) == {"completed"}
    assert set(runs.loc["mnist", "status"]) == {"failed"}
    assert runs.loc["mnist", "message"].str.contains("data.dataset.path").all()
    assert runs.loc["mnist", "message"].str.contains("truncated").all()
    rounds = load_sweep(tmp_path).rounds
    assert set(rounds["data.dataset"]) == {"digits"}
    # failed runs are retried by a rerun, finished ones are not
    code = main([*args, "--grid", grid, "--replicates", "1"])
    assert code == 1
    info = json.loads(next(tmp_path.glob("*/sweep-*/sweep.json")).read_text())
    assert info["summary"]["skipped"] == 2
    assert len(info["summary"]["failed"]) == 2


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: (d / "rounds.parquet").write_bytes(b"PAR1 truncated"), "rounds.parquet"),
        (lambda d: (d / "manifest.json").write_text('{"status": "compl'), "manifest.json"),
        (lambda d: (d / "clients.parquet").unlink(), "clients.parquet"),
    ],
    ids=["truncated_table", "corrupt_manifest", "missing_table"],
)
def test_a_damaged_finished_run_is_recorded_and_rerun(small, tmp_path, damage, reason):
    plan = plan_sweep(small, out=tmp_path)
    run_sweep(plan, executor="serial", progress=False)
    damaged = plan.run_dir(plan.runs[2])
    damage(damaged)
    again = run_sweep(plan, executor="serial", progress=False)
    assert (again.done, again.skipped, again.failed) == (1, 3, {})
    assert list(again.repaired) == [plan.runs[2].run_id]
    assert reason in again.repaired[plan.runs[2].run_id]
    assert run_status(damaged) == "completed"
    info = json.loads((plan.sweep_dir / "sweep.json").read_text())
    assert info["summary"]["repaired"] == again.repaired
    rounds = load_sweep(plan.sweep_dir).rounds
    assert rounds.groupby("run_id").size().to_dict() == {r.run_id: 2 for r in plan.runs}


def test_cli_sweep_warns_about_a_repaired_run(small, tmp_path, capsys):
    args = ["sweep", str(small), "--out", str(tmp_path), "--executor", "serial", "--quiet"]
    assert main(args) == 0
    (next(tmp_path.glob("*/sweep-*/runs/*")) / "rounds.parquet").write_bytes(b"")
    assert main(args) == 0
    lines = capsys.readouterr().err.splitlines()
    damaged = [line for line in lines if "damaged" in line]
    assert len(damaged) == 1 and "ran it again" in damaged[0]
    # the rest: degenerate play, and tiny's privacy_value, which no chosen plug-in reads
    rest = [line for line in lines if line not in damaged]
    assert all("degenerate play" in line or "has no effect" in line for line in rest)


def test_sweep_output_and_memory_are_checked_before_anything_is_written(small, tmp_path):
    from fedgame.errors import ScenarioError

    (tmp_path / "taken").write_text("a file where the results would go")
    plan = plan_sweep(small, out=tmp_path / "taken")
    with pytest.raises(ScenarioError) as err:
        run_sweep(plan, executor="serial", progress=False)
    assert err.value.key == "--out" and "is a file" in err.value.allowed
    plan = plan_sweep(small, out=tmp_path / "res")
    huge = dataclasses.replace(plan, memory_per_run=1 << 60)
    with pytest.raises(ScenarioError) as err:
        run_sweep(huge, executor="local", workers=2, progress=False)
    assert err.value.key == "--workers"
    assert not (tmp_path / "res").exists()


def test_sweep_json_keeps_a_history_of_invocations(small, tmp_path, monkeypatch):
    """A resume used to overwrite the summary with "done 0, skipped 4": each call now adds
    one entry (command, executor, start and end, counts) and the earlier ones stay."""
    plan = plan_sweep(small, out=tmp_path)
    run_sweep(plan, executor="serial", progress=False, command="fedgame sweep small.yaml")
    monkeypatch.setattr("sys.argv", ["/somewhere/bin/fedgame", "sweep", "my file.yaml"])
    run_sweep(plan, executor="serial", progress=False)
    info = json.loads((plan.sweep_dir / "sweep.json").read_text())
    first, second = info["history"]
    assert first["command"] == "fedgame sweep small.yaml"
    assert second["command"] == "fedgame sweep 'my file.yaml'"
    assert (first["done"], first["skipped"], first["failed"]) == (4, 0, 0)
    assert (second["done"], second["skipped"], second["failed"]) == (0, 4, 0)
    for entry in (first, second):
        assert entry["executor"] == "serial" and entry["status"] == "completed"
        assert entry["started"] <= entry["ended"] and entry["ended"].endswith("+00:00")
    assert first["ended"] <= second["started"]
    assert info["summary"]["skipped"] == 4  # the last call's own summary, as before
