"""Command line: ``fedgame scenarios`` and ``fedgame explain scenario`` (wired into
:mod:`fedgame.cli`).

``fedgame scenarios`` lists the scenario files shipped in the package, prints one, or copies
them into a folder (:mod:`fedgame.scenario.bundled`); ``fedgame explain scenario [KEY]``
describes the scenario's own keys (:mod:`fedgame.scenario.keys`). Neither imports torch,
pandas or Mesa.
"""

from __future__ import annotations

import argparse
import difflib
import sys
import textwrap
from typing import Any

from fedgame.errors import ScenarioError


def add_parsers(sub: Any) -> None:
    """Add the ``scenarios`` sub-command to ``fedgame``'s parser."""
    scenarios = sub.add_parser(
        "scenarios",
        help="list, print or copy the scenario files shipped with fedgame",
        description="The scenario files that ship with fedgame (the quickstart and the "
        "papers' reproductions). Without arguments, list them with their descriptions; with "
        "NAMEs, print those files; with --copy DIR, copy them (every one when no NAME is "
        "given) into DIR to edit and run.",
        epilog="examples:\n"
        "  fedgame scenarios\n"
        "  fedgame scenarios quickstart\n"
        "  fedgame scenarios --copy my_study quickstart lightdp\n"
        "  fedgame run my_study/quickstart.yaml",
    )
    scenarios.add_argument(
        "names", nargs="*", metavar="NAME", help="shipped scenarios (see the list), e.g. quickstart"
    )
    scenarios.add_argument(
        "--copy", metavar="DIR", help="copy the named scenarios (all when none is named) into DIR"
    )
    scenarios.add_argument(
        "--force", action="store_true", help="with --copy: overwrite files already in DIR"
    )


def cmd_scenarios(args: argparse.Namespace) -> int:
    """List, print or copy the shipped scenarios."""
    from fedgame.scenario.bundled import bundled, copy, find

    if args.force and not args.copy:
        raise ScenarioError("--force", True, "only with --copy DIR")
    if args.copy:
        chosen = find(args.names) if args.names else bundled()
        for path in copy(chosen, args.copy, force=args.force):
            print(path)
        return 0
    if args.names:
        for scenario in find(args.names):
            sys.stdout.write(scenario.path.read_text(encoding="utf-8"))
        return 0
    every = bundled()
    width = max(len(b.name) for b in every)
    for b in every:
        print(
            textwrap.fill(
                b.description or "-",
                100,
                initial_indent=f"{b.name:<{width}}  ",
                subsequent_indent=" " * (width + 2),
            )
        )
    return 0


def explain_scenario(key: str | None) -> int:
    """``fedgame explain scenario [KEY]``: the keys at KEY (every key without one)."""
    from fedgame.scenario import keys

    found = keys.matching(key)
    if not found:
        raise ScenarioError("KEY", key, _not_a_key(key or ""))
    print(keys.describe(found))
    return 0


def _not_a_key(key: str) -> str:
    """What to say about a KEY that is no scenario key (a plug-in's parameter, a typo)."""
    from fedgame.scenario import keys
    from fedgame.scenario.schema import COMPONENT_FAMILIES

    for path, family in COMPONENT_FAMILIES.items():
        if key.startswith(f"{path}."):
            return (
                f"a parameter of the {family} plug-in the scenario names: see fedgame explain "
                f"{family} NAME"
            )
    paths = keys.key_paths()
    close = difflib.get_close_matches(key, paths, n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return f"a scenario key{hint}; fedgame explain scenario lists them all"
