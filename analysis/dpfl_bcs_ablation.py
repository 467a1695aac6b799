"""Why DPFL-BCS (paper 000) falls below WeiAvg here: one change at a time.

Each row runs WeiAvg and DPFL-BCS on the same seeds (same partition, budgets and noise
streams per seed) and changes exactly ONE thing from the row it names: from fedgame's
default setting of ``analysis/dpfl_bcs.py`` (N = 40, K = 8, T = 40, T0 = 6, 6k
Fashion-MNIST, logistic regression, ε_n ~ U[0.1, ε_max], GM, clip B = 1) toward the paper's
(N = 100, K = 20, T = 200, T0 = 10, full Fashion-MNIST, ε_n ~ U[0.5, 4], B = 25), or from
the closest-to-the-paper setting that fits two cores. Columns: accuracy (mean of the last 5
rounds), the paired difference BCS − WeiAvg, and what the runs released: the per-coordinate
noise variance summed over the rounds' aggregates, Σ_t Σ_n w_n² σ_n² (w = 1/K for BCS, ε_n/Σ
ε for WeiAvg), as a ratio BCS / WeiAvg; the share of BCS's variance released in stage 1
(sensitivity 2η(B + Θ)/D_n, paper 000 Eq. 13); and the mean share of ε_n each client's
ledger charged by the end. Rows at the paper's T = 200 (T0 = 10) and with its 4,266-parameter
MNIST CNN go to a second table, ``paper_setting``; rows with every value the paper gives
(``paper_all``), its Fashion-MNIST LeNet-5 and optimiser (``close_t200_lenet``) and T = 200
without loss reports (``close_t200_noloss``) to a third, ``paper_values``. A table is written
when ``--rows`` ran one of its rows. ``runs.csv`` also holds, per run, the clients that
uploaded after T0 and whether a stage-1 P2 fit ran to the optimiser's box.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import _shared
import dpfl_bcs

NAME = "dpfl_bcs_ablation"
DEFAULTS = _shared.Defaults(seeds=5, rounds=40, quick_seeds=2, quick_rounds=8)
VARIANTS = ("WeiAvg", "DPFL-BCS")


@dataclass(frozen=True)
class Row:
    """One ablation cell: a setting (sizes + scenario overrides) under one mechanism."""

    key: str
    change: str
    mech: str = "GM"
    eps_max: float = 1.0
    size: dict[str, int] = field(default_factory=dict)
    sets: tuple[str, ...] = ()
    bcs_sets: tuple[str, ...] = ()
    seeds: int | None = None
    table: str = "ablation"


BASE = {"clients": 40, "k": 8, "t0": 6, "rounds": 40, "train": 6000}
QUICK = {"clients": 12, "k": 4, "t0": 2, "rounds": 8, "train": 0}
PAPER_EPS = ("population.budget.epsilon.low=0.5",)
MLP = ("model.kind=mlp", "model.hidden=[16]")
#: the paper's 4,266-parameter MNIST CNN (note 000 §6.2): conv 1→4 and 4→8 (3×3), 392→10
CNN = ("model.kind=cnn", "model.channels=[4, 8]", "model.kernel_size=3")
#: the paper's Fashion-MNIST LeNet-5 (61,706 parameters) and its optimiser (note 000 §6.3):
#: lr 0.05 (decay τ 200), momentum 0.9 (on the server, after the noise: see docs/dpfl_bcs.md)
#: and weight decay 2e-4
LENET = (
    "model.kind=lenet5",
    "training.lr=0.05",
    "training.server_momentum=0.9",
    "training.weight_decay=0.0002",
)
NO_LOSS = ("selection.estimate=none",)
#: the paper's Fashion-MNIST clip B = 25 (note 000 §6.3), one change wherever B enters: the
#: per-sample training clip and the updates' sensitivity (privacy.clip, both variants) and
#: BCS's stage-1 loss reports, their sensitivity 2η(B + Θ)/D_n and Λ (selection.clip)
CLIP25, CLIP25_BCS = ("privacy.clip=25",), ("selection.clip=25",)
#: closest to the paper that fits two cores: N, K, T0/T and the ε range (T, data, model reduced)
CLOSE: dict[str, Any] = {"eps_max": 4.0, "sets": PAPER_EPS}
CLOSE_SIZE = {"clients": 100, "k": 20, "t0": 2}
ROWS = (
    Row("base", "fedgame default (dpfl_bcs.py, ε_max 1)"),
    Row("t0_2", "T0 = 2 (T0/T = 5 %, the paper's 10/200)", size={"t0": 2}),
    Row("t0_0", "T0 = 0 (Prop. 1 only, no stage 1)", size={"t0": 0}),
    Row("noloss", "stage 1 without loss reports (Θ = 0; stage 2 Prop. 1)", bcs_sets=NO_LOSS),
    Row("t80", "T = 80, T0 = 12 (T0/T held at 15 %)", size={"rounds": 80, "t0": 12}, seeds=3),
    Row("n100", "N = 100, K = 20", size={"clients": 100, "k": 20}),
    Row(
        "eps_paper",
        "ε_n ~ U[0.5, 4] (the paper's F-MNIST range)",
        eps_max=4.0,
        sets=PAPER_EPS,
        seeds=3,
    ),
    Row("full", "full 60k training set (D_n × 10)", size={"train": 60000}),
    Row("mlp", "MLP 784-16-10 for logistic regression", sets=MLP, seeds=3),
    Row(
        "clip25", "clip B = 25 (the paper's F-MNIST B) for B = 1", sets=CLIP25, bcs_sets=CLIP25_BCS
    ),
    Row("close", "closest: N 100, K 20, T0/T 5 %, ε_n ~ U[0.5, 4]", **CLOSE, size=CLOSE_SIZE),
    Row(
        "close_noloss",
        "closest, stage 1 without loss reports",
        **CLOSE,
        size=CLOSE_SIZE,
        bcs_sets=NO_LOSS,
        seeds=3,
    ),
    Row(
        "close_clip25",
        "closest, clip B = 25",
        eps_max=4.0,
        sets=(*PAPER_EPS, *CLIP25),
        bcs_sets=CLIP25_BCS,
        size=CLOSE_SIZE,
    ),
    Row(
        "close_clip25_full",
        "closest with B = 25, full 60k training set (D_n × 10)",
        eps_max=4.0,
        sets=(*PAPER_EPS, *CLIP25),
        bcs_sets=CLIP25_BCS,
        size=CLOSE_SIZE | {"train": 60000},
        seeds=3,
    ),
    Row("lm3", "Laplace (LM), ε_max 3", mech="LM", eps_max=3.0, seeds=3),
    Row(
        "close_t200",
        "closest at the paper's T = 200, T0 = 10 (T0/T 5 %)",
        **CLOSE,
        size=CLOSE_SIZE | {"rounds": 200, "t0": 10},
        table="paper_setting",
    ),
    Row(
        "close_t200_cnn",
        "closest at T = 200, CNN 4-8 for logistic regression",
        **{**CLOSE, "sets": (*PAPER_EPS, *CNN)},
        size=CLOSE_SIZE | {"rounds": 200, "t0": 10},
        table="paper_setting",
    ),
    Row(
        "cnn",
        "CNN 4-8 (3×3, 4,266 parameters) for logistic regression",
        sets=CNN,
        table="paper_setting",
    ),
    Row(
        "close_t200_noloss",
        "closest at T = 200, T0 = 10, stage 1 without loss reports",
        **CLOSE,
        size=CLOSE_SIZE | {"rounds": 200, "t0": 10},
        bcs_sets=NO_LOSS,
        table="paper_values",
    ),
    Row(
        "close_t200_lenet",
        "closest at T = 200 with the paper's F-MNIST model and optimiser: LeNet-5, lr 0.05, "
        "server momentum 0.9, weight decay 2e-4",
        **{**CLOSE, "sets": (*PAPER_EPS, *LENET)},
        size=CLOSE_SIZE | {"rounds": 200, "t0": 10},
        seeds=3,
        table="paper_values",
    ),
    Row(
        "paper_all",
        "every value the paper gives: closest at T = 200, T0 = 10, clip B = 25, full 60k",
        eps_max=4.0,
        sets=(*PAPER_EPS, *CLIP25),
        bcs_sets=CLIP25_BCS,
        size=CLOSE_SIZE | {"rounds": 200, "t0": 10, "train": 60000},
        table="paper_values",
    ),
)


#: rows of ``--quick`` (a smoke run on the digits)
QUICK_ROWS = ["base", "lm3", "cnn", "close_t200_noloss"]


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    return _shared.add_rows_option(p, ROWS)


def jobs_of(row: Row, args: Any, base: dict) -> list[dict[str, Any]]:
    """The (variant, seed) jobs of one row, with their scenarios."""
    if args.quick:  # the row's T0, within the quick run's 8 rounds
        size = QUICK | {"t0": min(row.size.get("t0", QUICK["t0"]), QUICK["rounds"] // 4)}
    else:
        size = BASE | row.size
        scale = args.rounds / DEFAULTS.rounds
        size["rounds"] = round(size["rounds"] * scale)
        size["t0"] = size["t0"] and max(2, round(size["t0"] * scale))
    train = size.pop("train")
    dataset = _shared.dataset_spec(args, max_train=train or None, max_test=2000)
    seeds = args.seeds if args.quick or row.seeds is None else min(row.seeds, args.seeds)
    jobs = []
    for variant in VARIANTS:
        for seed in range(seeds):
            job = size | {"dataset": dataset, "overrides": args.overrides, "mech": row.mech}
            job |= {"eps_max": row.eps_max, "variant": variant, "seed": seed, "row": row.key}
            sets = [*row.sets, *(row.bcs_sets if variant == "DPFL-BCS" else ())]
            job["scenario"] = _shared.apply_sets(dpfl_bcs.scenario(base, job), sets)
            jobs.append(job)
    return jobs


def released_variance(job: dict[str, Any], clients: Any) -> tuple[float, float]:
    """(Σ_t Σ_n w_n² Var_n, the part of it released in rounds ≤ T0) per coordinate.

    ``noise_std`` is the Gaussian σ_n or the Laplace scale b_n (variance 2 b_n²).
    """
    up = clients[clients["uploaded"].astype(bool)]
    var = up["noise_std"].to_numpy() ** 2 * (2.0 if job["mech"] == "LM" else 1.0)
    if job["variant"] == "WeiAvg":
        eps = up["epsilon_total"]
        w = (eps / eps.groupby(up["round"]).transform("sum")).to_numpy()
    else:
        w = 1.0 / up.groupby("round")["client_id"].transform("size").to_numpy()
    part = w**2 * var
    stage1 = (up["round"] <= job["t0"]).to_numpy()
    return float(part.sum()), float(part[stage1].sum())


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Accuracy (mean of the last 5 rounds), released noise variance and ε share spent."""
    import sys
    import time

    from fedgame.analysis.totals import round_mean

    started = time.perf_counter()
    result = _shared.simulate(job["scenario"])
    took = time.perf_counter() - started
    rounds, clients = result.rounds, result.clients
    tag = f"{job['row']} {job['variant']} seed {job['seed']}"
    print(f"{NAME}: {tag}: {took:.0f} s", file=sys.stderr, flush=True)
    total, stage1 = released_variance(job, clients)
    up = clients[clients["uploaded"].astype(bool)]
    stage2 = up[up["round"] > job["t0"]]["client_id"].nunique()
    # a boolean column, empty (<NA>) in the rounds before the fit
    at_bound = "bcs_p2_at_bound" in rounds and bool(rounds["bcs_p2_at_bound"].eq(1).any())
    last = clients[clients["round"] == clients["round"].max()]
    spent = (last["epsilon_spent"] / last["epsilon_total"]).mean()
    keys = ("row", "variant", "seed")
    return {k: job[k] for k in keys} | {
        "accuracy": round_mean(rounds["test_accuracy"].iloc[-5:]).value,
        "noise_var": total,
        "noise_var_stage1": stage1,
        "eps_spent_share": float(spent),
        "stage2_clients": int(stage2),
        "p2_at_bound": at_bound,
        "status": result.manifest["status"],
        "wall_s": took,
    }


def run_unique(jobs: list[dict[str, Any]], args: Any) -> list[dict[str, Any]]:
    """``run_one`` of every job, each distinct scenario run once (rows that change only
    DPFL-BCS share their WeiAvg runs with the row they start from) and kept under
    ``--out``/runs (a rerun or another ``--rows`` reuses it)."""
    return _shared.run_kept(run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=("row",))


def main() -> None:
    import yaml

    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    rows = _shared.pick_rows(ROWS, args.rows, quick=QUICK_ROWS if args.quick else None)
    base = yaml.safe_load((_shared.ROOT / "scenarios" / "dpfl_bcs.yaml").read_text())
    jobs = [job for row in rows for job in jobs_of(row, args, base)]
    _shared.validate_all(j["scenario"] for j in jobs)
    print(f"{NAME}: {len(rows)} rows, {len(jobs)} runs", flush=True)
    report = _shared.Report(NAME, args)
    report.rows = run_unique(jobs, args)
    from fedgame.analysis.guarantee import epsilon_header

    kinds = epsilon_header("ε spent WeiAvg / BCS", [j["scenario"]["privacy"] for j in jobs])
    summarise(report, rows, {j["row"]: j for j in jobs}, kinds)
    report.write()


#: generated tables: key -> title (a table is written when one of its rows ran)
TABLES = {
    "ablation": "BCS − WeiAvg (pts), one change at a time; mean ± 95% CI over seeds (paired)",
    "paper_setting": "BCS − WeiAvg (pts) at the paper's T = 200 and with its MNIST CNN",
    "paper_values": "BCS − WeiAvg (pts) with every value the paper gives at once (logistic "
    "regression), and at T = 200 without loss reports",
}
HEADER = (
    "row",
    "change (one at a time)",
    "setting",
    "seeds",
    "WeiAvg %",
    "DPFL-BCS %",
    "BCS − WeiAvg",
    "noise var BCS / WeiAvg",
    "BCS var in stage 1",
    "ε spent WeiAvg / BCS",
)


def summarise(
    report: _shared.Report,
    rows: list[Row],
    first: dict[str, dict],
    eps_head: str = "ε spent WeiAvg / BCS",
) -> None:
    """One table per ``Row.table`` that has rows here: a line per row, paired BCS − WeiAvg
    over seeds."""
    import pandas as pd

    df = pd.DataFrame(report.rows).sort_values("seed")
    for table, title in TABLES.items():
        lines = [
            line(row, df[df.row == row.key], first[row.key]) for row in rows if row.table == table
        ]
        if lines:
            report.table(table, title, [*HEADER[:-1], eps_head], lines)


def line(row: Row, sel: Any, job: dict[str, Any]) -> list[Any]:
    """One table line from the row's runs ``sel`` (both variants, sorted by seed)."""
    import numpy as np

    from fedgame.analysis.stats import paired_difference, t_interval

    wei, bcs = (sel[sel.variant == v] for v in VARIANTS)
    setting = f"N {job['clients']}, K {job['k']}, T {job['rounds']}, T0 {job['t0']}"
    ratio = np.mean(bcs.noise_var.to_numpy() / wei.noise_var.to_numpy())
    stage1 = np.mean(bcs.noise_var_stage1.to_numpy() / bcs.noise_var.to_numpy())
    return [
        row.key,
        row.change,
        f"{row.mech}, ε_max {row.eps_max:g}; {setting}",
        len(bcs),
        t_interval(100 * wei.accuracy).format(),
        t_interval(100 * bcs.accuracy).format(),
        paired_difference(list(100 * bcs.accuracy), list(100 * wei.accuracy)).format(),
        f"{ratio:.2f}",
        f"{100 * stage1:.0f} %",
        f"{wei.eps_spent_share.mean():.2f} / {bcs.eps_spent_share.mean():.2f}",
    ]


if __name__ == "__main__":
    _shared.main(main)
