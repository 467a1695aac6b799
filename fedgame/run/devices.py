"""Which device a sweep's runs train on, and how many workers each executor starts for it.

A run uses CUDA when its ``training.device`` is ``cuda`` or ``cuda:N``, or ``auto`` where a
GPU is visible. Then:

- the local executor starts ``workers_per_gpu`` workers per visible GPU, each with
  ``CUDA_VISIBLE_DEVICES`` set to its one GPU (so ``cuda`` and ``auto`` in the worker mean that
  GPU); a sweep whose runs name a GPU explicitly (``cuda:N``) keeps every GPU visible to every
  worker, since the run picks its own;
- a Ray task asks for ``gpus_per_run`` GPUs (Ray hides GPUs from a task that asks for none,
  and makes the one it grants the task's ``cuda``).

Runs on the CPU get CPU workers: ``--workers`` of them, else one per core.

:func:`planned_concurrency` says how many runs of a sweep execute at once under that plan (the
sweep's memory check multiplies it by one run's memory). Every function here takes the visible
GPU ids as a parameter (default: :func:`visible_gpus`), so a plan can be made, and tested, for a
machine other than this one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

CUDA_ENV = "CUDA_VISIBLE_DEVICES"


def run_device(data: Mapping[str, Any]) -> str:
    """The ``training.device`` a run's scenario dict asks for (``auto`` when unset)."""
    training = data.get("training")
    device = training.get("device", "auto") if isinstance(training, Mapping) else "auto"
    return str(device)


def wants_cuda(device: str, *, gpus_visible: bool) -> bool:
    """Whether a run asking for ``device`` trains on a GPU when ``gpus_visible``."""
    return device.startswith("cuda") or (device == "auto" and gpus_visible)


def visible_gpus(env: Mapping[str, str] | None = None, count: int | None = None) -> list[str]:
    """The GPU ids this process may hand to workers.

    ``CUDA_VISIBLE_DEVICES`` when it is set (its comma-separated entries; empty: none), else
    ``0 .. count-1`` with ``count`` torch's device count (asked only when needed).
    """
    env = os.environ if env is None else env
    listed = env.get(CUDA_ENV)
    if listed is not None:
        return [g.strip() for g in listed.split(",") if g.strip() and g.strip() != "-1"]
    if count is None:
        count = _cuda_count()
    return [str(i) for i in range(count)]


def _cuda_count() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


@dataclass(frozen=True)
class WorkerPlan:
    """The local executor's workers: one environment (variables to set) per worker."""

    envs: tuple[dict[str, str], ...]
    cuda: bool

    @property
    def workers(self) -> int:
        return len(self.envs)

    def describe(self) -> str:
        """One line for the sweep's log: how many workers on what."""
        if not self.cuda:
            return f"{self.workers} CPU workers"
        gpus = sorted({env.get(CUDA_ENV, "all") for env in self.envs})
        return f"{self.workers} GPU workers on GPU(s) {', '.join(gpus)}"


def plan_local_workers(
    devices: Iterable[str],
    *,
    workers: int | None,
    workers_per_gpu: int = 1,
    gpus: Sequence[str] | None = None,
    cpus: int | None = None,
) -> WorkerPlan:
    """Workers for runs asking for ``devices``: per GPU when any of them trains on CUDA.

    Args:
        devices: each run's ``training.device``.
        workers: ``--workers`` (caps GPU workers; the CPU worker count when given).
        workers_per_gpu: workers sharing one GPU (sweep setting).
        gpus: visible GPU ids (default :func:`visible_gpus`).
        cpus: CPU cores (default ``os.cpu_count()``).
    """
    devices = list(devices)
    gpus = visible_gpus() if gpus is None else list(gpus)
    if gpus and any(wants_cuda(d, gpus_visible=True) for d in devices):
        if any(d.startswith("cuda:") for d in devices):  # runs choose their own GPU
            count = len(gpus) * workers_per_gpu
            envs = [{CUDA_ENV: ",".join(gpus)} for _ in range(count)]
        else:
            envs = [{CUDA_ENV: g} for g in gpus for _ in range(workers_per_gpu)]
        if workers is not None:
            envs = envs[:workers]
        return WorkerPlan(tuple(envs), cuda=True)
    count = workers or cpus or os.cpu_count() or 1
    return WorkerPlan(tuple({} for _ in range(count)), cuda=False)


def ray_gpus(device: str, *, gpus_per_run: float, cluster_gpus: float) -> float:
    """GPUs a Ray task of a run asking for ``device`` requests (0 for a CPU run)."""
    return gpus_per_run if wants_cuda(device, gpus_visible=cluster_gpus > 0) else 0.0


def ray_concurrency(
    devices: Iterable[str], *, cpus: int, gpus_per_run: float, cluster_gpus: float
) -> int:
    """Ray tasks that run at once on ``cpus`` CPUs and ``cluster_gpus`` GPUs.

    Each task takes one CPU; a CUDA run's task also takes ``gpus_per_run`` GPUs, so when every
    run trains on CUDA at most ``floor(cluster_gpus / gpus_per_run)`` run at once (CPU runs
    among them are bounded by the CPUs alone).
    """
    requests = [ray_gpus(d, gpus_per_run=gpus_per_run, cluster_gpus=cluster_gpus) for d in devices]
    if requests and all(requests):
        return max(1, min(cpus, int(cluster_gpus / gpus_per_run + 1e-9)))
    return max(1, cpus)


def planned_concurrency(
    executor: str,
    devices: Sequence[str],
    *,
    workers: int | None,
    workers_per_gpu: int = 1,
    gpus_per_run: float = 1.0,
    gpus: Sequence[str] | None = None,
    cpus: int | None = None,
) -> int:
    """Runs of ``devices`` that execute at once on ``executor`` (never more than the runs).

    ``serial``: one. ``local``: the workers :func:`plan_local_workers` starts (visible GPUs x
    ``workers_per_gpu`` for CUDA runs, else ``workers`` or one per core). ``ray`` (a local
    cluster of ``workers`` or all CPUs and the visible GPUs): :func:`ray_concurrency`.
    """
    if executor == "serial" or not devices:
        return 1
    cpus = cpus or os.cpu_count() or 1
    gpus = visible_gpus() if gpus is None else list(gpus)
    if executor == "ray":
        at_once = ray_concurrency(
            devices, cpus=workers or cpus, gpus_per_run=gpus_per_run, cluster_gpus=len(gpus)
        )
    else:
        plan = plan_local_workers(
            devices, workers=workers, workers_per_gpu=workers_per_gpu, gpus=gpus, cpus=cpus
        )
        at_once = plan.workers
    return max(1, min(at_once, len(devices)))
