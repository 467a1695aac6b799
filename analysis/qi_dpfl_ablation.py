"""QI-DPFL (paper 003): why its accuracy claims do or do not reproduce, one change at a time.

Every row plays QI-DPFL (Theorem-2 reward, EMD selection), Max-select (3·R*, EMD selection)
and FedAvg-DP (Theorem-2 reward, all clients) with zCDP noise at the row's λ, and FedAvg-select
and FedAvg without DP, over the same seeds; it reports the claims' paired differences per seed
(mean ± 95% t-interval): QI − Max-select (claim "≈ Max", within ±1 pt), QI − FedAvg-DP and
FedAvg − FedAvg-DP (claim "FedAvg-DP lowest"), FedAvg-select − FedAvg (claim "selection
helps"). Beside them, what sets the noise: N of H (selected of all clients), the mean zCDP
budget ρ_i a QI-DPFL client plays in round 1 and the L2 norm of the aggregated noise in round
1 over the clipping bound C (‖Σ_i w_i n_i‖ ≈ sqrt(d·Σ_i w_i² σ_i²) with FedAvg weights w_i and
σ_i² = 2C²/(ρ_i|D_i|²), Eq. 10; w_i = 1/N under uniform aggregation; the clipped update
itself has norm ≤ C).

Rows: (i) fedgame's setting of analysis/qi_dpfl.py (6k/2k Fashion-MNIST, H = 20, Dirichlet
α = 1, θ_th = 75 % quantile, 3 local steps of 50 at lr 0.1, T = 30) at λ = 0.01 and 1, and a
λ sweep; one change at a time from it at λ = 1: the full training set, IID, α = 0.3 and 0.1,
θ_th = 50 % quantile, the paper's lr 0.01, more rounds, H = 50; (ii) the closest-to-paper
setting that fits 2 cores (Table I's MNIST row on full Fashion-MNIST 60k/10k: linear model, lr
0.01, T = 30, π = 0.9429, Dirichlet α = 1 and IID; H, θ_th, λ, batch, local steps are not in
the paper and stay fedgame's) at λ = 0.01 and 1, and with Hsu et al.'s per-client Dirichlet
draw at λ = 1; (iii) one change back from it at λ = 1.
Without Fashion-MNIST (``--dataset digits``) the rows that need the full training set are left
out. Finished runs are kept under ``OUT/runs/`` (seed by seed); a second call with the same
``--out`` on the same code reuses them (runs are deterministic per seed; ``--fresh`` reruns).
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

import _shared

NAME = "qi_dpfl_ablation"
DEFAULTS = _shared.Defaults(seeds=5, rounds=30, quick_seeds=2, quick_rounds=3)
FULL = (("data.dataset.max_train", None), ("data.dataset.max_test", None))
PAPER = (*FULL, ("training.lr", 0.01))
IID = ("data.partition", {"kind": "iid"})
MEAN = ("aggregation", {"kind": "mean"})
PER_CLIENT = ("data.partition.variant", "per_client")
DEFAULT_ROW = "fedgame default (qi_dpfl.py)"
PAPER_ROW = "closest to paper (60k, lr 0.01)"


@dataclass(frozen=True)
class Row:
    """One setting: ``changes`` (dotted scenario keys) applied to the base, at ``lam``.

    ``quantile`` replaces the EMD selection's kept share; ``long`` multiplies the rounds by 10/3
    (T = 100 at the default 30); ``quick`` rows are the ones ``--quick`` runs.
    """

    label: str
    lam: float
    changes: tuple[tuple[str, Any], ...] = ()
    quantile: float = 0.75
    long: bool = False
    quick: bool = False

    @property
    def full_data(self) -> bool:
        """Whether the row reads the full training set (not available on digits)."""
        return any(key == "data.dataset.max_train" for key, _ in self.changes)


def rows_for(rounds: int) -> list[Row]:
    """The ablation rows, in table order."""
    t_long = round(rounds * 10 / 3)
    default = [
        Row(DEFAULT_ROW, 0.01, quick=True),
        Row(DEFAULT_ROW, 1.0, quick=True),
        *(Row(f"default, λ = {lam:g}", lam) for lam in (0.03, 0.1, 0.3, 3.0)),
        Row("default + full training set (60k/10k)", 1.0, FULL),
        Row("default + IID", 1.0, (IID,), quick=True),
        Row("default + Dirichlet α = 0.3", 1.0, (("data.partition.alpha", 0.3),)),
        Row("default + Dirichlet α = 0.1", 1.0, (("data.partition.alpha", 0.1),)),
        Row("default + per-client Dirichlet α = 1 (Hsu)", 1.0, (PER_CLIENT,)),
        Row(
            "default + per-client Dirichlet α = 0.1 (Hsu)",
            1.0,
            (PER_CLIENT, ("data.partition.alpha", 0.1)),
        ),
        Row("default + θ_th = 50 % quantile", 1.0, quantile=0.5),
        Row("default + lr 0.01 (paper)", 1.0, (("training.lr", 0.01),)),
        Row(f"default + T = {t_long}", 1.0, long=True),
        Row("default + H = 50 clients", 1.0, (("population.clients", 50),)),
        Row("default + uniform 1/N aggregation (Alg. 1)", 1.0, (MEAN,)),
    ]
    paper = [
        *(Row(PAPER_ROW, lam, PAPER, quick=lam == 1.0) for lam in (0.01, 0.1, 1.0, 10.0)),
        Row("closest to paper, IID", 0.01, (*PAPER, IID)),
        Row("closest to paper, IID", 1.0, (*PAPER, IID)),
        Row("closest to paper, per-client Dirichlet α = 1 (Hsu)", 1.0, (*PAPER, PER_CLIENT)),
        Row("paper + Dirichlet α = 0.1", 1.0, (*PAPER, ("data.partition.alpha", 0.1))),
        Row("paper + θ_th = 50 % quantile", 1.0, PAPER, quantile=0.5),
        Row("paper + uniform 1/N aggregation (Alg. 1)", 1.0, (*PAPER, MEAN)),
    ]
    return default + paper


QI_ROW_CELLS = (
    "QI-DPFL (qi_dpfl + emd)",
    "Max-select (max + emd)",
    "FedAvg-DP (qi_dpfl + all)",
    "FedAvg-select (emd, no DP)",
    "FedAvg (all, no DP)",
)


def build_parser() -> Any:
    return _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")


def row_scenario(base: dict[str, Any], row: Row, cell: str, seed: int, rounds: int) -> dict:
    """The scenario of one (row, cell, seed): the row's changes, then the cell's components."""
    import qi_dpfl

    from fedgame.scenario.load import apply_overrides

    changed = apply_overrides(base, row.changes)
    if row.long:
        changed["rounds"] = round(rounds * 10 / 3)
    d = qi_dpfl.cell_scenario(changed, cell, row.lam, seed)
    if d["selection"]["kind"] == "emd_threshold":
        d["selection"] = {**d["selection"], "quantile": row.quantile}
    return d


def logreg_dim(dataset: str) -> int:
    """Parameters d of the logistic-regression model: (features + 1) × 10 classes."""
    return (64 + 1) * 10 if dataset == "digits" else (28 * 28 + 1) * 10


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Final accuracy, selected clients and round-1 noise of one run (kept under
    ``--out``/runs, so that an interrupted script resumes)."""
    import numpy as np

    result = _shared.simulate(job["scenario"])
    r, c = result.rounds, result.clients
    round1 = c[c["round"] == 1]
    first = round1[round1["uploaded"].astype(bool)]
    out = {
        "key": job["key"],
        "accuracy": float(r["test_accuracy"].iloc[-1]),
        "uploaded": int(r["uploaded"].iloc[0]),
        "clients": int(c["client_id"].nunique()),
        "data_kept": float(first["dataset_size"].sum() / round1["dataset_size"].sum()),
        "status": result.manifest["status"],
        "rho_mean": math.nan,
        "noise_over_clip": math.nan,
    }
    if "rho" in first and first["rho"].notna().any():
        sizes = first["dataset_size"].to_numpy(float)
        uniform = job["scenario"]["aggregation"]["kind"] == "mean"
        weights = np.full(sizes.size, 1.0 / sizes.size) if uniform else sizes / sizes.sum()
        sigma = first["noise_std"].to_numpy(float)
        clip = float(job["scenario"]["privacy"]["clip"])
        agg = math.sqrt(job["dim"] * float((weights**2 * sigma**2).sum()))
        out |= {"rho_mean": float(first["rho"].mean()), "noise_over_clip": agg / clip}
    del result, r, c, round1, first
    gc.collect()  # a finished model is a cycle of agents and learner: free it now
    return out


def run_coverage(job: dict[str, Any]) -> dict[str, Any]:
    """The smallest share of a class's training samples that the EMD-selected clients hold
    (min over classes of Σ_selected n_hj / Σ_h n_hj), from the partition alone (kept like
    :func:`run_one`)."""
    import numpy as np

    from fedgame.model import FedGameModel
    from fedgame.scenario.load import validate

    model = FedGameModel(validate({**job["scenario"], "rounds": 1}))
    counts = np.asarray(model.table.label_counts, dtype=float)
    eligible = model.server.selection_rule.eligible_ids()
    chosen = np.isin(np.arange(counts.shape[0]), sorted(eligible or ()))
    out = {"key": job["key"], "class_kept": float((counts[chosen].sum(0) / counts.sum(0)).min())}
    _release(model)
    del model
    gc.collect()
    return out


def _release(model: Any) -> None:
    from fedgame.run.single import release_agent_ids

    release_agent_ids(model)


def main() -> None:
    import qi_dpfl

    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    args.partition, args.alpha = "dirichlet", 1.0
    base = qi_dpfl.base_scenario(args)
    rows = [
        row
        for row in rows_for(args.rounds)
        if (row.quick or not args.quick) and not (row.full_data and args.dataset == "digits")
    ]
    dim = logreg_dim(args.dataset)
    unique: dict[str, dict[str, Any]] = {}
    plan: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        for cell in QI_ROW_CELLS:
            for seed in range(args.seeds):
                scenario = _shared.apply_sets(
                    row_scenario(base, row, cell, seed, args.rounds), args.overrides
                )
                text = json.dumps(scenario, sort_keys=True, default=str)
                key = hashlib.sha256(text.encode()).hexdigest()[:20]
                job = {"key": key, "scenario": scenario, "dim": dim, "seed": seed}
                unique.setdefault(key, job)
                plan.append({"row": i, "cell": cell, "seed": seed, "key": key})
    _shared.validate_all(j["scenario"] for j in unique.values())
    jobs = sorted(unique.values(), key=lambda j: j["seed"])
    print(
        f"{NAME}: {len(rows)} rows × {len(QI_ROW_CELLS)} cells × {args.seeds} seeds, "
        f"{len(unique)} distinct runs",
        flush=True,
    )
    report = _shared.Report(NAME, args)
    kept = {"out": args.out, "workers": args.workers, "fresh": args.fresh}
    results = {r["key"]: r for r in _shared.run_kept(run_one, jobs, **kept)}
    _, _, _, select, _ = QI_ROW_CELLS
    coverage = {
        f"classes:{p['key']}": {**unique[p["key"]], "key": f"classes:{p['key']}"}
        for p in plan
        if p["cell"] == select
    }
    results |= {
        r["key"]: r for r in _shared.run_kept(run_coverage, list(coverage.values()), **kept)
    }
    for p in plan:
        p["class_kept"] = (
            results[f"classes:{p['key']}"]["class_kept"] if p["cell"] == select else math.nan
        )
    report.rows = [
        {**p, "label": rows[p["row"]].label, "lam": rows[p["row"]].lam}
        | {k: v for k, v in results[p["key"]].items() if k != "key"}
        for p in plan
    ]
    summarise(report, rows)
    report.write()


def summarise(report: _shared.Report, rows: list[Row]) -> None:
    """The ablation table: one line per row, the claims' paired differences."""
    import pandas as pd

    from fedgame.analysis.stats import paired_difference, t_interval

    qi, mx, dp, sel, avg = QI_ROW_CELLS
    df = pd.DataFrame(report.rows).sort_values("seed")
    n = report.args.seeds

    def acc(i: int, cell: str) -> list[float]:
        return list(100.0 * df[(df.row == i) & (df.cell == cell)]["accuracy"])

    def col(i: int, cell: str, name: str) -> pd.Series:
        return df[(df.row == i) & (df.cell == cell)][name]

    table = []
    for i, row in enumerate(rows):
        d = {
            pair: paired_difference(acc(i, pair[0]), acc(i, pair[1])).format(2)
            for pair in ((qi, mx), (qi, dp), (avg, dp), (sel, avg))
        }
        selected = col(i, qi, "uploaded").mean()
        clients = col(i, qi, "clients").mean()
        table.append(
            [
                row.label,
                f"{row.lam:g}",
                f"{selected:.0f} of {clients:.0f}",
                f"{100 * col(i, sel, 'data_kept').mean():.0f}",
                f"{100 * col(i, sel, 'class_kept').mean():.0f}",
                f"{col(i, qi, 'rho_mean').mean():.2g}",
                f"{col(i, qi, 'noise_over_clip').mean():.2g}",
                t_interval(acc(i, qi)).format(2),
                d[(qi, mx)],
                d[(qi, dp)],
                d[(avg, dp)],
                d[(sel, avg)],
            ]
        )
    report.table(
        "ablation",
        f"QI-DPFL one change at a time: accuracy % and paired differences in points, "
        f"mean ± 95% CI over {n} seeds",
        [
            "setting",
            "λ",
            "N (QI)",
            "data kept %",
            "rarest class kept %",
            "ρ_i, t=1",
            "‖noise‖/C, t=1",
            f"QI-DPFL acc % (n={n})",
            "QI − Max-select",
            "QI − FedAvg-DP",
            "FedAvg − FedAvg-DP",
            "FedAvg-select − FedAvg",
        ],
        table,
    )


if __name__ == "__main__":
    _shared.main(main)
