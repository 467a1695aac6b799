"""Privacy-aware selection (paper 001) vs unbiased vs Power-of-Choice, eps ~ U(0, 1).

Reduced size (stated at the top: ``CLIENTS``, ``K``, ``ROUNDS``, ``TRAIN``), 5 local DP-SGD
steps of 64, Fashion-MNIST test 2,000, logistic regression, eta*D = 1e4, 1 seed; sigma_k from
paper 001 Eq. 6-7 with each client's realised T_k (``dpsgd_local``, ``participations: auto``).
Run: python analysis/privacy_aware.py
"""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from fedgame.run.single import simulate
from fedgame.scenario.load import validate

BASE = yaml.safe_load((Path(__file__).parents[1] / "scenarios" / "privacy_aware.yaml").read_text())
CLIENTS, K, ROUNDS, TRAIN = 50, 10, 40, 10000
VARIANTS = {
    "privacy-aware": {"kind": "privacy_aware", "k": K, "eta_d": 1e4},
    "unbiased": {"kind": "unbiased", "k": K},
    "power-of-choice": {"kind": "power_of_choice", "k": K, "d": 2 * K},
}


def run(selection: dict, seed: int) -> float:
    d = {**BASE, "seed": seed, "rounds": ROUNDS}
    d["population"] = {**BASE["population"], "clients": CLIENTS}
    d["data"] = {**BASE["data"], "dataset": {**BASE["data"]["dataset"], "max_train": TRAIN}}
    d["selection"] = selection
    d["privacy"] = {**BASE["privacy"], "participations": "auto"}
    d["training"] = {**BASE["training"], "device": "cpu"}
    res = simulate(validate(d))
    return float(res.rounds["test_accuracy"].iloc[-5:].mean())


def main() -> None:
    start = time.perf_counter()
    print(f"N={CLIENTS} K={K} T={ROUNDS} max_train={TRAIN}")
    print("final test accuracy (mean of last 5 rounds), seed 0")
    for name, sel in VARIANTS.items():
        print(f"{name:>16}: {100 * run(sel, 0):5.1f}%")
    print(
        "paper 001 Table IV (F-MNIST, s=30): privacy-aware 54.80% / unbiased 16.27% / biased 15.39%"
    )
    print(f"[{time.perf_counter() - start:.0f} s]")


if __name__ == "__main__":
    main()
