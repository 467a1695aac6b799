"""Optimal queries and replies (paper 002): Laplace T sweep for b in {1,5,10}, eps in {1,5,10}.

Reduced size (stated): digits, N=10 clients with two classes each, logistic regression,
FedSGD with per-sample L1 clip xi1 = 30, Laplace noise scale 2 xi1 n_i/(d_i eps) sized for
each client's round-robin reply count n_i (``laplace_local``, ``participations: auto``),
T in ``TS``, eps in ``EPS``, 1 seed. T* comes
from the planner's estimated constants (``optimal_queries``).
Run: python analysis/queries_replies.py
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from fedgame.model import FedGameModel
from fedgame.run.single import simulate
from fedgame.scenario.load import validate

BASE = yaml.safe_load(
    (Path(__file__).parents[1] / "scenarios" / "queries_replies.yaml").read_text()
)
TS = (2, 5, 10, 20, 40, 80)
EPS = (1.0, 5.0, 10.0)


def scenario(eps: float, selection: dict, rounds: int) -> dict:
    d = {**BASE, "rounds": rounds}
    d["population"] = {**BASE["population"], "budget": {"epsilon": eps, "delta": 1e-5}}
    d["selection"] = selection
    d["privacy"] = {**BASE["privacy"], "participations": "auto"}
    d["training"] = {**BASE["training"], "device": "cpu"}
    return d


def main() -> None:
    start = time.perf_counter()
    print("final test accuracy by T (round robin, Laplace); T* from the planner")
    print(f"{'eps':>4} {'b':>3} | " + " ".join(f"T={t:<4}" for t in TS) + " | T*(planner)")
    for eps in EPS:
        for b in (1, 5, 10):
            accs = []
            for t in TS:
                sel = {"kind": "round_robin", "b": b}
                res = simulate(validate(scenario(eps, sel, t)))
                accs.append(float(res.rounds["test_accuracy"].iloc[-1]))
            plan = {"kind": "optimal_queries", "clip_l1": 30.0, "b": b}
            model = FedGameModel(validate(scenario(eps, plan, 400)))
            t_star = model.world.components["selection"].t_star
            print(f"{eps:>4.0f} {b:>3} | " + " ".join(f"{100 * a:5.1f}%" for a in accs)
                  + f" | {t_star:.1f}")  # fmt: skip
    print("paper 002 Table I (MNIST): T* = 22/121/244 (b=1), 5/32/67 (b=5), 2/20/42 (b=10)")
    print(f"[{time.perf_counter() - start:.0f} s]")


if __name__ == "__main__":
    main()
