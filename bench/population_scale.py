"""Seconds per round and peak memory of the population-scale scenario for N = 10^3 ... 10^6.

``scenarios/population_scale.yaml``: N clients, each with 32 Fashion-MNIST images of two
classes drawn from the shared training set (partition ``sampled``), 100 selected per round,
5 local steps of 32, MLP 784-64-10, local Gaussian DP, independent link faults, clients table
``output.clients: active``. Each N runs in a fresh process, which prints:

- set-up seconds (data from the parsed-dataset cache, partition, population, learner),
- (a) fedgame end to end: median seconds of ``FedGameModel.step()`` (agents, faults,
  selection, training, clip + noise, aggregation, evaluation, accounting, clients table),
- (b) the batched learner alone on the same selections: ``BatchedLearner.train``, a batched
  clip + Gaussian noise, the mean update applied, ``evaluate`` (what any fedgame round does),
- (a)/(b) (target <= 1.5, flat in N: the agent layer does no O(N) Python per round),
- peak resident memory of the process (``ru_maxrss``; target <= 4 GB at N = 10^6).

(a) and (b) take turns round by round, so a machine slowing down affects both alike.

Usage: ``python bench/population_scale.py [--sizes 1e3 1e4 1e5 1e6] [--rounds 10]
[--warmup 2] [--threads N] [--device cpu]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "population_scale.yaml"


def measure(n: int, rounds: int, warmup: int, threads: int, device: str) -> dict[str, float]:
    """Run in this process: build the model for ``n`` clients and time its rounds."""
    import resource
    import time
    import warnings

    import numpy as np
    import torch
    import yaml

    from fedgame.learning.batched import clip_scale
    from fedgame.model import FedGameModel

    warnings.simplefilter("ignore")
    torch.set_num_threads(threads)
    started = time.perf_counter()
    scenario = yaml.safe_load(SCENARIO.read_text())
    scenario["data"]["dataset"]["fallback"] = None  # Fashion-MNIST itself, never the digits
    model = FedGameModel(
        scenario,
        **{
            "population__clients": n,
            "rounds": warmup + rounds,
            "training__device": device,
        },
    )
    setup = time.perf_counter() - started
    learner = model.learner
    k = int(model.scenario.config("selection").k)
    rng = np.random.default_rng(0)
    gen = torch.Generator(device=learner.device).manual_seed(0)
    sigma = torch.full((k,), 0.01, device=learner.device)

    def learner_round(t: int) -> None:
        ids = rng.choice(n, size=k, replace=False)
        res = learner.train(ids, round_index=t, generator=gen)
        u = res.updates
        u = u * clip_scale(torch.linalg.vector_norm(u, dim=1), bound=1.0)[:, None]
        noise = torch.randn(u.shape, generator=gen, device=u.device, dtype=u.dtype)
        learner.apply_update((u + sigma[:, None] * noise).mean(dim=0))
        learner.evaluate()

    def sync() -> None:
        if learner.device.type == "cuda":
            torch.cuda.synchronize()

    end_to_end, alone = [], []
    for t in range(warmup + rounds):
        t0 = time.perf_counter()
        model.step()
        sync()
        t1 = time.perf_counter()
        learner_round(t)
        sync()
        t2 = time.perf_counter()
        if t >= warmup:
            end_to_end.append(t1 - t0)
            alone.append(t2 - t1)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "n": n,
        "setup_s": setup,
        "a": float(np.median(end_to_end)),
        "b": float(np.median(alone)),
        "peak_gb": peak_kb * 1024 / 1e9,
        "device": str(learner.device),
        "clients_table": model.datacollector.clients,
        "agents_created": model.clients.created,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", nargs="+", type=float, default=[1e3, 1e4, 1e5, 1e6])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)  # child process: one N
    args = parser.parse_args()
    if args.one is not None:
        print(json.dumps(measure(args.one, args.rounds, args.warmup, args.threads, args.device)))
        return
    print(
        f"{SCENARIO.name}: K=100 of N, MLP 784-64-10, 5 local steps of 32, Gaussian DP; "
        f"{args.rounds} rounds after {args.warmup} warm-up (median), threads={args.threads}, "
        f"{os.cpu_count()} CPUs"
    )
    header = f"{'N':>9}{'setup s':>9}{'(a) s/round':>13}{'(b) s/round':>13}{'(a)/(b)':>9}"
    print(f"{header}{'peak GB':>9}  device, clients table")
    for size in args.sizes:
        cmd = [sys.executable, __file__, "--one", str(int(size)), "--rounds", str(args.rounds)]
        cmd += ["--warmup", str(args.warmup), "--threads", str(args.threads)]
        cmd += ["--device", args.device]
        child = subprocess.run(cmd, capture_output=True, text=True)
        if child.returncode != 0:  # e.g. Fashion-MNIST not installed: say why, in one line
            lines = child.stderr.strip().splitlines() or [f"exit {child.returncode}"]
            sys.exit(f"population_scale: N = {int(size)} failed: {lines[-1]}")
        r = json.loads(child.stdout.strip().splitlines()[-1])
        print(
            f"{r['n']:>9}{r['setup_s']:>9.1f}{r['a']:>13.4f}{r['b']:>13.4f}"
            f"{r['a'] / r['b']:>9.2f}{r['peak_gb']:>9.2f}  {r['device']}, {r['clients_table']}"
            f"{'' if not r['agents_created'] else ' (agents created)'}"
        )
    print("targets: (a)/(b) <= 1.5 at every N; peak <= 4 GB at N = 10^6")


if __name__ == "__main__":
    main()
