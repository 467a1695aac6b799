"""Heterogeneous DP budgets: ε spent per client over rounds and participation as budgets run out.

Runs ``scenarios/heterogeneous_dp.yaml`` on seeds 0..N-1 (or loads one finished run folder
with ``--load``), optionally a counterfactual where every client has a relaxed budget
(``--baseline``), writes ``figures/heterogeneous_dp.png`` (seed 0) and a summary table per
client group (mean ± 95% CI over seeds).

    python analysis/heterogeneous_dp.py --baseline
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import _kept
import _shared

NAME = "heterogeneous_dp"
DEFAULTS = _shared.Defaults(seeds=5, rounds=100, quick_seeds=2, quick_rounds=8)
SCENARIO = _shared.ROOT / "scenarios" / "heterogeneous_dp.yaml"
SENSITIVE = 1.0  # ε_total below this marks a privacy-sensitive client
RELAXED = {"dist": "uniform", "low": 5.0, "high": 10.0}
#: the columns that summary() and plot() read
ROUND_COLUMNS = ("round", "active_clients", "uploaded", "test_accuracy")
CLIENT_COLUMNS = (
    "round",
    "client_id",
    "epsilon_total",
    "epsilon_spent",
    "epsilon_closed_form",
    "uploaded",
)
METRICS = (
    "final_accuracy",
    "eps_spent_median",
    "budget_used_median",
    "closed_form_median",
    "participations_mean",
    "round_active_below_90pct",
    "round_active_below_50pct",
    "active_at_end",
)


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS)
    p.add_argument("--load", type=Path, help="a finished run folder to summarise instead")
    p.add_argument("--baseline", action="store_true", help="also run all-relaxed budgets")
    return p


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """The rounds and clients columns that the summary and the figure read, of one run (as
    JSON data: kept under ``--out``/runs; :func:`frames` makes them tables again)."""
    result = _shared.simulate(job["scenario"])
    return {
        "label": job["label"],
        "seed": job["seed"],
        "rounds": _kept.frame_to_json(result.rounds[list(ROUND_COLUMNS)]),
        "clients": _kept.frame_to_json(result.clients[list(CLIENT_COLUMNS)]),
    }


def frames(output: dict[str, Any]) -> dict[str, Any]:
    """``run_one``'s output with its rounds and clients as DataFrames again."""
    tables = {k: _kept.frame_from_json(output[k]) for k in ("rounds", "clients")}
    return output | tables


def first_round_below(rounds: Any, fraction: float, total: int) -> float:
    below = rounds.loc[rounds["active_clients"] < fraction * total, "round"]
    return float(below.iloc[0]) if len(below) else float("nan")


def summary(rounds: Any, clients: Any) -> Any:
    """One row per client group: ε spent, budget use, participations, closed form, timing."""
    from fedgame.analysis.totals import round_mean

    n = clients["client_id"].nunique()
    last = clients[clients["round"] == clients["round"].max()].copy()
    last["group"] = (last["epsilon_total"] < SENSITIVE).map({True: "sensitive", False: "relaxed"})
    last["used"] = last["epsilon_spent"] / last["epsilon_total"]
    parts = clients.groupby("client_id")["uploaded"].sum()
    last["participations"] = last["client_id"].map(parts)
    table = last.groupby("group").agg(
        clients=("client_id", "size"),
        eps_spent_median=("epsilon_spent", "median"),
        budget_used_median=("used", "median"),
        closed_form_median=("epsilon_closed_form", "median"),
        participations_mean=("participations", "mean"),
    )
    table["final_accuracy"] = round_mean(rounds["test_accuracy"].tail(10)).value
    table["round_active_below_90pct"] = first_round_below(rounds, 0.9, n)
    table["round_active_below_50pct"] = first_round_below(rounds, 0.5, n)
    table["active_at_end"] = rounds["active_clients"].iloc[-1]
    return table


def plot(runs: dict[str, tuple[Any, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    axes[2].set(xlabel="round", ylabel="test accuracy", title="global model (seed 0)")
    axes[2].legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    import pandas as pd

    from fedgame.analysis.stats import t_interval
    from fedgame.scenario.load import read_raw

    report = _shared.Report(NAME, args)
    if args.load:
        loaded = (
            pd.read_parquet(args.load / "rounds.parquet"),
            pd.read_parquet(args.load / "clients.parquet"),
        )
        outputs = [{"label": "heterogeneous", "seed": 0, "rounds": loaded[0], "clients": loaded[1]}]
    else:
        base = read_raw(SCENARIO) | {"rounds": args.rounds}
        if args.quick:  # a smoke run: 30 clients instead of 100
            base = _shared.apply_sets(base, ["population.clients=30", "selection.k=6"])
        labels = {"heterogeneous": base}
        if args.baseline:
            relaxed = _shared.apply_sets(base, [f"population.budget.epsilon={RELAXED}"])
            labels["all relaxed"] = relaxed
        jobs = [
            {
                "label": label,
                "seed": seed,
                "scenario": _shared.apply_sets(data | {"seed": seed}, args.overrides),
            }
            for label, data in labels.items()
            for seed in range(args.seeds)
        ]
        _shared.validate_all(j["scenario"] for j in jobs)
        kept = _shared.run_kept(
            run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=("label", "seed")
        )
        outputs = [frames(o) for o in kept]
    first = {o["label"]: (o["rounds"], o["clients"]) for o in outputs if o["seed"] == 0}
    plot(first, args.out / "figures" / f"{NAME}.png")
    tables = []
    for o in outputs:
        t = summary(o["rounds"], o["clients"]).reset_index()
        tables.append(t.assign(run=o["label"], seed=o["seed"]))
    per_seed = pd.concat(tables)
    report.rows = per_seed.to_dict("records")
    rows = []
    for (label, group), sel in per_seed.groupby(["run", "group"], sort=False):
        cells = [t_interval(sel[m]).format(3) for m in METRICS]
        rows.append([label, group, int(sel["clients"].mean()), *cells])
    from fedgame.analysis.guarantee import epsilon_kind

    kind = epsilon_kind(read_raw(SCENARIO).get("privacy"))
    names = [f"{m} ({kind})" if m.startswith("eps_") else m for m in METRICS]
    report.table(
        "summary",
        "Per client group, mean ± 95% CI over seeds",
        ["run", "group", "clients", *names],
        rows,
    )
    report.write()


if __name__ == "__main__":
    _shared.main(main)
