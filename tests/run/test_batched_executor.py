"""The ``batched`` sweep executor: the tables of a serial sweep, outcomes as runs finish,
resume, Ctrl-C and a dead worker as with the ``local`` pool, batches within their cap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fedgame.analysis import load_sweep
from fedgame.cli import main
from fedgame.run.batched import batch_key, fit_batch_runs, make_batches
from fedgame.run.grid import SweepRun, plan_sweep
from fedgame.run.sweep import plan_work, run_status, run_sweep

TIMING = ["wall_time_s"]


@pytest.fixture
def small(tiny, write_scenario):
    tiny["rounds"] = 3
    tiny["population"]["clients"] = 8
    tiny["sweep"] = {
        "grid": {"population.clients": [8, 12], "population.straggle_prob": [0.0, 0.3]},
        "replicates": 2,
    }
    return write_scenario(tiny)


def _tables(path):
    sweep = load_sweep(path)
    order = ["run_id", "round"]
    rounds = sweep.rounds.drop(columns=TIMING).sort_values(order).reset_index(drop=True)
    clients = sweep.clients.sort_values([*order, "client_id"]).reset_index(drop=True)
    return rounds, clients


def _manifests(root):
    return {p.parent.name: json.loads(p.read_text()) for p in root.rglob("runs/*/manifest.json")}


def test_batched_sweep_equals_serial_bit_for_bit(small, tmp_path):
    serial = run_sweep(plan_sweep(small, out=tmp_path / "s"), executor="serial", progress=False)
    plan = plan_sweep(small, out=tmp_path / "b")
    summary = run_sweep(plan, executor="batched", workers=2, progress=False)
    assert summary.done == serial.done == 8 and not summary.failed
    for got, want in zip(_tables(tmp_path / "b"), _tables(tmp_path / "s")):
        pd.testing.assert_frame_equal(got, want)
    batched, alone = _manifests(tmp_path / "b"), _manifests(tmp_path / "s")
    assert {m["executor"] for m in alone.values()} == {"serial"}
    assert {m["executor"] for m in batched.values()} == {"batched"}
    # 8 runs on 2 workers: two batches of 4, every round trained together
    assert [m["batch"] for m in batched.values()] == [
        {"runs": 4, "rounds_trained": 3, "rounds_together": 3}
    ] * 8
    keep = {"status", "rounds_completed", "final_test_accuracy", "warnings", "seed"}
    for run_id, manifest in batched.items():
        assert {k: manifest[k] for k in keep} == {k: alone[run_id][k] for k in keep}
    info = json.loads((plan.sweep_dir / "sweep.json").read_text())
    assert info["history"][-1]["executor"] == "batched"


def test_batched_sweep_resumes_skipping_finished_runs(small, tmp_path):
    plan = plan_sweep(small, out=tmp_path)
    run_sweep(plan, executor="batched", workers=1, progress=False)
    first = _tables(tmp_path)
    again = run_sweep(plan, executor="batched", workers=1, progress=False)
    assert (again.done, again.skipped) == (0, 8)
    crashed = plan.run_dir(plan.runs[5])
    (crashed / "manifest.json").unlink()
    kept = plan.run_dir(plan.runs[0])
    stamp = (kept / "manifest.json").stat().st_mtime_ns
    third = run_sweep(plan, executor="batched", workers=1, progress=False)
    assert (third.done, third.skipped) == (1, 7)
    assert run_status(crashed) == "completed"
    assert (kept / "manifest.json").stat().st_mtime_ns == stamp
    assert json.loads((crashed / "manifest.json").read_text())["batch"]["runs"] == 1
    for got, want in zip(_tables(tmp_path), first):
        pd.testing.assert_frame_equal(got, want)


def test_cli_names_the_batched_executor(small, tmp_path, capsys):
    code = main(["sweep", str(small), "--out", str(tmp_path), "--executor", "nope"])
    assert code == 2
    assert "local, batched, ray, serial" in capsys.readouterr().err


# ---------------------------------------------------------------- batches


def _runs(keys: list[int]) -> list[SweepRun]:
    return [
        SweepRun(f"r{i}", {}, 0, {"model": {"kind": "logreg" if k == 0 else f"mlp{k}"}})
        for i, k in enumerate(keys)
    ]


@given(
    keys=st.lists(st.integers(0, 3), min_size=0, max_size=40),
    workers=st.integers(1, 8),
    cap=st.integers(1, 10),
)
def test_batches_hold_every_run_once_within_the_cap_and_fill_the_workers(keys, workers, cap):
    runs = _runs(keys)
    batches = make_batches(runs, workers=workers, cap=cap)
    assert sorted(r.run_id for b in batches for r in b) == sorted(r.run_id for r in runs)
    assert all(1 <= len(b) <= cap for b in batches)
    assert all(len({batch_key(r) for r in b}) == 1 for b in batches)  # one key a batch
    assert len(batches) >= min(workers, len(runs))  # every worker gets a batch
    for key in {batch_key(r) for r in runs}:  # a key's batches differ by one run at most
        sizes = [len(b) for b in batches if batch_key(b[0]) == key]
        assert max(sizes) - min(sizes) <= 1


def test_batch_runs_shrink_to_fit_memory():
    assert fit_batch_runs(16, runs=16, workers=2, per_run=100, limit=10_000) == 8
    assert fit_batch_runs(16, runs=100, workers=2, per_run=100, limit=10_000) == 16
    assert fit_batch_runs(16, runs=100, workers=2, per_run=1_000, limit=10_000) == 5
    assert fit_batch_runs(16, runs=100, workers=2, per_run=10_000, limit=10_000) == 1
    assert fit_batch_runs(3, runs=100, workers=1, per_run=1, limit=10_000) == 3


# ---------------------------------------------------------------- Ctrl-C, a dead worker


def _wait(condition, *, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out waiting for the sweep"
        time.sleep(0.1)


def _workers(pid: int) -> list[int]:
    from pathlib import Path

    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
        for child in children:
            try:
                if b"spawn_main" in Path(f"/proc/{child}/cmdline").read_bytes():
                    found.append(child)
            except OSError:
                continue
    return found


@pytest.fixture
def short_and_long(tiny, tmp_path):
    """A batched sweep process (one worker, so one batch) of a 3-round run and a run that
    does not end; returns ``(plan, process)`` once the short run is written."""
    tiny["population"]["clients"] = 8
    tiny["sweep"] = {"grid": {"rounds": [3, 100_000]}}
    del tiny["population"]["privacy_value"]  # no chosen plug-in reads it: a warning line
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(tiny))
    out = tmp_path / "out"
    plan = plan_sweep(path, out=out)
    cmd = [sys.executable, "-m", "fedgame", "sweep", str(path), "--out", str(out)]
    proc = subprocess.Popen(
        [*cmd, "--executor", "batched", "--workers", "1", "--quiet"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    short = plan.runs[0]
    try:
        # the short run is written while its batch still runs the long one
        _wait(lambda: run_status(plan.run_dir(short)) == "completed")
        yield plan, proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_ctrl_c_stops_a_batched_sweep_keeping_its_finished_runs(short_and_long):
    plan, proc = short_and_long
    short, long = plan.runs
    assert run_status(plan.run_dir(long)) is None
    workers = _workers(proc.pid)
    assert len(workers) == 1
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and text.count("\n") == 1, text
    assert text.startswith("fedgame: sweep stopped by Ctrl-C (SIGINT); 2 runs: 1 done"), text
    _wait(lambda: not os.path.exists(f"/proc/{workers[0]}"), timeout=30)
    info = json.loads((plan.sweep_dir / "sweep.json").read_text())
    assert info["status"] == "interrupted"
    assert json.loads((plan.run_dir(short) / "manifest.json").read_text())["batch"]["runs"] == 2
    todo, repaired = plan_work(plan)
    assert todo == [long] and not repaired


def test_a_dead_worker_fails_only_its_unfinished_runs(short_and_long):
    plan, proc = short_and_long
    short, long = plan.runs
    (worker,) = _workers(proc.pid)
    os.kill(worker, signal.SIGKILL)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err.decode()
    assert run_status(plan.run_dir(short)) == "completed"
    manifest = json.loads((plan.run_dir(long) / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    assert manifest["message"] == "worker process died while running"
