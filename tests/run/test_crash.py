"""Kill a worker, kill -9 the whole sweep, Ctrl-C it: no run is lost, no worker outlives it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fedgame.analysis import load_sweep
from fedgame.run.grid import plan_sweep
from fedgame.run.sweep import plan_work, run_status, run_sweep

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


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def _alive(pid: int) -> bool:
    """Running (a zombie waiting to be reaped by whoever adopted it has exited)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def _sweep_process(folder: Path, scenario: dict, workers: int) -> tuple:
    folder.mkdir()
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    out = folder / "out"
    plan = plan_sweep(path, out=out)
    cmd = [sys.executable, "-m", "fedgame", "sweep", str(path), "--out", str(out)]
    proc = subprocess.Popen(
        [*cmd, "--workers", str(workers), "--quiet"],
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return plan, proc


@pytest.fixture(scope="module")
def two_sweeps(tmp_path_factory):
    """Two sweep processes started at once (their start-up dominates): ``"kill"`` runs two
    long runs on one worker, ``"ctrl_c"`` a short run then a long one on one worker."""
    from conftest import TINY

    root = tmp_path_factory.mktemp("sweeps")
    base = yaml.safe_load(yaml.safe_dump(TINY))
    del base["population"]["privacy_value"]  # no chosen plug-in reads it: a warning line
    base["population"]["clients"] = 8
    kill = {**base, "rounds": 100_000, "sweep": {"grid": {"selection.k": [2, 3]}}}
    ctrl_c = {**base, "sweep": {"grid": {"rounds": [3, 100_000]}}}
    started = {
        "kill": _sweep_process(root / "kill", kill, workers=1),
        "ctrl_c": _sweep_process(root / "ctrl_c", ctrl_c, workers=1),
    }
    yield started
    for _, proc in started.values():
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_killing_the_sweep_with_sigkill_leaves_no_worker_behind(two_sweeps):
    plan, proc = two_sweeps["kill"]
    family: list[int] = []
    try:
        _wait(lambda: len(_workers(proc.pid)) == 1, timeout=120.0)
        time.sleep(1.0)  # let the worker take its run
        family = _descendants(proc.pid)  # the worker (and multiprocessing's resource tracker)
        assert set(_workers(proc.pid)) <= set(family) and family
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        _wait(lambda: not any(_alive(p) for p in family), timeout=30.0)
    finally:
        for pid in family:  # the test's own processes, if the check above failed
            if _alive(pid) and b"multiprocessing" in _cmdline(pid):
                os.kill(pid, signal.SIGKILL)
    assert all(run_status(plan.run_dir(r)) is None for r in plan.runs)


def test_ctrl_c_stops_a_sweep_keeping_its_finished_runs(two_sweeps):
    plan, proc = two_sweeps["ctrl_c"]
    short, long = plan.runs
    _wait(lambda: run_status(plan.run_dir(short)) == "completed", timeout=120.0)
    workers = _workers(proc.pid)
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    _, err = proc.communicate(timeout=60)
    text = err.decode()
    assert proc.returncode == 130, text
    assert "Traceback" not in text and text.count("\n") == 1, text
    assert text.startswith("fedgame: sweep stopped by Ctrl-C (SIGINT); 2 runs: 1 done"), text
    assert not any(_alive(p) for p in workers)
    info = json.loads((plan.sweep_dir / "sweep.json").read_text())
    assert info["status"] == "interrupted"
    assert run_status(plan.run_dir(long)) in (None, "failed", "interrupted")
    todo, repaired = plan_work(plan)
    assert todo == [long] and not repaired
