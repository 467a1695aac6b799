"""QI-DPFL (paper 003) with learning and mixed populations, where DP noise costs accuracy.

Scenario: scenarios/qi_dpfl_populations.yaml (digits, 20 clients, Dirichlet α = 1, EMD
selection of the 75 % most typical clients, Theorem-2 reward, zCDP Gaussian noise σ_i² =
2C²/(ρ_i|D_i|²), logistic regression, 30 rounds). At each λ of ``--lam`` (the server-cost
weight: R_t* ∝ 1/λ, so larger λ means smaller budgets ρ and more noise) the same game is
played by five populations: everyone best-responding (Theorem 1), everyone learning with the
log-gradient rule, everyone learning with Hedge over a budget grid, a mix of 60 %
best-responding and 40 % log-gradient learners (``population.behaviours``), and, as the
reference, FedAvg over the same selection without DP (no reward, no noise).

The default λ ∈ {0.1, 0.3} was chosen from a pilot so that DP visibly lowers the accuracy
(at λ = 0.01 every DP cell is within a point of no DP). Per cell, mean ± 95% t-interval over
seeds: final accuracy, its paired difference to no DP and to best_response, R_t and the
delivered Σρ averaged over the second half of the rounds, the payments and Eq. 15's server
cost summed over the rounds, the distance of the play to the complete-information equilibrium
(second half), and how many runs had a degenerate round. Figure: accuracy and Σρ per round.

    python analysis/qi_dpfl_populations.py
    python analysis/qi_dpfl_populations.py --lam 0.01,0.1,0.3 --seeds 5
"""

from __future__ import annotations

from typing import Any

import _shared

NAME = "qi_dpfl_populations"
DEFAULTS = _shared.Defaults(seeds=10, rounds=30, quick_seeds=2, quick_rounds=5)
LAMS = "0.1,0.3"
NO_DP = "no DP (FedAvg-select)"
MIXED = "mixed 60% best_response / 40% learning"
#: cell -> its population: a policy for everyone, or behaviours with shares
CELLS: dict[str, dict[str, Any]] = {
    "best_response": {"policy": {"kind": "best_response"}},
    "learning (log_gradient)": {"policy": {"kind": "learning"}},
    "learning (hedge)": {"policy": {"kind": "learning", "rule": "hedge"}},
    MIXED: {
        "behaviours": [
            {"kind": "best_response", "share": 0.6},
            {"kind": "learning", "share": 0.4},
        ]
    },
    NO_DP: {"policy": {"kind": "always"}},
}
BEST = "best_response"


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="digits")
    p.add_argument("--lam", default=LAMS, help=f"comma-separated λ grid (default {LAMS})")
    return p


def base_scenario(args: Any) -> dict[str, Any]:
    """The scenario file with ``--dataset`` and ``--rounds`` set."""
    import yaml

    d = yaml.safe_load((_shared.ROOT / "scenarios" / f"{NAME}.yaml").read_text())
    d["data"]["dataset"] = _shared.dataset_spec(args, max_train=6000, max_test=2000)
    d["rounds"] = args.rounds
    return d


def cell_scenario(base: dict[str, Any], cell: str, lam: float | None, seed: int) -> dict:
    """The run of ``cell`` at ``lam`` (``None`` for no DP) with scenario seed ``seed``."""
    population = {k: v for k, v in base["population"].items() if k != "behaviours"}
    d = {**base, "seed": seed}
    spec = CELLS[cell]
    if "behaviours" in spec:
        population["behaviours"] = spec["behaviours"]
        d.pop("policy", None)
    else:
        d["policy"] = spec["policy"]
    d["population"] = population
    if cell == NO_DP:
        d["incentive"] = {"kind": "none"}
        d["privacy"] = {"kind": "none"}
    else:
        d["incentive"] = {**base["incentive"], "lam": lam}
    return d


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Final and second-half outcomes of one (λ, cell, seed) run, and its per-round curves."""
    import numpy as np

    result = _shared.simulate(job["scenario"])
    r = result.rounds.sort_values("round")
    half = r[r["round"] > r["round"].max() / 2]

    from fedgame.analysis.totals import round_mean, round_total

    def mean(col: str) -> float:  # refused (NaN) when a round of the half has no value
        return round_mean(half[col]).value if col in half else float("nan")

    def total(col: str) -> float:  # refused (NaN) when a round has no value
        return round_total(r[col]).value if col in r else float("nan")

    kinds = sorted({k for text in r["degenerate_reason"] for k in str(text).split(";") if k})
    summary = {k: job[k] for k in ("lam", "cell", "seed")} | {
        "accuracy": float(r["test_accuracy"].iloc[-1]),
        "reward_half": mean("reward"),
        "sum_rho_half": mean("sum_rho"),
        "payments": total("payments_total"),
        "server_cost": total("server_cost"),
        "eq_distance_half": mean("eq_distance"),
        "degenerate_rounds": int(r["degenerate"].sum()),
        "degenerate_kinds": " ".join(kinds),
        "status": result.manifest["status"],
    }
    curves = {  # as lists (JSON, kept under --out); main makes them arrays again
        "round": r["round"].to_numpy().tolist(),
        "accuracy": r["test_accuracy"].to_numpy().tolist(),
        "sum_rho": (
            r["sum_rho"].to_numpy() if "sum_rho" in r else np.full(len(r), np.nan)
        ).tolist(),
    }
    return {"summary": summary, "curves": curves}


def main() -> None:
    import numpy as np

    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    report = _shared.Report(NAME, args)
    lams = [float(x) for x in args.lam.split(",")]
    base = base_scenario(args)
    jobs = [
        {"lam": lam, "cell": cell, "seed": seed}
        for lam in lams
        for cell in CELLS
        if cell != NO_DP
        for seed in range(args.seeds)
    ]
    jobs += [{"lam": None, "cell": NO_DP, "seed": s} for s in range(args.seeds)]
    for job in jobs:
        job["scenario"] = _shared.apply_sets(
            cell_scenario(base, job["cell"], job["lam"], job["seed"]), args.overrides
        )
    _shared.validate_all(j["scenario"] for j in jobs)
    print(
        f"{NAME}: data={base['data']['dataset']} T={args.rounds} λ={lams} "
        f"seeds={args.seeds}: {len(jobs)} runs",
        flush=True,
    )
    results = _shared.run_kept(run_one, jobs, args.out, args.workers, fresh=args.fresh)
    for result, job in zip(results, jobs):  # jobs that share a scenario share its run
        result["summary"] |= {k: job[k] for k in ("lam", "cell", "seed")}
        result["curves"] = {k: np.asarray(v) for k, v in result["curves"].items()}
    report.rows = [r["summary"] for r in results]
    summarise(report, lams)
    figures = args.out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    path = figure(results, lams, figures / f"{NAME}.png")
    print(f"figure: {path}")
    report.write()


def summarise(report: _shared.Report, lams: list[float]) -> None:
    """One table per λ: every cell beside the no-DP reference."""
    import pandas as pd

    from fedgame.analysis.stats import paired_difference

    df = pd.DataFrame(report.rows).sort_values("seed")
    plain = df[df.cell == NO_DP]

    def ci(values: Any, digits: int, scale: float = 1.0) -> str:
        return _shared.interval_cell(values, digits, scale)

    for lam in lams:
        at = df[df.lam == lam]
        best = at[at.cell == BEST]
        rows = []
        for cell in CELLS:
            sel = plain if cell == NO_DP else at[at.cell == cell]
            flagged = int((sel["degenerate_rounds"] > 0).sum())
            kinds = sorted({k for text in sel["degenerate_kinds"] for k in str(text).split()})
            vs_plain = paired_difference(list(sel.accuracy), list(plain.accuracy)).scaled(100)
            vs_best = paired_difference(list(sel.accuracy), list(best.accuracy)).scaled(100)
            rows.append(
                [
                    cell,
                    ci(sel.accuracy, 2, 100.0),
                    "–" if cell == NO_DP else vs_plain.format(2),
                    "–" if cell in (NO_DP, BEST) else vs_best.format(2),
                    ci(sel.reward_half, 3),
                    ci(sel.sum_rho_half, 3),
                    ci(sel.payments, 2),
                    ci(sel.server_cost, 3),
                    ci(sel.eq_distance_half, 3),
                    f"{flagged}/{len(sel)}" + (f" ({', '.join(kinds)})" if kinds else ""),
                ]
            )
        report.table(
            f"lam_{lam:g}",
            f"λ = {lam:g}: mean ± 95% CI over seeds (differences paired by seed)",
            [
                "population",
                "accuracy %",
                "− no DP (pts)",
                "− best_response (pts)",
                "R 2nd half",
                "Σρ delivered 2nd half",
                "payments",
                "server cost",
                "eq. distance 2nd half",
                "runs with degenerate rounds",
            ],
            rows,
        )


def figure(results: list[dict[str, Any]], lams: list[float], path: Any) -> Any:
    """Accuracy (top) and delivered Σρ (bottom) per round, one column per λ; mean ± 95% CI."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from fedgame.analysis.stats import t_interval

    colours = dict(zip(CELLS, ("tab:blue", "tab:orange", "tab:green", "tab:purple", "black")))
    fig, axes = plt.subplots(2, len(lams), figsize=(6.5 * len(lams), 8), squeeze=False)
    for j, lam in enumerate(lams):
        for cell in CELLS:
            runs = [
                r["curves"]
                for r in results
                if r["summary"]["cell"] == cell and (cell == NO_DP or r["summary"]["lam"] == lam)
            ]
            if not runs:
                continue
            x = runs[0]["round"]
            for i, col in enumerate(("accuracy", "sum_rho")):
                values = np.vstack([c[col] for c in runs])
                if np.isnan(values).all():
                    continue
                stats = [t_interval(values[:, t]) for t in range(values.shape[1])]
                mean = np.array([s.mean for s in stats])
                half = np.nan_to_num(np.array([s.half_width for s in stats]))
                ax = axes[i, j]
                style = ":" if cell == NO_DP else "-"
                ax.plot(x, mean, style, color=colours[cell], label=cell)
                ax.fill_between(x, mean - half, mean + half, color=colours[cell], alpha=0.15)
        axes[0, j].set_title(f"λ = {lam:g}: test accuracy", fontsize=10)
        axes[1, j].set_title(f"λ = {lam:g}: delivered Σρ (zCDP, per round)", fontsize=10)
        for ax in axes[:, j]:
            ax.set_xlabel("round")
            ax.grid(alpha=0.3)
    n = len({r["summary"]["seed"] for r in results})
    title = f"QI-DPFL populations: mean ± 95% CI over {n} seeds"
    return _shared.save_figure(
        fig, path, legend_from=axes[0, 0], ncol=3, rect=(0, 0.07, 1, 0.96), dpi=100, title=title
    )


if __name__ == "__main__":
    _shared.main(main)
