"""Device planning of sweeps (runs everywhere) and a whole scenario on CUDA (needs a GPU)."""

from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys

import pandas as pd
import pytest
import torch

from fedgame.errors import ScenarioError
from fedgame.run.devices import (
    CUDA_ENV,
    plan_local_workers,
    planned_concurrency,
    ray_concurrency,
    ray_gpus,
    run_device,
    visible_gpus,
    wants_cuda,
)
from fedgame.run.executors import LocalExecutor, make_executor
from fedgame.run.grid import plan_sweep
from fedgame.run.single import simulate
from fedgame.run.sweep import run_sweep
from fedgame.scenario.build import resolve_device
from fedgame.scenario.load import validate

HAS_CUDA = torch.cuda.is_available()


def test_cpu_runs_get_one_cpu_worker_per_core_or_the_workers_asked_for():
    plan = plan_local_workers(["cpu", "auto"], workers=None, gpus=[], cpus=6)
    assert plan.workers == 6 and not plan.cuda and all(env == {} for env in plan.envs)
    assert plan_local_workers(["cpu"], workers=3, gpus=["0", "1"], cpus=6).workers == 3
    assert plan_local_workers(["auto"], workers=None, gpus=[], cpus=2).describe() == (
        "2 CPU workers"
    )


def test_cuda_runs_get_workers_per_visible_gpu_each_seeing_its_own():
    plan = plan_local_workers(["auto"], workers=None, workers_per_gpu=2, gpus=["0", "3"])
    assert plan.cuda and plan.workers == 4
    assert [env[CUDA_ENV] for env in plan.envs] == ["0", "0", "3", "3"]
    capped = plan_local_workers(["cuda"], workers=3, workers_per_gpu=2, gpus=["0", "3"])
    assert capped.workers == 3
    explicit = plan_local_workers(["cuda:1", "cpu"], workers=None, gpus=["0", "1"])
    assert [env[CUDA_ENV] for env in explicit.envs] == ["0,1", "0,1"]  # the run picks its GPU


def test_visible_gpus_follow_cuda_visible_devices():
    assert visible_gpus({CUDA_ENV: "2, 5"}) == ["2", "5"]
    assert visible_gpus({CUDA_ENV: ""}) == []
    assert visible_gpus({CUDA_ENV: "-1"}) == []
    assert visible_gpus({}, count=2) == ["0", "1"]


def test_run_devices_and_ray_requests():
    assert run_device({"training": {"device": "cuda:1"}}) == "cuda:1"
    assert run_device({"training": {}}) == "auto" and run_device({}) == "auto"
    assert wants_cuda("auto", gpus_visible=True) and not wants_cuda("auto", gpus_visible=False)
    assert not wants_cuda("cpu", gpus_visible=True)
    assert ray_gpus("auto", gpus_per_run=0.25, cluster_gpus=2) == 0.25
    assert ray_gpus("auto", gpus_per_run=0.25, cluster_gpus=0) == 0.0
    assert ray_gpus("cpu", gpus_per_run=1.0, cluster_gpus=4) == 0.0
    assert ray_gpus("cuda", gpus_per_run=0.5, cluster_gpus=1) == 0.5


def test_local_concurrency_is_the_planned_workers_gpus_times_workers_per_gpu():
    four = ["0", "1", "2", "3"]
    runs = ["auto"] * 20
    # a GPU sweep runs one worker per GPU whatever the cores, not one per core
    assert planned_concurrency("local", runs, workers=None, gpus=four, cpus=2) == 4
    assert planned_concurrency("local", runs, workers=None, workers_per_gpu=3, gpus=four) == 12
    assert planned_concurrency("local", runs, workers=5, workers_per_gpu=3, gpus=four) == 5
    assert planned_concurrency("local", ["cuda:2"] * 20, workers=None, gpus=four, cpus=2) == 4
    # CPU runs, or no GPU visible: the CPU workers
    assert planned_concurrency("local", ["cpu"] * 20, workers=None, gpus=four, cpus=6) == 6
    assert planned_concurrency("local", runs, workers=None, gpus=[], cpus=6) == 6
    assert planned_concurrency("local", runs, workers=3, gpus=[], cpus=6) == 3
    # never more than the runs; serial is one at a time
    assert planned_concurrency("local", runs[:3], workers=None, gpus=four) == 3
    assert planned_concurrency("serial", runs, workers=8, gpus=four) == 1


def test_ray_concurrency_is_bounded_by_cpus_and_by_gpus_per_run():
    assert ray_concurrency(["auto"] * 9, cpus=16, gpus_per_run=0.25, cluster_gpus=2) == 8
    assert ray_concurrency(["cuda"] * 9, cpus=4, gpus_per_run=0.25, cluster_gpus=2) == 4
    assert ray_concurrency(["cuda"] * 9, cpus=16, gpus_per_run=1.0, cluster_gpus=3) == 3
    assert ray_concurrency(["auto"] * 9, cpus=16, gpus_per_run=1.0, cluster_gpus=0) == 16
    # CPU runs among CUDA ones hold no GPU: only the CPUs bound them
    assert ray_concurrency(["cpu", "cuda"], cpus=16, gpus_per_run=1.0, cluster_gpus=1) == 16
    two = ["0", "1"]
    runs = ["auto"] * 9
    assert planned_concurrency("ray", runs, workers=8, gpus_per_run=0.5, gpus=two) == 4
    assert planned_concurrency("ray", runs, workers=None, gpus=[], cpus=3) == 3


@pytest.fixture
def gpu_sweep(tiny, write_scenario, tmp_path, monkeypatch):
    """A 4-run sweep whose runs train on ``auto`` (a GPU where one is visible), each run
    planned at 1 GiB, under a 3 GiB memory limit."""
    monkeypatch.setenv("FEDGAME_MEMORY_LIMIT", "3G")
    tiny["training"]["device"] = "auto"
    tiny["sweep"] = {"grid": {"selection.k": [3, 5]}, "replicates": 2}
    plan = plan_sweep(write_scenario(tiny), out=tmp_path / "res")
    return dataclasses.replace(plan, memory_per_run=1 << 30)


def test_the_memory_check_counts_the_gpu_workers_that_run_at_once(gpu_sweep, tmp_path):
    four = ["0", "1", "2", "3"]
    with pytest.raises(ScenarioError) as err:  # 4 GPUs x 1 worker: 4 GiB at once
        run_sweep(gpu_sweep, executor="local", workers=None, gpus=four, progress=False)
    assert err.value.key == "--workers" and err.value.value == 4
    assert "at most 3 runs" in err.value.allowed
    doubled = dataclasses.replace(gpu_sweep, workers_per_gpu=2)
    with pytest.raises(ScenarioError) as err:  # 2 GPUs x 2 workers
        run_sweep(doubled, executor="local", workers=None, gpus=["0", "1"], progress=False)
    assert err.value.value == 4
    shared = dataclasses.replace(gpu_sweep, gpus_per_run=0.5)
    with pytest.raises(ScenarioError) as err:  # a local Ray: 2 GPUs / 0.5 per run, 8 CPUs
        run_sweep(shared, executor="ray", workers=8, gpus=["0", "1"], progress=False)
    assert err.value.value == 4
    assert not (tmp_path / "res").exists()


def test_executor_takes_the_sweep_gpu_settings():
    pool = make_executor("local", workers=None, workers_per_gpu=3)
    assert isinstance(pool, LocalExecutor) and pool.workers_per_gpu == 3


@pytest.mark.parametrize("bad", ["gpu", "cuda:", "cuda:x", "CPU", "cuda:123"])
def test_malformed_devices_are_refused_by_the_schema(tiny, bad):
    data = copy.deepcopy(tiny)
    data["training"]["device"] = bad
    with pytest.raises(ScenarioError, match=r"training\.device"):
        validate(data)


def test_sweep_gpu_settings_are_validated(tiny):
    data = copy.deepcopy(tiny)
    data["sweep"] = {"gpus_per_run": 0.5, "workers_per_gpu": 2}
    assert validate(data).sweep.gpus_per_run == 0.5
    data["sweep"] = {"gpus_per_run": 0}
    with pytest.raises(ScenarioError, match="gpus_per_run"):
        validate(data)


@pytest.mark.skipif(HAS_CUDA, reason="checks the error of a machine without a GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_cuda_without_a_gpu_is_a_clear_error(device):
    with pytest.raises(ScenarioError, match="CUDA is not available"):
        resolve_device(device)


@pytest.mark.skipif(HAS_CUDA, reason="checks the error of a machine without a GPU")
def test_cli_run_on_cuda_without_a_gpu_exits_2(tmp_path):
    args = ["validate", "scenarios/quickstart.yaml", "--set", "training.device=cuda"]
    proc = subprocess.run(
        [sys.executable, "-m", "fedgame", *args],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 2
    assert "training.device" in proc.stderr and "Traceback" not in proc.stderr


def test_auto_runs_on_what_is_there_and_the_manifest_says_so(tiny):
    data = copy.deepcopy(tiny)
    data["training"]["device"] = "auto"
    result = simulate(validate(data))
    expected = "cuda:0" if HAS_CUDA else "cpu"
    assert result.manifest["device"].startswith(expected.split(":")[0])
    assert result.manifest["device_requested"] == "auto"


@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_a_whole_scenario_on_cuda_matches_the_cpu_run(tiny):
    """Same scenario and seed on both devices: identical selections, faults and accounting
    (drawn from numpy streams); accuracy and loss close, not equal: each device's torch
    generator is its own algorithm, so minibatches and noise differ between them."""
    tables = {}
    for device in ("cpu", "cuda"):
        data = copy.deepcopy(tiny)
        data["rounds"] = 8
        data["privacy"] = {"kind": "none"}
        data["training"].update(device=device, lr=0.5, local_steps=5)
        tables[device] = simulate(validate(data))
    cpu, gpu = tables["cpu"], tables["cuda"]
    assert gpu.manifest["device"].startswith("cuda")
    exact = [
        "client_id", "selected", "participating", "decline_reason", "link_up", "straggled",
        "uploaded", "epsilon_spent",
    ]  # fmt: skip
    pd.testing.assert_frame_equal(cpu.clients[exact], gpu.clients[exact])
    late_cpu, late_gpu = (
        cpu.rounds["test_accuracy"].iloc[-3:],
        gpu.rounds["test_accuracy"].iloc[-3:],
    )
    assert late_gpu.min() > 0.6  # it learned on the GPU (the CPU run reaches ~0.85)
    assert abs(late_cpu.mean() - late_gpu.mean()) < 0.08
