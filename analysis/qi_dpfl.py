"""QI-DPFL grid (paper 003 §V): incentive × selection, mean ± sd over replicates.

Runs scenarios/qi_dpfl.yaml (Fashion-MNIST) or, when Debian's dataset-fashion-mnist files are
absent, scenarios/qi_dpfl_digits.yaml, over incentive ∈ {qi_dpfl, max, random, fixed} ×
selection ∈ {emd_threshold, all}, plus a no-DP FedAvg reference, with
``fedgame.run.single.simulate`` (replicate = 0..R-1), and prints final test accuracy and total
server cost (Eq. 15 summed over rounds) beside the paper's qualitative claims.

Usage: python analysis/qi_dpfl.py [--replicates 3] [--rounds 30] [--workers 2] [--lam 0.1]
"""

from __future__ import annotations

import argparse
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

ROOT = Path(__file__).resolve().parents[1]
EMD = {"kind": "emd_threshold", "quantile": 0.75, "reference": "population", "mode": "static"}
CELLS = {
    "QI-DPFL (qi_dpfl + emd)": {"incentive.kind": "qi_dpfl", "selection": EMD},
    "Max-select (max + emd)": {"incentive.kind": "max", "selection": EMD},
    "Random-select (random + emd)": {"incentive.kind": "random", "selection": EMD},
    "Fixed-select (fixed + emd)": {"incentive.kind": "fixed", "selection": EMD},
    "FedAvg-DP (qi_dpfl + all)": {"incentive.kind": "qi_dpfl", "selection": {"kind": "all"}},
    "Max (max + all)": {"incentive.kind": "max", "selection": {"kind": "all"}},
    "Random (random + all)": {"incentive.kind": "random", "selection": {"kind": "all"}},
    "Fixed (fixed + all)": {"incentive.kind": "fixed", "selection": {"kind": "all"}},
    "FedAvg, no DP (reference)": {
        "incentive": {"kind": "none"},
        "policy": {"kind": "always"},
        "privacy": {"kind": "none"},
        "selection": {"kind": "all"},
    },
}
CLAIM = (
    "Paper 003 claims (qualitative, no numbers): server cost QI-DPFL < Random < Max; "
    "QI-DPFL accuracy close to Max-select; FedAvg-DP has the lowest accuracy."
)


def scenario_file() -> Path:
    from fedgame.data.idx import debian_fashion_mnist_dir

    found = debian_fashion_mnist_dir()
    if found is not None and found.is_dir():
        return ROOT / "scenarios" / "qi_dpfl.yaml"
    print("Fashion-MNIST (Debian dataset-fashion-mnist) not found: using the digits fallback")
    return ROOT / "scenarios" / "qi_dpfl_digits.yaml"


def _apply(data: dict, changes: dict) -> dict:
    data = yaml.safe_load(yaml.safe_dump(data))
    for key, value in changes.items():
        *parents, last = key.split(".")
        node = data
        for part in parents:
            node = node[part]
        node[last] = value
    data.pop("sweep", None)
    return data


def run_one(args: tuple[str, dict, int, int, str, float | None]) -> dict:
    label, changes, replicate, rounds, file, lam = args
    import torch

    torch.set_num_threads(1)
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    data = _apply(yaml.safe_load(Path(file).read_text()), changes | {"rounds": rounds})
    if lam is not None and data["incentive"]["kind"] != "none":
        data["incentive"]["lam"] = lam
    data["training"]["device"] = "cpu"
    result = simulate(validate(data), replicate=replicate)
    r = result.rounds
    cost = float(r["server_cost"].sum()) if "server_cost" in r else float("nan")
    return {
        "cell": label,
        "replicate": replicate,
        "accuracy": float(r["test_accuracy"].iloc[-1]),
        "server_cost": cost,
        "payments": float(r["payments_total"].sum()) if "payments_total" in r else float("nan"),
        "participants_last": int(r["uploaded"].iloc[-1]),
        "status": result.manifest["status"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--replicates", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--lam", type=float, help="override incentive.lam (the noise knob)")
    args = parser.parse_args()
    file = scenario_file()
    lam = "" if args.lam is None else f", incentive.lam={args.lam}"
    where = file.relative_to(ROOT)
    print(f"scenario: {where}, {args.rounds} rounds, {args.replicates} replicates{lam}")
    jobs = [
        (label, changes, rep, args.rounds, str(file), args.lam)
        for label, changes in CELLS.items()
        for rep in range(args.replicates)
    ]
    started = time.perf_counter()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        rows = list(pool.map(run_one, jobs))
    df = pd.DataFrame(rows)

    def fmt(x: pd.Series) -> str:
        if x.isna().all():
            return "-"
        sd = x.std(ddof=1) if len(x) > 1 else np.nan
        return f"{x.mean():.4f} ± {sd:.4f}"

    table = df.groupby("cell", sort=False).agg(
        accuracy=("accuracy", fmt),
        server_cost=("server_cost", fmt),
        payments=("payments", fmt),
        uploaded_last_round=("participants_last", "mean"),
    )
    print(table.to_string())
    print(CLAIM)
    print(f"{len(jobs)} runs in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
