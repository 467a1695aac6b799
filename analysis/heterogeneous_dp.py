"""Heterogeneous DP budgets: ε spent per client over rounds and participation as budgets run out.

Runs ``scenarios/heterogeneous_dp.yaml`` (or loads a finished run folder with ``--load``),
optionally a counterfactual where every client has a relaxed budget (``--baseline``), writes
``heterogeneous_dp.png`` and prints a summary table.

    python analysis/heterogeneous_dp.py --out results/analysis --baseline
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pandas as pd
import torch

import fedgame.privacy.gaussian_local  # noqa: F401  (registers gaussian_local)
from fedgame.run.single import simulate
from fedgame.scenario.load import load_scenario

SCENARIO = Path(__file__).resolve().parents[1] / "scenarios" / "heterogeneous_dp.yaml"
SENSITIVE = 1.0  # ε_total below this marks a privacy-sensitive client


def run(overrides: list[str], out: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    result = simulate(load_scenario(SCENARIO, overrides), out_dir=out)
    return result.rounds, result.clients


def load(folder: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.read_parquet(folder / "rounds.parquet"), pd.read_parquet(folder / "clients.parquet")


def first_round_below(rounds: pd.DataFrame, fraction: float, total: int) -> float:
    below = rounds.loc[rounds["active_clients"] < fraction * total, "round"]
    return float(below.iloc[0]) if len(below) else float("nan")


def summary(rounds: pd.DataFrame, clients: pd.DataFrame, label: str) -> pd.DataFrame:
    """One row per client group: final ε spent, budget use, participations, closed form."""
    n = clients["client_id"].nunique()
    last = clients[clients["round"] == clients["round"].max()].copy()
    last["group"] = (last["epsilon_total"] < SENSITIVE).map({True: "sensitive", False: "relaxed"})
    last["used"] = last["epsilon_spent"] / last["epsilon_total"]
    parts = clients.groupby("client_id")["uploaded"].sum()
    last["participations"] = last["client_id"].map(parts)
    table = last.groupby("group").agg(
        clients=("client_id", "size"),
        eps_total_median=("epsilon_total", "median"),
        eps_spent_min=("epsilon_spent", "min"),
        eps_spent_median=("epsilon_spent", "median"),
        eps_spent_max=("epsilon_spent", "max"),
        budget_used_median=("used", "median"),
        closed_form_median=("epsilon_closed_form", "median"),
        participations_mean=("participations", "mean"),
    )
    acc = rounds["test_accuracy"]
    table.insert(0, "run", label)
    table["final_accuracy"] = acc.tail(10).mean()
    table["best_accuracy"] = acc.max()
    table["round_active_below_90pct"] = first_round_below(rounds, 0.9, n)
    table["round_active_below_50pct"] = first_round_below(rounds, 0.5, n)
    table["active_at_end"] = rounds["active_clients"].iloc[-1]
    return table


def plot(runs: dict[str, tuple[pd.DataFrame, pd.DataFrame]], path: Path) -> None:
    rounds, clients = runs["heterogeneous"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    for _, rows in clients.groupby("client_id"):
        sensitive = rows["epsilon_total"].iloc[0] < SENSITIVE
        axes[0].plot(
            rows["round"],
            rows["epsilon_spent"] / rows["epsilon_total"],
            color="tab:red" if sensitive else "tab:blue",
            alpha=0.25,
            lw=0.8,
        )
    axes[0].set(xlabel="round", ylabel="ε spent / ε_total", title="ε spent per client (RDP)")
    axes[0].plot([], [], color="tab:red", label="ε_total < 1")
    axes[0].plot([], [], color="tab:blue", label="ε_total ≥ 5")
    axes[0].legend()
    axes[1].plot(rounds["round"], rounds["active_clients"], label="can afford next round")
    axes[1].plot(rounds["round"], rounds["uploaded"], label="uploaded")
    axes[1].set(xlabel="round", ylabel="clients", title="participation as budgets run out")
    axes[1].legend()
    for label, (r, _) in runs.items():
        axes[2].plot(r["round"], r["test_accuracy"], label=label)
    axes[2].set(xlabel="round", ylabel="test accuracy", title="global model")
    axes[2].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("results/heterogeneous_dp_analysis"))
    parser.add_argument("--load", type=Path, help="a finished run folder to plot instead")
    parser.add_argument("--rounds", type=int, help="override the scenario's rounds")
    parser.add_argument("--baseline", action="store_true", help="also run all-relaxed budgets")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.getLogger("absl").setLevel(logging.ERROR)
    args.out.mkdir(parents=True, exist_ok=True)
    overrides = [f"rounds={args.rounds}"] if args.rounds else []
    runs = {"heterogeneous": load(args.load) if args.load else run(overrides, args.out)}
    if args.baseline:
        relaxed = "population.budget.epsilon={dist: uniform, low: 5.0, high: 10.0}"
        runs["all relaxed"] = run([*overrides, relaxed], args.out)
    plot(runs, args.out / "heterogeneous_dp.png")
    table = pd.concat([summary(r, c, label) for label, (r, c) in runs.items()])
    with pd.option_context("display.width", 200, "display.max_columns", 30):
        print(table.round(3).T.to_string())
    print(f"figure: {args.out / 'heterogeneous_dp.png'}")


if __name__ == "__main__":
    main()
