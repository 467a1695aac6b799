"""Sweep throughput: runs per minute of a 16-run sweep on each executor: the local pool at 1 and
all workers, the batched pool (each worker steps a batch of runs in lockstep and trains their
clients in one batched computation) at all workers, and Ray.

Setting: digits, logistic regression, 20 of the clients selected per round, 20 local steps,
100 rounds (a few seconds of work per run once a worker is warm), population.clients
{100, 200} x population.straggle_prob {0, 0.2} x 4 replicates = 16 runs.
Each executor starts cold (fresh worker processes / a fresh local Ray) and its wall time
includes that start; results go to a temporary folder.

Printed: the command, wall seconds and runs/minute per executor, the speed-up of the pool at
all workers over one worker (target >= 1.7x on 2 cores), of the batched pool over the local
pool at the same workers (target >= 2.5x), Ray's start-up time, and Ray's overhead per run
= (Ray wall - pool wall at the same workers) / runs, with and without Ray's start-up, and
the machine's load average (1 minute) before and after each executor: on a shared machine
the figures are only comparable between rows measured under the same load.

Usage: ``python bench/sweep_speed.py [--rounds R] [--workers N] [--no-ray]
[--executors local1,local,batched,ray] [--device cpu|cuda]``
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


EXECUTORS = ("local1", "local", "batched", "ray")


def main() -> None:
    import shlex
    import sys

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument(
        "--executors",
        default=",".join(EXECUTORS),
        help="comma-separated, of local1 (the pool at one worker), local, batched, ray",
    )
    parser.add_argument("--device", default="cpu", help="training.device of the runs")
    args = parser.parse_args()
    chosen = [e for e in args.executors.split(",") if e and not (args.no_ray and e == "ray")]
    unknown = set(chosen) - set(EXECUTORS)
    if unknown:
        parser.error(f"--executors: unknown {sorted(unknown)}; choose from {EXECUTORS}")
    SCENARIO["rounds"] = args.rounds
    SCENARIO["training"]["device"] = args.device
    runs, n = 16, args.workers
    print("command: python bench/sweep_speed.py " + shlex.join(sys.argv[1:]))
    walls: dict[str, float] = {}
    loads: dict[str, tuple[float, float]] = {}
    init = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        file = Path(tmp) / "sweep_speed.yaml"
        file.write_text(yaml.safe_dump(SCENARIO))
        for kind in chosen:
            before = os.getloadavg()[0]
            out = Path(tmp) / kind
            if kind == "local1":
                walls["local x1"] = timed_sweep(file, out, executor="local", workers=1)
                name = "local x1"
            else:
                if kind == "ray":
                    init = ray_startup(n)
                name = f"{kind} x{n}"
                walls[name] = timed_sweep(file, out, executor=kind, workers=n)
            loads[name] = (before, os.getloadavg()[0])
    print(f"{runs} runs of {args.rounds} rounds on {args.device}, {os.cpu_count()} CPUs")
    for name, wall in walls.items():
        before, after = loads[name]
        print(
            f"  {name:<11} {wall:7.1f} s   {runs / wall * 60:6.1f} runs/min   "
            f"load average {before:.1f} before, {after:.1f} after"
        )
    pool = walls.get(f"local x{n}")
    if pool is not None and "local x1" in walls:
        print(f"  speed-up local x{n} / x1: {walls['local x1'] / pool:.2f}x")
    if pool is not None and f"batched x{n}" in walls:
        ratio = pool / walls[f"batched x{n}"]
        print(f"  speed-up batched x{n} / local x{n}: {ratio:.2f}x (target >= 2.5x)")
    if pool is not None and f"ray x{n}" in walls:
        ray_wall = walls[f"ray x{n}"]
        print(f"  ray start-up: {init:.1f} s")
        print(f"  ray overhead per run: {(ray_wall - pool) / runs:+.2f} s with start-up, ")
        print(f"                        {(ray_wall - init - pool) / runs:+.2f} s without")


if __name__ == "__main__":
    main()
