"""Seconds per market round at 1, 2 and 4 competing servers, equal total clients trained.

Setting: one population of N clients (default 40, digits, logistic regression, 3 local SGD
steps of batch 50, zCDP Gaussian noise); S servers (1, 2, 4), each with the QI-DPFL leader and
``uniform`` selection of k = K/S clients (K = 24 by default), so every round trains K clients
in all whatever S. Each client's budget is large (ε_total = 1000) so no one runs out.

Per ``market.competition`` (``independent``, ``best_response``), S and training path it prints
the median seconds per round over R rounds after W warm-up rounds (the models built first, not
timed), split into training (``fedgame.market.training.train_federations``) and the rest
(offers, the leaders' and followers' games, budget, privatise, aggregate, evaluate, tables).
The paths: ``separate`` (before issue 35 item 4: one ``BatchedLearner.train`` call per server,
in turn), ``batched`` (the default: one ``train_models`` call for all servers of a learner
group) and ``batched+eval`` (also ``market.batched_evaluation``: one ``evaluate_models`` call).
The three paths' models step in turn, round by round, so the shared machine's load falls on
all three alike; torch uses ``--threads`` CPU threads (default 1).

Usage: ``python bench/servers.py [--clients N] [--trained K] [--rounds R] [--warmup W]
[--servers 1,2,4] [--competition independent,best_response] [--device cpu|cuda|auto]
[--threads T]``.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from typing import Any

import numpy as np
import torch

import fedgame.market.model as market_model
from fedgame.api import load_scenario
from fedgame.market.model import MarketModel


def scenario(
    servers: int,
    *,
    clients: int,
    trained: int,
    rounds: int,
    device: str,
    competition: str,
    batched_evaluation: bool = False,
) -> Any:
    return load_scenario(
        {
            "name": f"bench-servers-{servers}",
            "seed": 1,
            "rounds": rounds,
            "population": {
                "clients": clients,
                "privacy_value": {"dist": "uniform", "low": 0.9, "high": 1.1},
                "budget": {"epsilon": 1000.0, "delta": 1e-5},
            },
            "data": {
                "dataset": {"kind": "digits"},
                "partition": {"kind": "dirichlet", "alpha": 1.0},
            },
            "model": {"kind": "logreg"},
            "training": {"local_steps": 3, "batch_size": 50, "lr": 0.1, "device": device},
            "incentive": {"kind": "qi_dpfl", "lam": 0.01},
            "selection": {"kind": "uniform", "k": max(1, trained // servers)},
            "privacy": {"kind": "zcdp_gaussian", "clip": 1.0},
            "network": {"faults": {"kind": "none"}},
            "market": {"competition": competition, "batched_evaluation": batched_evaluation},
            "servers": [{"name": f"S{j}"} for j in range(servers)],
        }
    )


PATHS = ("separate", "batched", "batched+eval")


def measure(
    servers: int, args: argparse.Namespace, competition: str
) -> dict[str, tuple[float, float, int]]:
    """Per path: (median seconds per round, median of its training, clients trained in the
    last round). The paths' models step in turn, round by round, so a change in the
    machine's load falls on all of them alike."""
    models = {
        path: MarketModel(
            scenario(
                servers,
                clients=args.clients,
                trained=args.trained,
                rounds=args.warmup + args.rounds,
                device=args.device,
                competition=competition,
                batched_evaluation=path == "batched+eval",
            )
        )
        for path in PATHS
    }
    now = {"path": PATHS[0], "training": 0.0}
    original = market_model.train_federations

    def timed(jobs: Any) -> Any:
        if now["path"] == "separate":  # no learner group: one train call per server, as before
            jobs = [None if j is None else dataclasses.replace(j, group=-1) for j in jobs]
        start = time.perf_counter()
        out = original(jobs)
        now["training"] = time.perf_counter() - start
        return out

    rounds: dict[str, list[tuple[float, float]]] = {path: [] for path in PATHS}
    market_model.train_federations = timed  # type: ignore[assignment]
    try:
        for r in range(args.warmup + args.rounds):
            for path, model in models.items():
                now["path"] = path
                start = time.perf_counter()
                model.step()
                if r >= args.warmup:
                    rounds[path].append((time.perf_counter() - start, float(now["training"])))
    finally:
        market_model.train_federations = original
    out = {}
    for path, model in models.items():
        total, training = np.median(np.array(rounds[path]), axis=0)
        trained = int(np.sum([len(s.now.selected) for s in model.servers]))
        out[path] = (float(total), float(training), trained)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=40)
    parser.add_argument("--trained", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--servers", default="1,2,4")
    parser.add_argument("--competition", default="independent,best_response")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = parser.parse_args()
    counts = [int(s) for s in args.servers.split(",")]
    torch.set_num_threads(args.threads)
    print(
        f"market round: N = {args.clients} clients, K = {args.trained} trained per round in all, "
        f"median of {args.rounds} rounds after {args.warmup} warm-up, device {args.device}, "
        f"{args.threads} torch thread(s)"
    )
    head = ("servers", "trained", "s/round", "training", "rest")
    print(f"{'competition':>14} {'path':>12} " + " ".join(f"{h:>8}" for h in head))
    for competition in args.competition.split(","):
        for s in counts:
            for path, (per_round, training, trained) in measure(s, args, competition).items():
                print(
                    f"{competition:>14} {path:>12} {s:>8} {trained:>8} {per_round:>8.4f} "
                    f"{training:>8.4f} {per_round - training:>8.4f}"
                )


if __name__ == "__main__":
    main()
