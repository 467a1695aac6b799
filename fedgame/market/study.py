"""A first study of competition: monopoly vs duopoly vs four servers (docs/competition.md).

Markets of S = 1, 2, 4 QI-DPFL servers (``market.competition: best_response``) bid for one
population (``scenarios/duopoly.yaml``'s clients and task), symmetric (every server
``gamma`` 0.5) or asymmetric (server 0 weighs accuracy more, ``gamma`` 0.8: a bigger reward
budget), without and with stragglers (``straggle_prob`` 0.2), over several seeds. Per run:

* ``payments``: Σ rewards paid to clients over the run (all servers);
* ``epsilon_mean``: the clients' mean ε spent at the end (one ledger each);
* ``accuracy_mean``/``accuracy_min``/``accuracy_max``: the servers' final test accuracies;
* ``server_cost``: Σ over rounds and servers of the leaders' server cost (paper 003 Eq. 15);
* ``welfare``: Σ of the incentive's ``welfare`` column (clients' game utilities
  Σ(payment − φνρ) less the server cost), over rounds and servers;
* ``hhi``: the mean Herfindahl index over the rounds where anything was supplied;
* ``leaders_converged``: the share of rounds whose leaders' best responses converged.

``python -m fedgame.market.study [--seeds 5] [--rounds 12] [--workers 2] [--out DIR]`` prints
one Markdown table (mean ± 95% Student-t half-width over seeds) and writes ``runs.csv``
(each run is also appended to ``runs.jsonl`` as it ends).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

BASE = Path(__file__).resolve().parents[1] / "scenarios" / "duopoly.yaml"
METRICS = (
    "payments",
    "epsilon_mean",
    "accuracy_mean",
    "accuracy_min",
    "accuracy_max",
    "server_cost",
    "welfare",
    "hhi",
    "leaders_converged",
)


def setting(servers: int, *, asymmetric: bool, stragglers: bool, seed: int, rounds: int) -> dict:
    """The scenario of one run (a mapping, as a file would hold)."""
    import yaml

    data = yaml.safe_load(BASE.read_text())
    data = copy.deepcopy(data)
    data.update(name=f"competition-{servers}", seed=seed, rounds=rounds)
    data["training"]["device"] = "cpu"
    data["population"]["straggle_prob"] = 0.2 if stragglers else 0.0
    data["servers"] = [{"name": f"S{j}"} for j in range(servers)]
    if asymmetric:
        data["servers"][0]["incentive"] = {"gamma": 0.8}
    return data


def measure(job: dict[str, Any]) -> dict[str, Any]:
    """One run's figures (module doc)."""
    from fedgame.api import run

    result = run(job["scenario"])
    rounds, clients = result.rounds, result.clients
    last = rounds[rounds["round"] == rounds["round"].max()]
    final_clients = clients[clients["round"] == clients["round"].max()]
    hhi = rounds.groupby("round")["hhi"].first().dropna()
    out = {k: v for k, v in job.items() if k != "scenario"}
    out.update(
        payments=float(rounds["payments_total"].sum()),
        epsilon_mean=float(final_clients["epsilon_spent"].mean()),
        accuracy_mean=float(last["test_accuracy"].mean()),
        accuracy_min=float(last["test_accuracy"].min()),
        accuracy_max=float(last["test_accuracy"].max()),
        server_cost=float(rounds["server_cost"].sum(min_count=1)),
        welfare=float(rounds["welfare"].sum(min_count=1)),
        hhi=float(hhi.mean()) if len(hhi) else math.nan,
        leaders_converged=float(rounds.groupby("round")["leaders_converged"].first().mean()),
    )
    return out


def jobs(seeds: int, rounds: int) -> list[dict[str, Any]]:
    """Every setting for seed 0, then for seed 1, ... (a cut-short study covers them all)."""
    out = []
    for seed in range(seeds):
        for stragglers in (False, True):
            for servers, asymmetric in ((1, False), (2, False), (2, True), (4, False), (4, True)):
                out.append(
                    {
                        "servers": servers,
                        "asymmetric": asymmetric,
                        "stragglers": stragglers,
                        "seed": seed,
                        "scenario": setting(
                            servers,
                            asymmetric=asymmetric,
                            stragglers=stragglers,
                            seed=seed,
                            rounds=rounds,
                        ),
                    }
                )
    return out


def table(runs: Any) -> str:
    """Markdown: one row per setting, mean ± 95% t half-width over seeds."""
    from scipy import stats

    keys = ["stragglers", "servers", "asymmetric"]
    lines = [
        "| stragglers | servers | asymmetric | n | " + " | ".join(METRICS) + " |",
        "|" + "---|" * (4 + len(METRICS)),
    ]
    for point, part in runs.groupby(keys, sort=True):
        cells = []
        for m in METRICS:
            x = part[m].dropna()
            if len(x) == 0:
                cells.append("–")
                continue
            half = (
                float(stats.t.ppf(0.975, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
                if len(x) > 1
                else math.nan
            )
            cells.append(f"{x.mean():.3g} ± {half:.2g}")
        lines.append(
            f"| {'yes' if point[0] else 'no'} | {point[1]} | {'yes' if point[2] else 'no'} | "
            f"{len(part)} | " + " | ".join(cells) + " |"
        )
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", default="results/competition")
    return parser


def main(argv: list[str] | None = None) -> None:
    import pandas as pd

    args = build_parser().parse_args(argv)
    todo = jobs(args.seeds, args.rounds)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with (
        ProcessPoolExecutor(max_workers=args.workers) as pool,
        open(out / "runs.jsonl", "a") as log,
    ):
        for row in pool.map(measure, todo):  # in order; each kept as soon as it is in
            rows.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
    runs = pd.DataFrame(rows)
    runs.to_csv(out / "runs.csv", index=False)
    print(table(runs))


if __name__ == "__main__":
    main()
