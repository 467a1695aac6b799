"""Command line: ``fedgame sweep`` and ``fedgame report`` (wired into :mod:`fedgame.cli`).

``fedgame sweep`` exits 0 when every run finished (completed or diverged), 1 when some run
failed (each is printed with its error and recorded in its manifest), 2 on bad input (nothing
is run or written then), 130/143 when stopped by Ctrl-C/SIGTERM (finished runs stay written;
the next call resumes). ``fedgame report`` checks the folder it reads before writing anything.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from typing import Any

from fedgame.errors import Interrupted, ResultsError, ScenarioError, os_problem

EXIT_RUNS_FAILED = 1


def add_parsers(sub: Any) -> None:
    """Add the ``sweep`` and ``report`` sub-commands to ``fedgame``'s parser."""
    sweep = sub.add_parser(
        "sweep",
        help="run a scenario over a grid of keys x replicates",
        description="Run a scenario at every point of a grid of keys (the file's sweep.grid "
        "and --grid) times its replicates, in parallel, under OUT/<name>/sweep-<id>/. Every "
        "run is checked before any starts; a second call resumes, skipping finished runs. "
        "Exit code 1 when some run failed, 2 on bad input, 130/143 when stopped.",
        epilog="examples:\n"
        "  fedgame sweep scenarios/sweep_population_stragglers.yaml\n"
        "  fedgame sweep scenarios/quickstart.yaml --grid privacy.clip=0.5,1,2 --replicates 3\n"
        "  fedgame sweep scenarios/quickstart.yaml --executor ray --address auto\n"
        "  fedgame sweep scenarios/sweep_population_stragglers.yaml --executor batched",
    )
    sweep.add_argument("file", metavar="SCENARIO", help="scenario file (.yaml, .yml or .toml)")
    sweep.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help="sweep a dotted key over values, e.g. --grid population.clients=20,50 (repeatable; "
        "adds to or replaces the file's sweep.grid)",
    )
    sweep.add_argument(
        "--replicates", type=int, help="replicates per grid point (default: sweep.replicates)"
    )
    sweep.add_argument(
        "--executor",
        default="local",
        help="where runs execute: local (a process pool), batched (a process pool, each "
        "worker stepping a batch of runs in lockstep and training their clients together), "
        "ray, or serial (in this process)",
    )
    sweep.add_argument("--workers", type=int, help="processes / Ray CPUs (default: all cores)")
    sweep.add_argument("--address", help="Ray cluster address (host:port, ray://..., auto)")
    sweep.add_argument("--out", help="results folder (default: the scenario's output.dir)")
    sweep.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    sweep.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key at every grid point, e.g. --set rounds=10 (repeatable)",
    )

    report = sub.add_parser(
        "report",
        help="write a Markdown report for a run or a sweep",
        description="Write report.md and its figures (PNG) for a run folder, or for a sweep "
        "folder (one summary row and one line per grid point), into OUT.",
        epilog="examples:\n"
        "  fedgame report results/quickstart\n"
        "  fedgame report results/sweep_population_stragglers/sweep-1a2b3c --target 0.85",
    )
    report.add_argument(
        "result_dir", metavar="RESULT_DIR", help="a run folder or a sweep folder (sweep-<id>)"
    )
    report.add_argument("--out", help="report folder (default: RESULT_DIR/report)")
    report.add_argument(
        "--target",
        type=float,
        default=0.8,
        help="test accuracy whose first round the report gives (rounds_to_target)",
    )


def cmd_sweep(args: argparse.Namespace) -> int:
    from fedgame.run.grid import plan_sweep
    from fedgame.run.sweep import run_sweep

    plan = plan_sweep(
        args.file,
        overrides=args.overrides,
        grid=args.grid,
        replicates=args.replicates,
        out=args.out,
    )
    for line in plan.idle:
        print(f"fedgame: warning: {line}", file=sys.stderr)
    if args.quiet:
        warnings.simplefilter("ignore")
    try:
        summary = run_sweep(
            plan,
            executor=args.executor,
            workers=args.workers,
            address=args.address,
            progress=not args.quiet,
        )
    except Interrupted as stop:
        done = f"; {stop.result.line()}" if stop.result is not None else ""
        print(f"fedgame: sweep {stop.describe()}{done}; rerun to resume", file=sys.stderr)
        return stop.exit_code
    except ScenarioError as err:
        raise err.with_file(args.file) from None
    for run_id, problem in summary.repaired.items():
        print(
            f"fedgame: warning: run {run_id} was damaged ({problem}); ran it again", file=sys.stderr
        )
    for run_id, error in summary.failed.items():
        print(f"fedgame: run {run_id} failed: {error}", file=sys.stderr)
    degenerate = summary.degenerate_line()
    if degenerate is not None:  # also under --quiet, as for a single run
        print(f"fedgame: warning: {degenerate}", file=sys.stderr)
    if not args.quiet:
        print(f"{plan.name}: {summary.line()}")
        print(f"results: {summary.sweep_dir}")
    return EXIT_RUNS_FAILED if summary.failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    """Check the target, the folder read and the folder written, then write the report; an OS
    error while reading or writing is one line naming the path (exit code 2)."""
    from fedgame.analysis.report import write_report
    from fedgame.run.store import result_dir_problem
    from fedgame.scenario.preflight import check_output, check_results_tree

    if not 0.0 <= args.target <= 1.0:  # NaN fails both comparisons
        raise ScenarioError("--target", args.target, "a test accuracy in [0, 1]")
    problem = result_dir_problem(args.result_dir)
    if problem is not None:
        raise ScenarioError(
            "RESULT_DIR", args.result_dir, f"a readable run or sweep folder; {problem}"
        )
    if args.out:
        check_output(args.out, key="--out", value=args.out)
    else:
        check_results_tree(args.result_dir, "report", key="RESULT_DIR", value=args.result_dir)
    try:
        path = write_report(args.result_dir, out=args.out, target=args.target)
    except OSError as exc:
        where = exc.filename or args.out or args.result_dir
        raise ResultsError(where, f"cannot be read or written ({os_problem(exc)})") from None
    print(f"report: {path}")
    return 0
