"""Device planning of sweeps (runs everywhere) and a whole scenario on CUDA (needs a GPU)."""

from __future__ import annotations

import copy
import subprocess
import sys

import pandas as pd
import pytest
import torch

from fedgame.errors import ScenarioError
from fedgame.run.devices import (
    CUDA_ENV,
    plan_local_workers,
    ray_gpus,
    run_device,
    visible_gpus,
    wants_cuda,
)
from fedgame.run.executors import LocalExecutor, make_executor
from fedgame.run.single import simulate
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
    exact = ["client_id", "selected", "participating", "link_up", "straggled", "participations"]
    pd.testing.assert_frame_equal(cpu.clients[exact], gpu.clients[exact])
    late_cpu, late_gpu = (
        cpu.rounds["test_accuracy"].iloc[-3:],
        gpu.rounds["test_accuracy"].iloc[-3:],
    )
    assert late_gpu.min() > 0.6  # it learned on the GPU (the CPU run reaches ~0.85)
    assert abs(late_cpu.mean() - late_gpu.mean()) < 0.08
