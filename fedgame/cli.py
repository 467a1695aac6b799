"""Command line: ``fedgame run | sweep | validate | list | report | dashboard``.

Bad input (a scenario, a ``--set``, a command-line option) prints one line naming the file,
key, value and what is allowed, and exits with code 2 before anything is written. ``run``
and ``sweep`` make every check ``validate`` makes (:mod:`fedgame.scenario.preflight`) before
the first round. Ctrl-C (SIGINT) and SIGTERM stop a run or a sweep with its finished rounds
written, one line on stderr and exit code 130 or 143 (128 + the signal number).
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from fedgame.cli_sweep import add_parsers, cmd_report, cmd_sweep
from fedgame.errors import FedGameError, Interrupted, ScenarioError

EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``fedgame: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        print(f"fedgame: {self.prog}: {message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fedgame", description="Differentially private federated learning as a game."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a scenario file")
    run.add_argument("file")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set privacy.clip=2.0 (repeatable)",
    )
    run.add_argument("--out", help="results folder (default: the scenario's output.dir)")
    run.add_argument("--replicate", type=int, default=0, help="replicate index for the seed plan")
    run.add_argument("--quiet", action="store_true", help="no progress bar, no summary")

    val = sub.add_parser(
        "validate", help="make every check a run makes, short of training, without running"
    )
    val.add_argument("files", nargs="+")
    val.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    val.add_argument("--out", help="results folder to check (default: each scenario's output.dir)")

    lst = sub.add_parser(
        "list", help="list registered components per family and where each comes from"
    )
    lst.add_argument("family", nargs="?", help="only this family")
    lst.add_argument(
        "--scenario", metavar="FILE", help="also load the plug-in modules this scenario lists"
    )
    add_parsers(sub)
    dash = sub.add_parser(
        "dashboard", help="serve a live dashboard of a scenario, or replay a finished run"
    )
    dash.add_argument("target", metavar="SCENARIO", help="a scenario file, or a run folder")
    dash.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    dash.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    dash.add_argument("--host", default="127.0.0.1", help="address to listen on")
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from fedgame.run.single import simulate
    from fedgame.scenario.load import load_scenario
    from fedgame.scenario.preflight import preflight

    scenario = load_scenario(args.file, args.overrides)
    if args.replicate < 0:
        raise ScenarioError("--replicate", args.replicate, "an integer >= 0")
    out, out_key = (args.out, "--out") if args.out else (scenario.output.dir, "output.dir")
    preflight(scenario, out=out, out_key=out_key, file=args.file)
    if args.quiet:
        warnings.simplefilter("ignore")
    try:
        result = simulate(
            scenario, out_dir=Path(out), replicate=args.replicate, progress=not args.quiet
        )
    except Interrupted as stop:
        kept = stop.result.manifest if stop.result is not None else None
        where = f" in {stop.result.run_dir}" if stop.result is not None else ""
        done = (
            f"kept {kept['rounds_completed']} of {kept['rounds_planned']} rounds{where}"
            if kept is not None
            else "before the first round; nothing written"
        )
        print(f"fedgame: run {stop.describe()}; {done}", file=sys.stderr)
        return stop.exit_code
    except ScenarioError as err:
        raise err.with_file(args.file) from None
    if result.manifest["status"] == "diverged":
        print(
            f"fedgame: run stopped: {result.manifest['message']}; kept "
            f"{result.manifest['rounds_completed']} rounds in {result.run_dir}",
            file=sys.stderr,
        )
        return EXIT_DIVERGED
    if not args.quiet:
        last = result.rounds.iloc[-1]
        print(
            f"{scenario.name}: {len(result.rounds)} rounds, test accuracy "
            f"{last['test_accuracy']:.4f}, mean epsilon spent {last['epsilon_spent_mean']:.3f}"
        )
        print(f"results: {result.run_dir}")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    """Load each file and run the preflight checks a run would (nothing is written)."""
    from fedgame.scenario.load import load_scenario
    from fedgame.scenario.preflight import preflight

    failed = 0
    for file in args.files:
        try:
            scenario = load_scenario(file, args.overrides)
            out, key = (args.out, "--out") if args.out else (scenario.output.dir, "output.dir")
            report = preflight(scenario, out=out, out_key=key, file=file)
        except ScenarioError as err:
            print(f"fedgame: {err}", file=sys.stderr)
            failed += 1
        else:
            print(
                f"{file}: ok ({scenario.name}, {scenario.population.clients} clients, "
                f"{scenario.rounds} rounds, {report.device}, memory about "
                f"{report.footprint.describe(top=2)})"
            )
    return EXIT_BAD_INPUT if failed else 0


def cmd_list(args: argparse.Namespace) -> int:
    """Each family's plug-ins: name, origin (built-in, entry point, scenario module), summary."""
    from fedgame import registry

    if args.scenario:
        from fedgame.scenario.load import load_scenario

        load_scenario(args.scenario)  # imports its ``plugins``
    cat = registry.catalogue()
    if args.family and args.family not in cat:
        raise ScenarioError("family", args.family, f"allowed: {', '.join(cat)}")
    for family, entries in cat.items():
        if args.family and family != args.family:
            continue
        print(f"{family}:")
        for e in entries:
            print(f"  {e.name:<20} {e.origin:<9} {e.doc}")
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Serve the dashboard of a scenario file (live) or of a run folder (replay)."""
    from fedgame.analysis.load import single_runs
    from fedgame.run.store import run_folder_problem
    from fedgame.scenario.load import load_scenario
    from fedgame.scenario.preflight import preflight

    target = Path(args.target)
    config: dict[str, Any]
    if target.is_dir():
        if args.overrides:
            raise ScenarioError("--set", args.overrides[0], "only with a scenario file")
        runs = single_runs(target)  # the run load_run would read: the newest single run
        problem = run_folder_problem(runs[-1]) if runs else "no run folder (manifest.json)"
        if problem:
            raise ScenarioError(
                "SCENARIO", args.target, f"a scenario file or a run folder; {problem}"
            )
        config = {"replay": str(runs[-1].resolve())}
    else:
        scenario = load_scenario(target, args.overrides)
        preflight(scenario, file=args.target)
        config = {"scenario": str(target.resolve()), "overrides": list(args.overrides)}
    from fedgame.viz.serve import serve

    serve(config, host=args.host, port=args.port)
    return 0


def _format_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    line: str | None = None,
) -> str:
    """Warnings as one plain line (the user sees fedgame's words, not a source location)."""
    return f"fedgame: warning: {message}\n"


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``fedgame`` console script; returns the exit code."""
    from fedgame.run.interrupts import StopOnSignal

    warnings.formatwarning = _format_warning
    args = _parser().parse_args(argv)
    handlers = {"run": cmd_run, "validate": cmd_validate, "list": cmd_list}
    handlers |= {"dashboard": cmd_dashboard}
    handlers |= {"sweep": cmd_sweep, "report": cmd_report}
    try:
        with StopOnSignal():  # SIGTERM while reading or checking input ends like Ctrl-C
            return handlers[args.command](args)
    except ScenarioError as err:
        print(f"fedgame: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except (FedGameError, OSError) as err:
        print(f"fedgame: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        stop = exc if isinstance(exc, Interrupted) else Interrupted()
        print(f"fedgame: {stop.describe()}", file=sys.stderr)
        return stop.exit_code


if __name__ == "__main__":
    sys.exit(main())
