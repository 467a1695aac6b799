"""Kill a worker, then kill -9 the whole sweep; a rerun completes every run exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

from fedgame.analysis import load_sweep
from fedgame.run.grid import plan_sweep
from fedgame.run.sweep import run_status, run_sweep

ROUNDS = 4
LONG_ROUNDS = 300


def _children(pid: int) -> list[int]:
    out = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    return out


def _workers(pid: int) -> list[int]:
    found = []
    for child in _children(pid):
        try:
            cmd = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if b"spawn_main" in cmd:
            found.append(child)
    return found


def _statuses(plan) -> list[str | None]:
    return [run_status(plan.run_dir(r)) for r in plan.runs]


def _wait(condition, *, timeout: float = 120.0, poll: float = 0.1) -> None:
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, "timed out waiting for the sweep"
        time.sleep(poll)


def _start_sweep(scenario, write_scenario, tmp_path, *, rounds: int, ks: list[int], stderr):
    """Plan and start ``fedgame sweep`` (2 workers) over ``selection.k`` in ``ks`` x 2
    replicates of an 8-client scenario; returns ``(plan, process)``."""
    scenario["rounds"] = rounds
    scenario["population"]["clients"] = 8
    scenario["sweep"] = {"grid": {"selection.k": ks}, "replicates": 2}
    path = write_scenario(scenario)
    out = tmp_path / "out"
    plan = plan_sweep(path, out=out)
    cmd = [sys.executable, "-m", "fedgame", "sweep", str(path), "--out", str(out)]
    proc = subprocess.Popen(
        [*cmd, "--workers", "2", "--quiet"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    return plan, proc


def test_killed_worker_and_killed_sweep_lose_nothing(tiny, write_scenario, tmp_path):
    # runs of LONG_ROUNDS last about a second, so one is surely in flight at the kill
    plan, proc = _start_sweep(
        tiny,
        write_scenario,
        tmp_path,
        rounds=LONG_ROUNDS,
        ks=[2, 3, 4],
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: "completed" in _statuses(plan))  # workers are up and runs in flight
        os.kill(_workers(proc.pid)[0], signal.SIGKILL)
        # the runs that were in flight are recorded as failed, and the sweep goes on
        _wait(lambda: "failed" in _statuses(plan))
        assert proc.poll() in (None, 1)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    statuses = _statuses(plan)
    assert "completed" in statuses
    for run, status in zip(plan.runs, statuses):
        if status == "completed":  # finished means fully written
            assert len(pd.read_parquet(plan.run_dir(run) / "rounds.parquet")) == LONG_ROUNDS
    summary = run_sweep(plan, executor="serial", progress=False)
    assert summary.skipped == statuses.count("completed")
    assert summary.done + summary.skipped == len(plan.runs) and not summary.failed
    rounds = load_sweep(tmp_path / "out").rounds
    want = {r.run_id: LONG_ROUNDS for r in plan.runs}
    assert rounds.groupby("run_id").size().to_dict() == want
    assert not list(plan.sweep_dir.rglob("*.tmp"))


def test_worker_killed_while_starting_neither_hangs_nor_crashes_the_sweep(
    tiny, write_scenario, tmp_path
):
    plan, proc = _start_sweep(
        tiny, write_scenario, tmp_path, rounds=ROUNDS, ks=[2, 3], stderr=subprocess.PIPE
    )
    try:
        _wait(lambda: bool(_workers(proc.pid)), timeout=60.0, poll=0.001)
        os.kill(_workers(proc.pid)[0], signal.SIGKILL)  # before it has taken any run
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode in (0, 1), err.decode()
    assert b"Traceback" not in err, err.decode()
    statuses = _statuses(plan)
    assert set(statuses) <= {"completed", "failed"} and "completed" in statuses
    summary = run_sweep(plan, executor="serial", progress=False)
    assert summary.done == statuses.count("failed") and not summary.failed
