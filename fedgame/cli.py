"""Command line: ``fedgame run | sweep | validate | list | report``.

Bad input prints one line naming the file, key, value and what is allowed, and exits with
code 2 before anything is written.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path

from fedgame.cli_sweep import add_parsers, cmd_report, cmd_sweep
from fedgame.errors import FedGameError, ScenarioError

EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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

    val = sub.add_parser("validate", help="check scenario files without running them")
    val.add_argument("files", nargs="+")
    val.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")

    lst = sub.add_parser("list", help="list registered components per family")
    lst.add_argument("family", nargs="?", help="only this family")
    add_parsers(sub)
    return parser


def cmd_run(args: argparse.Namespace) -> int:
    from fedgame.run.single import simulate
    from fedgame.scenario.load import load_scenario

    scenario = load_scenario(args.file, args.overrides)
    out = Path(args.out) if args.out else Path(scenario.output.dir)
    if args.quiet:
        warnings.simplefilter("ignore")
    result = simulate(scenario, out_dir=out, replicate=args.replicate, progress=not args.quiet)
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
    from fedgame.scenario.load import load_scenario

    failed = 0
    for file in args.files:
        try:
            scenario = load_scenario(file, args.overrides)
        except ScenarioError as err:
            print(f"fedgame: {err}", file=sys.stderr)
            failed += 1
        else:
            print(
                f"{file}: ok ({scenario.name}, {scenario.population.clients} clients, "
                f"{scenario.rounds} rounds)"
            )
    return EXIT_BAD_INPUT if failed else 0


def cmd_list(args: argparse.Namespace) -> int:
    from fedgame import registry

    cat = registry.catalogue()
    if args.family and args.family not in cat:
        raise ScenarioError("family", args.family, f"allowed: {', '.join(cat)}")
    for family, entries in cat.items():
        if args.family and family != args.family:
            continue
        print(f"{family}:")
        for e in entries:
            print(f"  {e.name:<20} {e.doc}")
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
    warnings.formatwarning = _format_warning
    args = _parser().parse_args(argv)
    handlers = {"run": cmd_run, "validate": cmd_validate, "list": cmd_list}
    handlers |= {"sweep": cmd_sweep, "report": cmd_report}
    try:
        return handlers[args.command](args)
    except ScenarioError as err:
        print(f"fedgame: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except FedGameError as err:
        print(f"fedgame: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
