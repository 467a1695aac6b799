"""Shapley contribution payments: the estimator's cost per round against the round's training
time, and its error against exact Shapley on small rounds.

Setting: ``FedGameModel`` on scikit-learn's digits (logistic regression, d = 650, or ``--model
mlp``), K clients (Dirichlet α = 0.5 shards), every client trains every round (selection
``all``, no stragglers) at ρ = 1 (policy ``fixed``) with ``zcdp_gaussian`` noise, 3 local SGD
steps of batch 32; incentive ``shapley`` valuing coalitions by test accuracy on ``--samples``
test examples (all coalitions of a call evaluated as one batched computation).

Part 1, cost: for each K in ``--clients`` and each estimator that applies (``exact`` only for
K ≤ 10; ``tmc`` with ``--permutations``; ``gtg`` with ``--blocks`` guided blocks of K
permutations), the median over ``--rounds`` rounds of: coalitions evaluated, the estimate's
seconds (``shapley_s``), the learner's local training (``BatchedLearner.train``) and the
whole round, and estimate / training.

Part 2, error: on rounds with K ≤ 8 delivered clients the exact values are computed from the
same evaluator as the estimators (common coalition values), and for each estimator the
table gives the mean over rounds of ‖φ̂ − φ‖₁/‖φ‖₁ and of the payment shares' total
variation distance ½‖s(φ̂) − s(φ)‖₁ (s: the clipped shares R·φ⁺/Σφ⁺ with R = 1).

Usage: ``python bench/shapley.py [--clients 10,50] [--rounds 5] [--small 8]
[--small-rounds 10] [--permutations 20] [--blocks 4] [--samples 512] [--model logreg|mlp]
[--device cpu|cuda|auto] [--threads 1]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import numpy as np
import torch

from fedgame.game.shapley import exact_shapley, gtg_shapley, shapley_shares, tmc_shapley
from fedgame.mechanisms.incentive.shapley import ShapleyPayments
from fedgame.model import FedGameModel
from fedgame.scenario.load import validate


def scenario(k: int, args: argparse.Namespace, incentive: dict[str, Any]) -> dict[str, Any]:
    model = {"kind": "mlp", "hidden": [64]} if args.model == "mlp" else {"kind": "logreg"}
    return {
        "name": f"bench_shapley_{k}",
        "seed": 13,
        "rounds": args.rounds + 1,
        "population": {
            "clients": k,
            "privacy_value": {"dist": "uniform", "low": 0.5, "high": 2.0},
            "budget": {"epsilon": 1.0e6, "delta": 1.0e-5},
            "straggle_prob": 0.0,
        },
        "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "dirichlet", "alpha": 0.5}},
        "model": model,
        "training": {
            "mode": "local_sgd",
            "local_steps": 3,
            "batch_size": 32,
            "lr": 0.2,
            "device": args.device,
            "threads": args.threads,
        },
        "incentive": {"kind": "shapley", "reward": 1.0, "samples": args.samples, **incentive},
        "policy": {"kind": "fixed", "rho": 1.0},
        "selection": {"kind": "all"},
        "privacy": {"kind": "zcdp_gaussian", "clip": 1.0},
        "aggregation": {"kind": "fedavg"},
    }


class TimedTrain:
    """Wraps ``learner.train`` to time each call (synchronising a GPU before reading)."""

    def __init__(self, learner: Any) -> None:
        self.learner = learner
        self.inner = learner.train
        self.seconds: list[float] = []
        learner.train = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        out = self.inner(*args, **kwargs)
        if out.updates.is_cuda:
            torch.cuda.synchronize()
        self.seconds.append(time.perf_counter() - start)
        return out


def cost_row(k: int, name: str, args: argparse.Namespace, incentive: dict[str, Any]) -> str:
    model = FedGameModel(validate(scenario(k, args, incentive)))
    timer = TimedTrain(model.learner)
    evals, est, rounds = [], [], []
    for step in range(args.rounds + 1):
        start = time.perf_counter()
        model.step()
        whole = time.perf_counter() - start
        if step == 0:
            continue  # warm-up: first-call set-up (vmap tracing, allocator)
        evals.append(model.extra["shapley_evals"])
        est.append(model.extra["shapley_s"])
        rounds.append(whole)
    train = statistics.median(timer.seconds[1:])
    e = statistics.median(est)
    return (
        f"{k:>4} {name:<24} {statistics.median(evals):>8.0f} {e * 1e3:>10.1f} "
        f"{train * 1e3:>10.1f} {statistics.median(rounds) * 1e3:>10.1f} {e / train:>8.1f}x"
    )


def error_rows(args: argparse.Namespace) -> list[str]:
    captured: list[Any] = []
    original = ShapleyPayments.value_contributions

    def keep(self: Any, evaluator: Any, ids: Any, *, info: Any, rng: Any) -> Any:
        captured.append(evaluator.using(metric="accuracy", samples=args.samples))
        return original(self, evaluator, ids, info=info, rng=rng)

    ShapleyPayments.value_contributions = keep  # type: ignore[method-assign]
    try:
        data = scenario(args.small, args, {"estimator": "exact"})
        data["rounds"] = args.small_rounds
        model = FedGameModel(validate(data))
        for _ in range(args.small_rounds):
            model.step()
    finally:
        ShapleyPayments.value_contributions = original  # type: ignore[method-assign]
    estimators = {
        f"tmc ({args.permutations} perms)": lambda v, k, rng: tmc_shapley(
            v, k, permutations=args.permutations, rng=rng
        ),
        f"tmc ({args.permutations} perms, tol .01)": lambda v, k, rng: tmc_shapley(
            v, k, permutations=args.permutations, rng=rng, tol=0.01
        ),
        f"gtg ({args.blocks} blocks)": lambda v, k, rng: gtg_shapley(
            v, k, rng=rng, max_blocks=args.blocks, tol=0.0, tol_round=0.0
        ),
        f"gtg ({args.blocks} blocks, tol .01)": lambda v, k, rng: gtg_shapley(
            v, k, rng=rng, max_blocks=args.blocks, tol=0.01, tol_round=0.0
        ),
    }
    lines = []
    for name, run in estimators.items():
        rel, tv, used = [], [], []
        for r, evaluator in enumerate(captured):
            k = evaluator.players
            cache: dict[bytes, float] = {}
            table = memo(evaluator, cache)
            exact = exact_shapley(table, k).phi
            found = run(table, k, np.random.default_rng(r))
            norm = np.abs(exact).sum()
            if norm > 0:
                rel.append(np.abs(found.phi - exact).sum() / norm)
            s_hat = shapley_shares(found.phi, reward=1.0)
            s = shapley_shares(exact, reward=1.0)
            tv.append(0.5 * np.abs(s_hat - s).sum())
            used.append(found.evaluations)
        lines.append(
            f"{args.small:>4} {name:<30} {len(captured):>6} {np.mean(used):>8.0f} "
            f"{2**args.small:>8} {np.mean(rel):>10.3f} {np.mean(tv):>8.3f}"
        )
    return lines


def memo(evaluator: Any, cache: dict[bytes, float]) -> Any:
    """The evaluator with its values remembered per coalition (the estimators then read the
    same v(S) as the exact computation: their error is the sampling error alone)."""

    def value(masks: np.ndarray) -> np.ndarray:
        masks = np.asarray(masks, dtype=bool)
        keys = [row.tobytes() for row in masks]
        missing = [i for i, key in enumerate(keys) if key not in cache]
        if missing:
            for i, v in zip(missing, evaluator(masks[missing]), strict=True):
                cache[keys[i]] = float(v)
        return np.array([cache[key] for key in keys])

    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", default="10,50")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--small", type=int, default=8)
    parser.add_argument("--small-rounds", type=int, default=10)
    parser.add_argument("--permutations", type=int, default=20)
    parser.add_argument("--blocks", type=int, default=4)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--model", choices=("logreg", "mlp"), default="logreg")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default 1)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(
        f"cost per round (median of {args.rounds} rounds after 1 warm-up; {args.model}, "
        f"{args.samples} valuation samples, device {args.device}, {args.threads} thread(s))"
    )
    print(
        f"{'K':>4} {'estimator':<24} {'coalit.':>8} {'est. ms':>10} {'train ms':>10} "
        f"{'round ms':>10} {'est/train':>9}"
    )
    for k in (int(x) for x in args.clients.split(",")):
        cases: list[tuple[str, dict[str, Any]]] = []
        if k <= 10:
            cases.append(("exact", {"estimator": "exact", "exact_max": 10}))
        cases.append(
            (
                f"tmc ({args.permutations} perms)",
                {"estimator": "tmc", "permutations": args.permutations},
            )
        )
        cases.append(
            (
                f"gtg ({args.blocks} blocks, tol .01)",
                {"estimator": "gtg", "max_blocks": args.blocks, "tol": 0.01},
            )
        )
        for name, incentive in cases:
            print(cost_row(k, name, args, incentive), flush=True)
    print()
    print(
        f"error against exact Shapley (K = {args.small}, same coalition values; "
        "rel. L1 = |phi_hat - phi|_1/|phi|_1, TV = total variation of the payment shares)"
    )
    print(
        f"{'K':>4} {'estimator':<30} {'rounds':>6} {'coalit.':>8} {'exact':>8} "
        f"{'rel. L1':>10} {'TV':>8}"
    )
    for line in error_rows(args):
        print(line, flush=True)


if __name__ == "__main__":
    main()
