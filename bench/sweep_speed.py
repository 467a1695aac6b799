"""Sweep throughput: runs per minute of a 16-run sweep, local pool at 1 and all workers, and Ray.

Setting: digits, logistic regression, 20 of the clients selected per round, 20 local steps,
100 rounds (a few seconds of work per run once a worker is warm), population.clients
{100, 200} x population.straggle_prob {0, 0.2} x 4 replicates = 16 runs.
Each executor starts cold (fresh worker processes / a fresh local Ray) and its wall time
includes that start; results go to a temporary folder.

Printed: wall seconds and runs/minute per executor, the speed-up of the pool at all workers
over one worker (target >= 1.7x on 2 cores), Ray's start-up time, and Ray's overhead per run
= (Ray wall - pool wall at the same workers) / runs, with and without Ray's start-up, and
the machine's load average (1 minute) before and after: on a shared machine the figures
are only comparable between rows measured under the same load.

Usage: ``python bench/sweep_speed.py [--rounds R] [--workers N] [--no-ray]``
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import yaml

SCENARIO = {
    "name": "sweep_speed",
    "seed": 5,
    "rounds": 100,
    "population": {"clients": 100, "privacy_value": 1.0, "budget": {"epsilon": 50.0}},
    "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "iid"}},
    "model": {"kind": "logreg"},
    "training": {"local_steps": 20, "batch_size": 16, "lr": 0.1, "device": "cpu"},
    "selection": {"kind": "uniform", "k": 20},
    "privacy": {"kind": "gaussian", "clip": 1.0},
    "sweep": {
        "grid": {"population.clients": [100, 200], "population.straggle_prob": [0.0, 0.2]},
        "replicates": 4,
    },
}


def timed_sweep(file: Path, out: Path, *, executor: str, workers: int) -> float:
    """Wall seconds of one cold sweep (executor start included)."""
    from fedgame.run.grid import plan_sweep
    from fedgame.run.sweep import run_sweep

    plan = plan_sweep(file, out=out)
    started = time.perf_counter()
    summary = run_sweep(plan, executor=executor, workers=workers, progress=False)
    wall = time.perf_counter() - started
    if summary.failed or summary.done != len(plan.runs):
        raise SystemExit(f"{executor}: {summary.line()}")
    return wall


def ray_startup(workers: int) -> float:
    from fedgame.run.executors import RayExecutor

    started = time.perf_counter()
    RayExecutor(workers).close()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-ray", action="store_true")
    args = parser.parse_args()
    SCENARIO["rounds"] = args.rounds
    runs = 16
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "sweep_speed.yaml"
        file.write_text(yaml.safe_dump(SCENARIO))
        walls = {
            "local x1": timed_sweep(file, Path(tmp) / "a", executor="local", workers=1),
            f"local x{args.workers}": timed_sweep(
                file, Path(tmp) / "b", executor="local", workers=args.workers
            ),
        }
        if not args.no_ray:
            init = ray_startup(args.workers)
            walls[f"ray x{args.workers}"] = timed_sweep(
                file, Path(tmp) / "c", executor="ray", workers=args.workers
            )
    print(
        f"{runs} runs of {args.rounds} rounds, {os.cpu_count()} CPUs, load average "
        f"{load_before:.1f} before, {os.getloadavg()[0]:.1f} after"
    )
    for name, wall in walls.items():
        print(f"  {name:<10} {wall:7.1f} s   {runs / wall * 60:6.1f} runs/min")
    pool = walls[f"local x{args.workers}"]
    print(f"  speed-up local x{args.workers} / x1: {walls['local x1'] / pool:.2f}x")
    if not args.no_ray:
        ray_wall = walls[f"ray x{args.workers}"]
        print(f"  ray start-up: {init:.1f} s")
        print(f"  ray overhead per run: {(ray_wall - pool) / runs:+.2f} s with start-up, ")
        print(f"                        {(ray_wall - init - pool) / runs:+.2f} s without")


if __name__ == "__main__":
    main()
