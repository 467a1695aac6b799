"""Command line: ``fedgame run | sweep | validate | list | explain | report | dashboard |
scenarios``.

Bad input (a scenario, a ``--set``, a command-line option) prints one line naming the file,
key, value and what is allowed, and exits with code 2 before anything is written. ``run``
and ``sweep`` make every check ``validate`` makes (:mod:`fedgame.scenario.preflight`) before
the first round. Ctrl-C (SIGINT) and SIGTERM stop a run or a sweep with its finished rounds
written, one line on stderr and exit code 130 or 143 (128 + the signal number). A run with
degenerate rounds ends with one ``fedgame: warning: degenerate play ...`` line on stderr (also
under ``--quiet``); one that the scenario stops on degeneracy (``game.stop_on_degenerate``)
exits with code 4.

``--help``, ``validate``, ``list`` and ``explain`` import no torch, scipy, pandas or Mesa (the
plug-in modules import those where they compute), so they answer in well under a second.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from fedgame import __version__
from fedgame.cli_scenarios import add_parsers as add_scenarios_parser
from fedgame.cli_scenarios import cmd_scenarios, explain_scenario
from fedgame.cli_sweep import add_parsers, cmd_report, cmd_sweep
from fedgame.errors import FedGameError, Interrupted, ResultsError, ScenarioError
from fedgame.trust import trusting

EXIT_BAD_INPUT = 2
EXIT_DIVERGED = 3
EXIT_DEGENERATE = 4
EXIT_PRIVACY_VIOLATION = 5
EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE, what `ls | head` reports for a reader that left early


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (``fedgame: run: ...``) and exit code 2."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("fedgame").strip()  # "run" (the prog is "fedgame run")
        where = f"{command}: " if command else ""
        print(f"fedgame: {where}{message} (see {self.prog} --help)", file=sys.stderr)
        raise SystemExit(EXIT_BAD_INPUT)


class _HelpFormatter(argparse.HelpFormatter):
    """Help that wraps prose, keeps indented example lines as written, and shows defaults."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        return "\n".join(
            indent + line
            if not line or line.startswith(" ")
            else textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
            for line in text.splitlines()
        )

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        shown = action.default not in (None, False, [], argparse.SUPPRESS)
        if shown and action.option_strings and "default" not in text:
            text += " (default: %(default)s)"
        return text


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fedgame",
        description="Differentially private federated learning as a game: Mesa agents (a "
        "server and strategic clients) decide rewards, privacy and participation each round; "
        "one batched PyTorch learner trains the selected clients. Every mechanism is a plug-in "
        "chosen by name in a YAML or TOML scenario file.",
        epilog="examples:\n"
        "  fedgame validate scenarios/quickstart.yaml\n"
        "  fedgame run scenarios/quickstart.yaml --set privacy.clip=2.0\n"
        "  fedgame list privacy --verbose\n"
        "  fedgame explain privacy gaussian\n"
        "  fedgame explain scenario population\n"
        "  fedgame scenarios --copy my_study quickstart\n"
        "\nfedgame COMMAND --help describes each command.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fedgame {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a scenario file",
        description="Check a scenario (everything validate checks), run it, and write its "
        "tables (Parquet) and manifest under OUT/<name>/<run id>/. Exit code 3 when training "
        "diverged, 4 when it stopped on degenerate play, 5 when the model's own privacy check "
        "found a client past its (epsilon, delta) (the finished rounds are kept in each case), "
        "130/143 when stopped by Ctrl-C/SIGTERM.",
        epilog="examples:\n"
        "  fedgame run scenarios/quickstart.yaml\n"
        "  fedgame run scenarios/quickstart.yaml --set rounds=5 --set population.clients=20\n"
        "  fedgame run scenarios/lightdp.yaml --replicate 2 --out results/ --quiet",
    )
    run.add_argument("file", metavar="SCENARIO", help="scenario file (.yaml, .yml or .toml)")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key, e.g. --set privacy.clip=2.0 (repeatable)",
    )
    run.add_argument("--out", help="results folder (default: the scenario's output.dir)")
    run.add_argument(
        "--replicate",
        type=int,
        default=0,
        help="replicate index: an independent seed stream of the scenario's seed",
    )
    run.add_argument("--quiet", action="store_true", help="no progress bar, no summary")

    val = sub.add_parser(
        "validate",
        help="make every check a run makes, short of training, without running",
        description="Make every check a run makes before its first round (keys and values, "
        "plug-in parameters, dataset files, the model against the data's shape, device, "
        "memory estimate, output folder), without training or writing anything. Prints one "
        "line per file; exit code 2 when any file fails.",
        epilog="examples:\n"
        "  fedgame validate scenarios/*.yaml\n"
        "  fedgame validate scenarios/quickstart.yaml --set population.clients=100000",
    )
    val.add_argument("files", nargs="+", metavar="SCENARIO", help="scenario files to check")
    val.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key in every file, e.g. --set rounds=5 (repeatable)",
    )
    val.add_argument("--out", help="results folder to check (default: each scenario's output.dir)")

    lst = sub.add_parser(
        "list",
        help="list the plug-ins of each family",
        description="List the registered plug-ins (mechanisms, datasets, models, ...) by "
        "family, each with the first sentence of its description; --verbose adds each "
        "plug-in's parameters with type, default and description.",
        epilog="examples:\n"
        "  fedgame list\n"
        "  fedgame list selection\n"
        "  fedgame list privacy --verbose\n"
        "  fedgame list selection --scenario my_study.yaml",
    )
    lst.add_argument("family", nargs="?", metavar="FAMILY", help="only this family")
    lst.add_argument(
        "--scenario", metavar="FILE", help="also load the plug-in modules this scenario lists"
    )
    lst.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show each plug-in's full description and parameters",
    )

    explain = sub.add_parser(
        "explain",
        help="describe one plug-in and its parameters, or the scenario's keys",
        description="Describe one plug-in: what it does, and each parameter a scenario may "
        "set for it (type, default, description). Set them beside its kind, e.g. "
        "privacy: {kind: gaussian, clip: 2.0}. 'fedgame explain scenario [KEY]' describes "
        "the scenario's own keys (name, rounds, population.*, training.*, game.*, output.*, "
        "sweep.*, ...) with type, default and meaning: every key, or those at and under KEY.",
        epilog="examples:\n"
        "  fedgame explain privacy gaussian\n"
        "  fedgame explain faults deadline\n"
        "  fedgame explain scenario\n"
        "  fedgame explain scenario population.assign",
    )
    explain.add_argument(
        "family",
        metavar="FAMILY",
        help="plug-in family (see fedgame list), or scenario for the scenario's keys",
    )
    explain.add_argument(
        "name",
        nargs="?",
        metavar="NAME",
        help="plug-in name within the family; after scenario, a dotted KEY (optional)",
    )
    add_parsers(sub)
    add_scenarios_parser(sub)
    dash = sub.add_parser(
        "dashboard",
        help="serve a live dashboard of a scenario, or replay a finished run",
        description="Serve a Mesa SolaraViz page in the browser: the client network coloured "
        "by state, live curves, the round's clients, sliders for the main knobs and "
        "step / play / reset. Given a run folder, replay its newest single run read-only.",
        epilog="examples:\n"
        "  fedgame dashboard scenarios/quickstart.yaml\n"
        "  fedgame dashboard scenarios/quickstart.yaml --set population.clients=30 --port 8800\n"
        "  fedgame dashboard results/quickstart",
    )
    dash.add_argument("target", metavar="SCENARIO", help="a scenario file, or a run folder")
    dash.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a scenario key of a live dashboard, e.g. --set population.clients=30 "
        "(repeatable)",
    )
    dash.add_argument("--port", type=int, default=8765, help="port (0: any free port)")
    dash.add_argument("--host", default="127.0.0.1", help="address to listen on")
    for name in TRUSTING_COMMANDS:
        add_trust_flag(sub.choices[name])
    for command in sub.choices.values():
        command.formatter_class = _HelpFormatter
    return parser


#: the commands that read scenarios, and so may import the plug-in modules they list
TRUSTING_COMMANDS = ("run", "validate", "list", "sweep", "dashboard")


def add_trust_flag(command: argparse.ArgumentParser) -> None:
    command.add_argument(
        "--trust-plugins",
        action="store_true",
        help="import the modules the scenario lists under plugins: they are code and run "
        "with your rights, so read them first (also: FEDGAME_TRUST_PLUGINS=1)",
    )


def cmd_run(args: argparse.Namespace) -> int:
    from fedgame.run.single import simulate
    from fedgame.scenario.load import load_scenario
    from fedgame.scenario.preflight import preflight

    scenario = load_scenario(args.file, args.overrides)
    if args.replicate < 0:
        raise ScenarioError("--replicate", args.replicate, "an integer >= 0")
    out, out_key = (args.out, "--out") if args.out else (scenario.output.dir, "output.dir")
    checked = preflight(scenario, out=out, out_key=out_key, file=args.file)
    _print_warnings(checked.warnings(args.file))
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
    warned = result.manifest.get("warnings") or {}
    if warned:
        print(f"fedgame: warning: {_degenerate_line(result.manifest)}", file=sys.stderr)
    if result.manifest["status"] == "degenerate":
        print(
            f"fedgame: run stopped on degenerate play ({result.manifest['message']}); kept "
            f"{result.manifest['rounds_completed']} rounds in {result.run_dir}",
            file=sys.stderr,
        )
        return EXIT_DEGENERATE
    if result.manifest["status"] == "privacy_violation":
        print(
            f"fedgame: run stopped: {result.manifest['message']}; kept "
            f"{result.manifest['rounds_completed']} rounds in {result.run_dir}",
            file=sys.stderr,
        )
        return EXIT_PRIVACY_VIOLATION
    if result.manifest["status"] == "diverged":
        print(
            f"fedgame: run stopped: {result.manifest['message']}; kept "
            f"{result.manifest['rounds_completed']} rounds in {result.run_dir}",
            file=sys.stderr,
        )
        return EXIT_DIVERGED
    if not args.quiet:
        last = result.rounds.iloc[-1]
        accuracy = f"{last['test_accuracy']:.4f}"
        if "server" in result.rounds:  # competing servers: one accuracy each
            final = result.rounds[result.rounds["round"] == last["round"]]
            accuracy = ", ".join(f"{r.server} {r.test_accuracy:.4f}" for r in final.itertuples())
        print(
            f"{scenario.name}: {result.manifest['rounds_completed']} rounds, test accuracy "
            f"{accuracy}, mean epsilon spent {last['epsilon_spent_mean']:.3f}"
        )
        print(f"clients table: {result.manifest['clients_table_rule']}")
        print(f"results: {result.run_dir}")
    return 0


def _degenerate_line(manifest: dict) -> str:
    """``degenerate play in 6 of 30 rounds: lone_player from round 25, ... (manifest warnings)``."""
    warned = manifest["warnings"]
    kinds = ", ".join(f"{k} from round {v['first_round']}" for k, v in warned.items())
    return (
        f"degenerate play in {manifest['degenerate_rounds']} of {manifest['rounds_completed']} "
        f"rounds: {kinds} (see 'warnings' in manifest.json)"
    )


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
            _print_warnings(report.warnings(file))
            print(
                f"{file}: ok ({scenario.name}, {scenario.population.clients} clients, "
                f"{scenario.rounds} rounds, {report.device}, memory about "
                f"{report.footprint.describe(top=2)})"
            )
    return EXIT_BAD_INPUT if failed else 0


def cmd_list(args: argparse.Namespace) -> int:
    """Each family's plug-ins: name, origin (built-in, entry point, scenario module), summary."""
    import fedgame.registry as registry
    from fedgame import plugin_help

    if args.scenario:
        from fedgame.scenario.load import load_scenario

        load_scenario(args.scenario)  # imports its ``plugins``
    cat = registry.catalogue()
    if args.family:
        plugin_help.check_choice("FAMILY", args.family, list(cat), "allowed plug-in families")
    for family, entries in cat.items():
        if args.family and family != args.family:
            continue
        print(f"{family}:")
        for e in entries:
            if args.verbose:
                print(plugin_help.describe(family, e.name, e.cls, e.config), end="\n\n")
            else:
                print(plugin_help.listing_line(e.name, e.cls, e.origin))
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    """Print one plug-in's description and parameters, or the scenario's keys."""
    import fedgame.registry as registry
    from fedgame import plugin_help

    if args.family == "scenario":
        return explain_scenario(args.name)
    cat = registry.catalogue()
    plugin_help.check_choice(
        "FAMILY", args.family, ["scenario", *cat], "scenario or a plug-in family"
    )
    names = [e.name for e in cat[args.family]]
    if args.name is None:
        raise ScenarioError("NAME", ..., f"is required: one of the {args.family} plug-ins: "
                            f"{', '.join(names)}")  # fmt: skip
    plugin_help.check_choice("NAME", args.name, names, f"allowed {args.family} plug-ins")
    e = registry.entry(args.family, args.name)
    print(plugin_help.describe(args.family, e.name, e.cls, e.config))
    return 0


def cmd_dashboard(args: argparse.Namespace) -> int:
    """Serve the dashboard of a scenario file (live) or of a run folder (replay)."""
    from fedgame.scenario.load import load_scenario
    from fedgame.scenario.preflight import preflight

    target = Path(args.target)
    config: dict[str, Any]
    if target.is_dir():
        from fedgame.analysis.load import find_runs, single_runs  # (1-4 s to import)
        from fedgame.run.store import run_folder_problem

        if args.overrides:
            raise ScenarioError("--set", args.overrides[0], "only with a scenario file")
        # the run load_run would read (the newest single run), else the newest run of a sweep
        runs = single_runs(target) or find_runs(target)
        problem = run_folder_problem(runs[-1]) if runs else "no run folder (manifest.json)"
        if problem:
            raise ScenarioError(
                "SCENARIO", args.target, f"a scenario file or a run folder; {problem}"
            )
        config = {"replay": str(runs[-1].resolve())}
    else:
        scenario = load_scenario(target, args.overrides)
        checked = preflight(scenario, file=args.target)
        _print_warnings(checked.warnings(args.target))
        from fedgame.run.threads import choose_threads

        # the server sets its thread pools to these before torch loads (fedgame.viz.page)
        threads = choose_threads(scenario, device=checked.device).threads
        config = {
            "scenario": str(target.resolve()),
            "overrides": list(args.overrides),
            "threads": threads,
        }
    from fedgame.viz.serve import serve

    serve(config, host=args.host, port=args.port)
    return 0


def _print_warnings(lines: Sequence[str]) -> None:
    """``fedgame: warning: LINE`` on stderr for each line (also under ``--quiet``)."""
    for line in lines:
        print(f"fedgame: warning: {line}", file=sys.stderr)


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
    handlers = {"run": cmd_run, "validate": cmd_validate, "list": cmd_list, "explain": cmd_explain}
    handlers |= {"dashboard": cmd_dashboard, "scenarios": cmd_scenarios}
    handlers |= {"sweep": cmd_sweep, "report": cmd_report}
    try:
        with StopOnSignal(), trusting(getattr(args, "trust_plugins", False)):
            # SIGTERM while reading or checking input ends like Ctrl-C
            return handlers[args.command](args)
    except (ScenarioError, ResultsError) as err:
        print(f"fedgame: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:  # `fedgame list | head`: the reader left; say nothing more
        _silence_stdout()
        return EXIT_BROKEN_PIPE
    except (FedGameError, OSError) as err:
        print(f"fedgame: {' '.join(str(err).split())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt as exc:
        stop = exc if isinstance(exc, Interrupted) else Interrupted()
        print(f"fedgame: {stop.describe()}", file=sys.stderr)
        return stop.exit_code


def script() -> NoReturn:
    """The ``fedgame`` console script and ``python -m fedgame``: :func:`main`, then the
    process ends without the interpreter's teardown (:mod:`fedgame.quick_exit`)."""
    code = main()
    from fedgame.quick_exit import end_process

    end_process(code)


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


if __name__ == "__main__":
    script()
