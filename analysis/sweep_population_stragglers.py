"""Equilibrium vs population size and straggler rate (scenarios/sweep_population_stragglers.yaml).

Runs the scenario's sweep (clients {20, 50, 100, 200} x straggle_prob {0, .1, .2, .4}, seeds
= replicates; ``--quick``: a 2 x 2 grid) into ``--out``/sweep, or reads a finished sweep
folder given as RESULTS, then prints the equilibrium table (means over each run's converged
stretch, 95% CI over replicates; empty where runs never converge) and how each quantity's
late-round mean responds to the population size, and writes the heatmaps of final accuracy
and late-round Σρ over the grid to ``--out``/figures.

    python analysis/sweep_population_stragglers.py
    python analysis/sweep_population_stragglers.py results/sweep_population_stragglers
"""

from __future__ import annotations

from typing import Any

import _kept
import _shared

NAME = "sweep_population_stragglers"
DEFAULTS = _shared.Defaults(seeds=3, rounds=20, quick_seeds=2, quick_rounds=3)
X, Y = "population.clients", "population.straggle_prob"
QUICK_GRID = (f"{X}=20,50", f"{Y}=0.0,0.2")


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS)
    p.add_argument("results", nargs="?", help="a finished sweep folder to read instead")
    return p


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    import warnings

    import pandas as pd

    from fedgame.analysis import load_sweep
    from fedgame.analysis.equilibrium import equilibrium_table, response
    from fedgame.analysis.figures import heatmap
    from fedgame.analysis.summary import summarise

    report = _shared.Report(NAME, args)
    if args.results:
        folder = args.results
    else:
        from fedgame.run.grid import plan_sweep
        from fedgame.run.sweep import run_sweep

        plan = plan_sweep(
            _shared.ROOT / "scenarios" / f"{NAME}.yaml",
            overrides=[f"rounds={args.rounds}", *args.overrides],
            grid=QUICK_GRID if args.quick else (),
            replicates=args.seeds,
            out=args.out / "sweep",
        )
        if _kept.own_folder(args.out / "sweep", fresh=args.fresh):
            print(f"{NAME}: removed the runs of another code (or --fresh) in {args.out}/sweep")
        warnings.simplefilter("ignore")
        summary = run_sweep(plan, workers=args.workers, progress=False)
        if summary.failed:
            raise RuntimeError(f"{len(summary.failed)} sweep runs failed: {summary.failed}")
        _kept.count_sweep(summary)
        folder = summary.sweep_dir
    sweep = load_sweep(folder)
    eq = equilibrium_table(sweep.rounds, by=[X, Y])
    eq["runs behind the values"] = eq["reward_n"] if "reward_n" in eq else eq["n"]
    cols = [X, Y, "n", "converged", "runs behind the values", "converged_round", "trend"]
    cols += ["reward", "sum_rho", "participation", "welfare", "server_cost", "client_surplus"]
    cols += ["nash_gap_max", "final_accuracy"]
    shown = eq[[c for c in cols if c in eq]]
    report.table(
        "equilibrium",
        "Equilibrium (mean over the converged rounds)",
        list(shown.columns),
        shown.round(4).itertuples(index=False),
    )
    # QI-DPFL's reward grows every round: runs converge around that trend where the best
    # responders play the equilibrium (no stragglers), not where they ignore stragglers, so
    # the converged-stretch means above are empty for half the grid: responses and the Σρ
    # map use each run's last 5 rounds.
    late = late_round_means(sweep.rounds, by=[X, Y])
    resp = response(late, x=X)
    report.table(
        "response",
        f"Response to {X} (means of each run's last 5 rounds)",
        list(resp.columns),
        resp.round(4).itertuples(index=False),
    )
    figures = args.out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    table = summarise(sweep, clients=False)
    for value, frame in (("final_accuracy", table), ("sum_rho", late)):
        path = heatmap(frame, x=X, y=Y, value=value, path=figures / f"{NAME}_{value}.png")
        print(f"figure: {path}")
    report.rows = pd.DataFrame(sweep.rounds).to_dict("records")
    report.write()


def late_round_means(rounds: Any, *, by: list[str]) -> Any:
    """Per grid cell: ``n`` runs, and the mean and 95% t-interval over runs of each run's
    last-5-round mean (no convergence test)."""
    from fedgame.analysis.equilibrium import tail_means
    from fedgame.analysis.summary import aggregate

    per_run = tail_means(rounds)
    keys = rounds[["run_id", *by]].drop_duplicates("run_id")
    return aggregate(per_run.merge(keys, on="run_id"), by=by)


if __name__ == "__main__":
    _shared.main(main)
