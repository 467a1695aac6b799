"""Stragglers x topology x rationality (scenarios/stragglers_topology_learning.yaml).

How do the straggle probability and the client-client topology change the leader's reward
R_t, the delivered Σρ and the accuracy when clients learn their budgets (``policy:
learning``, log-gradient rule) instead of playing the complete-information equilibrium
(``policy: best_response``)? Runs the scenario's sweep (straggle_prob {0, .2, .4} x topology
{complete, watts_strogatz} x policy {best_response, learning}, seeds = replicates) into
``--out``/sweep, and the same straggle x topology grid without DP (no reward, everyone
takes part, no noise) into ``--out``/sweep_nodp as the accuracy reference. ``--quick``:
straggle_prob 0.4 only, 5 rounds, 2 replicates.

Per cell, mean ± 95% t-interval over replicates: R_t at the last round and averaged over
the second half of the rounds, the delivered Σρ averaged over the second half, the final
test accuracy (and the no-DP one), the distance Σ|ρ − ρ*|/Σρ* of the play to the
complete-information equilibrium (second half), and how many runs had a degenerate round
(rounds table ``degenerate``) with the kinds. Paired differences learning − best_response
(same replicate, same data and faults). Figures: the three outcomes against the straggle
probability, and Σρ and accuracy per round.

    python analysis/stragglers_topology_learning.py
    python analysis/stragglers_topology_learning.py --quick
"""

from __future__ import annotations

from typing import Any

import _kept
import _shared

NAME = "stragglers_topology_learning"
DEFAULTS = _shared.Defaults(seeds=5, rounds=40, quick_seeds=2, quick_rounds=5)
P, TOPO, POLICY = "population.straggle_prob", "network.topology.kind", "policy.kind"
KEYS = [P, TOPO, POLICY]
QUICK_GRID = (f"{P}=0.4",)
#: the no-DP reference: no reward, everyone takes part, no clipping or noise
NO_DP = ("privacy={kind: none}", "incentive={kind: none}")
NO_DP_GRID = (f"{POLICY}=always",)


def build_parser() -> Any:
    return _shared.parser(NAME, __doc__ or "", DEFAULTS)


def plan(args: Any, *, extra: tuple[str, ...], grid: tuple[str, ...], folder: str) -> Any:
    """Plan one sweep of the scenario (every run validated; nothing written yet)."""
    from fedgame.run.grid import plan_sweep

    return plan_sweep(
        _shared.ROOT / "scenarios" / f"{NAME}.yaml",
        overrides=[f"rounds={args.rounds}", *extra, *args.overrides],
        grid=(*(QUICK_GRID if args.quick else ()), *grid),
        replicates=args.seeds,
        out=args.out / folder,
    )


def execute(sweep_plan: Any, workers: int) -> Any:
    """Run a planned sweep (warnings silenced: the rounds table records degeneracy)."""
    import warnings

    from fedgame.run.sweep import run_sweep

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        summary = run_sweep(sweep_plan, workers=workers, progress=False)
    if summary.failed:
        raise RuntimeError(f"{len(summary.failed)} sweep runs failed: {summary.failed}")
    _kept.count_sweep(summary)
    return summary.sweep_dir


def per_run(rounds: Any, keys: list[str]) -> Any:
    """One row per run: final and second-half outcomes, degeneracy, equilibrium distance."""
    import numpy as np
    import pandas as pd

    from fedgame.analysis.totals import round_mean

    rows = []
    for run_id, r in rounds.sort_values("round").groupby("run_id", sort=False):
        half = r[r["round"] > r["round"].max() / 2]

        def mean(col: str, frame: Any = half) -> float:  # NaN if a round has no value
            return round_mean(frame[col]).value if col in frame else float("nan")

        reasons = sorted(
            {
                k
                for text in r.get("degenerate_reason", pd.Series(dtype=str))
                for k in str(text).split(";")
                if k
            }
        )
        last = r.iloc[-1]
        rows.append(
            {k: last[k] for k in keys}
            | {
                "replicate": int(last["replicate"]),
                "run_id": run_id,
                "status": last["status"],
                "reward_final": float(last["reward"]) if "reward" in r else np.nan,
                "reward_half": mean("reward"),
                "sum_rho_half": mean("sum_rho"),
                "sum_rho_final": float(last["sum_rho"]) if "sum_rho" in r else np.nan,
                "accuracy": float(last["test_accuracy"]),
                "eq_distance_half": mean("eq_distance"),
                "uploaded_half": mean("uploaded"),
                "degenerate_rounds": int(r["degenerate"].sum()) if "degenerate" in r else 0,
                "degenerate_kinds": " ".join(reasons),
            }
        )
    return pd.DataFrame(rows)


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    from fedgame.analysis import load_sweep

    report = _shared.Report(NAME, args)

    game_plan = plan(args, extra=(), grid=(), folder="sweep")
    nodp_plan = plan(args, extra=NO_DP, grid=NO_DP_GRID, folder="sweep_nodp")
    print(
        f"{NAME}: {len(game_plan.runs)} game runs + {len(nodp_plan.runs)} no-DP runs, "
        f"T={args.rounds}, {args.seeds} replicates",
        flush=True,
    )
    for folder in ("sweep", "sweep_nodp"):
        if _kept.own_folder(args.out / folder, fresh=args.fresh):
            print(f"{NAME}: removed the runs of another code (or --fresh) in {args.out}/{folder}")
    game = load_sweep(execute(game_plan, args.workers))
    nodp = load_sweep(execute(nodp_plan, args.workers))
    runs = per_run(game.rounds, KEYS)
    plain = per_run(nodp.rounds, [P, TOPO])
    summarise(report, runs, plain)
    figures = args.out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    for path in (
        outcome_figure(runs, plain, figures / f"{NAME}_outcomes.png"),
        trajectory_figure(game.rounds, figures / f"{NAME}_rounds.png"),
    ):
        print(f"figure: {path}")
    report.rows = [*runs.to_dict("records"), *plain.assign(**{POLICY: "no DP"}).to_dict("records")]
    report.write()


def summarise(report: _shared.Report, runs: Any, plain: Any) -> None:
    """The cell table, the paired learning − best_response table and the degeneracy count."""
    from fedgame.analysis.stats import paired_difference

    def ci(values: Any, digits: int, scale: float = 1.0) -> str:
        return _shared.interval_cell(values, digits, scale)

    rows = []
    for (p, topo, policy), cell in runs.groupby(KEYS, sort=True):
        ref = plain[(plain[P] == p) & (plain[TOPO] == topo)]
        flagged = int((cell["degenerate_rounds"] > 0).sum())
        kinds = sorted({k for text in cell["degenerate_kinds"] for k in text.split()})
        rows.append(
            [
                f"{p:g}",
                topo,
                policy,
                len(cell),
                ci(cell["reward_final"], 3),
                ci(cell["reward_half"], 3),
                ci(cell["sum_rho_half"], 3),
                ci(cell["accuracy"], 1, 100.0),
                ci(ref["accuracy"], 1, 100.0),
                ci(cell["eq_distance_half"], 3),
                f"{flagged}/{len(cell)}" + (f" ({', '.join(kinds)})" if kinds else ""),
            ]
        )
    report.table(
        "cells",
        "Per cell: mean ± 95% CI over replicates (second half = rounds > T/2)",
        [
            "straggle p",
            "topology",
            "policy",
            "runs",
            "R final",
            "R 2nd half",
            "Σρ delivered 2nd half",
            "accuracy %",
            "no-DP accuracy %",
            "eq. distance 2nd half",
            "runs with degenerate rounds",
        ],
        rows,
    )
    diffs = []
    for (p, topo), cell in runs.groupby([P, TOPO], sort=True):
        arms = {pol: c.sort_values("replicate") for pol, c in cell.groupby(POLICY, sort=False)}
        if set(arms) != {"best_response", "learning"}:
            continue
        learn, best = arms["learning"], arms["best_response"]

        def diff(
            col: str, digits: int, scale: float = 1.0, learn: Any = learn, best: Any = best
        ) -> str:
            d = paired_difference(list(learn[col]), list(best[col]))
            return d.scaled(scale).format(digits)

        diffs.append(
            [
                f"{p:g}",
                topo,
                diff("reward_half", 4),
                diff("sum_rho_half", 3),
                diff("accuracy", 2, 100.0),
            ]
        )
    report.table(
        "learning_minus_best_response",
        "learning − best_response, paired by replicate: mean ± 95% CI",
        ["straggle p", "topology", "Δ R 2nd half", "Δ Σρ 2nd half", "Δ accuracy (pts)"],
        diffs,
    )


def _style(topo: str, policy: str) -> dict[str, Any]:
    colour = {"complete": "tab:blue", "watts_strogatz": "tab:orange"}.get(topo, "tab:green")
    line = {"best_response": "-", "learning": "--", "no DP": ":"}.get(policy, "-.")
    marker = {"best_response": "o", "learning": "s", "no DP": "^"}.get(policy, "x")
    return {"color": colour, "linestyle": line, "marker": marker}


def outcome_figure(runs: Any, plain: Any, path: Any) -> Any:
    """Three panels against the straggle probability: R (2nd half), Σρ (2nd half), accuracy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    from fedgame.analysis.stats import t_interval

    panels = [
        ("reward_half", "leader's reward R_t (mean of 2nd half)", 1.0),
        ("sum_rho_half", "delivered Σρ (mean of 2nd half)", 1.0),
        ("accuracy", "final test accuracy %", 100.0),
    ]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.6))
    frames = [runs, plain.assign(**{POLICY: "no DP"})]
    for ax, (col, title, scale) in zip(axes, panels):
        for frame in frames:
            if col not in frame or frame[col].isna().all():
                continue
            for (topo, policy), part in frame.groupby([TOPO, POLICY], sort=True):
                xs = sorted(part[P].unique())
                stats = [t_interval(scale * part[part[P] == x][col]) for x in xs]
                mean = np.array([s.mean for s in stats])
                half = np.nan_to_num(np.array([s.half_width for s in stats]))
                offset = {"best_response": -0.006, "learning": 0.006}.get(policy, 0.0)
                ax.errorbar(
                    np.array(xs) + offset,
                    mean,
                    yerr=half,
                    capsize=3,
                    label=f"{topo}, {policy}",
                    **_style(topo, policy),
                )
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("straggle probability per client (regional outages on top)")
        ax.grid(alpha=0.3)
    n = runs.groupby(KEYS).size().min()
    title = f"QI-DPFL game under stragglers and regional outages: mean ± 95% CI over {n} replicates"
    return _shared.save_figure(
        fig, path, legend_from=axes[2], ncol=3, rect=(0, 0.1, 1, 0.95), dpi=110, title=title
    )


def trajectory_figure(rounds: Any, path: Any) -> Any:
    """Σρ delivered and test accuracy per round (mean over replicates), one panel per topology
    and quantity; colour = straggle probability, line style = policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    topos = sorted(rounds[TOPO].unique())
    probs = sorted(rounds[P].unique())
    cmap = plt.get_cmap("viridis")
    fig, axes = plt.subplots(2, len(topos), figsize=(6.5 * len(topos), 8), squeeze=False)
    for j, topo in enumerate(topos):
        for i, (col, label) in enumerate(
            (("sum_rho", "delivered Σρ"), ("test_accuracy", "test accuracy"))
        ):
            ax = axes[i, j]
            for k, p in enumerate(probs):
                for policy, style in (("best_response", "-"), ("learning", "--")):
                    at = (rounds[TOPO] == topo) & (rounds[P] == p) & (rounds[POLICY] == policy)
                    sel = rounds[at]
                    if sel.empty or col not in sel:
                        continue
                    curve = sel.groupby("round")[col].mean()
                    ax.plot(
                        curve.index,
                        curve.values,
                        linestyle=style,
                        color=cmap(k / max(1, len(probs) - 1) * 0.85),
                        label=f"p={p:g}, {policy}",
                    )
            ax.set_title(f"{topo}: {label} (mean over replicates)", fontsize=10)
            ax.set_xlabel("round")
            ax.grid(alpha=0.3)
    return _shared.save_figure(
        fig, path, legend_from=axes[0, 0], ncol=len(probs), rect=(0, 0.07, 1, 1), dpi=100
    )


if __name__ == "__main__":
    _shared.main(main)
