"""The process pool and Ray give the same tables as running in this process."""

from __future__ import annotations

import pandas as pd
import pytest

from fedgame.analysis import load_sweep
from fedgame.run.grid import plan_sweep
from fedgame.run.sweep import run_sweep

TIMING = ["wall_time_s"]


@pytest.fixture
def small(tiny, write_scenario):
    tiny["rounds"] = 2
    tiny["population"]["clients"] = 8
    tiny["sweep"] = {"grid": {"selection.k": [3, 5]}, "replicates": 2}
    return write_scenario(tiny)


def _tables(path):
    sweep = load_sweep(path)
    order = ["run_id", "round"]
    rounds = sweep.rounds.drop(columns=TIMING).sort_values(order).reset_index(drop=True)
    clients = sweep.clients.sort_values([*order, "client_id"]).reset_index(drop=True)
    return rounds, clients


@pytest.fixture
def serial_tables(small, tmp_path):
    run_sweep(plan_sweep(small, out=tmp_path / "serial"), executor="serial", progress=False)
    return _tables(tmp_path / "serial")


def test_process_pool_equals_serial(small, tmp_path, serial_tables):
    plan = plan_sweep(small, out=tmp_path / "pool")
    summary = run_sweep(plan, executor="local", workers=2, progress=False)
    assert summary.done == 4 and not summary.failed
    for got, want in zip(_tables(tmp_path / "pool"), serial_tables):
        pd.testing.assert_frame_equal(got, want)


def test_ray_local_cluster_equals_serial(small, tmp_path, serial_tables):
    plan = plan_sweep(small, grid=["selection.k=3"], out=tmp_path / "ray")
    summary = run_sweep(plan, executor="ray", workers=2, progress=False)
    assert summary.done == 2 and not summary.failed
    rounds, clients = _tables(tmp_path / "ray")
    want_rounds, want_clients = (
        t[t["selection.k"] == 3].reset_index(drop=True) for t in serial_tables
    )
    pd.testing.assert_frame_equal(rounds, want_rounds)
    pd.testing.assert_frame_equal(clients, want_clients)
