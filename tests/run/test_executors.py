"""The process pool and Ray give the same tables as running in this process."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
import yaml

from fedgame.analysis import load_sweep
from fedgame.run.grid import plan_sweep
from fedgame.run.sweep import run_sweep
from fedgame.run.threads import allowed_cores

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
    # each of the two workers counts its share of the cores; the tiny model gets one thread
    share = max(1, allowed_cores() // 2)
    for manifest in _manifests(tmp_path / "pool"):
        assert manifest["threads"]["threads"] == 1
        assert 1 <= manifest["threads"]["free_cores"] <= share


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


@pytest.fixture
def auto_device(small, tmp_path, monkeypatch):
    """The ``small`` sweep on ``training.device: auto``, planned with no GPU restriction in this
    process (so whatever a run's manifest records came from its worker)."""
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    data = yaml.safe_load(small.read_text())
    data["training"]["device"] = "auto"
    path = tmp_path / "auto.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _manifests(sweep_root):
    return [json.loads(p.read_text()) for p in sweep_root.rglob("runs/*/manifest.json")]


def test_local_workers_each_see_their_planned_gpu(auto_device, tmp_path):
    """Two GPUs planned (ids given, as a 2-GPU machine would list them): two workers, each
    started with ``CUDA_VISIBLE_DEVICES`` set to its own GPU; the runs, on ``auto``, still
    train on this machine's device."""
    plan = plan_sweep(auto_device, out=tmp_path / "gpus")
    summary = run_sweep(plan, executor="local", gpus=["0", "1"], progress=False)
    assert summary.done == 4 and not summary.failed
    manifests = _manifests(tmp_path / "gpus")
    assert len(manifests) == 4
    assert {m["cuda_visible_devices"] for m in manifests} <= {"0", "1"}
    if not torch.cuda.is_available():
        assert {m["device"] for m in manifests} == {"cpu"}


def test_ray_tasks_of_cuda_runs_ask_for_gpus_per_run(auto_device, tmp_path):
    """A local Ray given two GPUs: the task of a run on ``auto`` asks for ``gpus_per_run`` of
    them, and Ray grants it one (its ``CUDA_VISIBLE_DEVICES``); a run on ``cpu`` asks for none
    and is given none."""
    plan = plan_sweep(
        auto_device,
        grid=["selection.k=3", "training.device=auto,cpu"],
        replicates=1,
        out=tmp_path / "ray",
    )
    summary = run_sweep(plan, executor="ray", workers=2, gpus=["0", "1"], progress=False)
    assert summary.done == 2 and not summary.failed
    seen = {m["device_requested"]: m["cuda_visible_devices"] for m in _manifests(tmp_path)}
    assert seen["auto"] in {"0", "1"}
    assert seen["cpu"] in (None, "")
