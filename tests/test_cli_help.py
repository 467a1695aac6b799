"""Self-documenting command line: --version, help texts, list --verbose, explain."""

from __future__ import annotations

import argparse
import re

import pytest
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from fedgame import __version__, plugin_help, registry
from fedgame.cli import _parser, main

COMMANDS = ["run", "validate", "list", "explain", "sweep", "report", "scenarios"]


def test_version(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"fedgame {__version__}"


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_a_description_defaults_and_examples(command, capsys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = capsys.readouterr().out
    usage, description = text.split("\n\n")[:2]
    assert usage.startswith(f"usage: fedgame {command}")
    assert len(description.split()) >= 10, description
    examples = text.split("examples:\n")[1]
    assert all(line.startswith(f"  fedgame {command}") for line in examples.splitlines()[:2])
    flat = " ".join(text.split())
    for action in _subcommand(command)._actions:
        if action.option_strings and action.default not in (None, False, [], "==SUPPRESS=="):
            said = f"(default: {action.default})" in flat or "(default" in (action.help or "")
            assert said, action.dest


def _subcommand(name: str) -> argparse.ArgumentParser:
    found = [a for a in _parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return found[0].choices[name]


def test_list_shows_whole_first_sentences_without_markup(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "``" not in out and ":class:" not in out and ":func:" not in out
    body = "\n".join(line for line in out.splitlines() if line.startswith("  "))
    entries = re.split(r"\n(?=  \S)", body)
    assert len(entries) == sum(len(e) for e in registry.catalogue().values())
    for entry in entries:
        assert entry.rstrip().endswith((".", ")", "?", "!")), entry


@pytest.mark.parametrize("family", registry.FAMILIES)
def test_explain_prints_every_parameter_with_type_and_default(family, capsys):
    for entry in registry.catalogue()[family]:
        assert main(["explain", family, entry.name]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"{family} {entry.name}: ")
        assert "``" not in out
        for name, field in entry.config.model_fields.items():
            line = next(x for x in out.splitlines() if x.strip().startswith(f"{name}: "))
            assert "(default: " in line
            if field.description:
                assert " ".join(field.description.split())[:40] in " ".join(out.split())
        if not entry.config.model_fields:
            assert "(no parameters)" in out


def test_list_verbose_includes_parameters(capsys):
    assert main(["list", "privacy", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "privacy gaussian: " in out and "clip: float > 0 (default: 1.0)" in out
    assert "aggregation" not in out.split("\n", 1)[0]


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["explain", "privcy", "gaussian"], "did you mean privacy?"),
        (["explain", "privacy", "gausian"], "did you mean gaussian?"),
        (["list", "selecton"], "did you mean selection?"),
        (["explain", "model", "transformer"], "allowed model plug-ins: cnn, lenet5, logreg, mlp"),
    ],
)
def test_unknown_family_or_name_lists_the_allowed_and_suggests(argv, suggestion, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("fedgame: ") and err.count("\n") == 1
    assert suggestion in err
    if argv[0] == "explain" and argv[1] == "privcy":
        assert ", ".join(registry.FAMILIES) in err


class _Knobs(BaseModel):
    """Not registered: only described."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    width: PositiveInt = 3
    share: float = Field(0.5, ge=0, le=1, description="fraction kept, in [0, 1]")
    names: list[str] = Field(default_factory=lambda: ["a"])
    mode: str | None = None
    needed: int


class _Plugin:
    """Does one thing, e.g. nothing; see :class:`~fedgame.registry.Entry` and ``width``.

    A second paragraph that the summary leaves out.
    """


def test_describe_renders_types_defaults_and_missing_descriptions():
    text = plugin_help.describe("model", "demo", _Plugin, _Knobs)
    assert text.splitlines()[0] == (
        "model demo: Does one thing, e.g. nothing; see Entry and width."
    )
    assert "second paragraph" not in text
    lines = [line.strip() for line in text.splitlines()]
    assert "width: int > 0 (default: 3)" in lines
    assert "share: float in [0, 1] (default: 0.5)" in lines
    assert "fraction kept, in [0, 1]" in lines
    assert "names: list[str] (default: ['a'])" in lines
    assert "mode: str | None (default: None)" in lines
    assert "needed: int (default: required)" in lines
    # a knob without a description is followed directly by the next knob
    assert lines[lines.index("width: int > 0 (default: 3)") + 1].startswith("share:")


def test_first_sentence_keeps_abbreviations():
    text = "Splits data, e.g. by label. Then more. And more."
    assert plugin_help.first_sentence(text) == "Splits data, e.g. by label."
    assert plugin_help.first_sentence("One sentence only") == "One sentence only"


def _every_action(parser: argparse.ArgumentParser, name: str = "fedgame"):
    """(command, action) of every argument and option of ``parser`` and its sub-commands."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from _every_action(sub, f"{name} {command}")
        elif not isinstance(action, argparse._HelpAction | argparse._VersionAction):
            yield name, action


def test_every_argument_and_option_of_every_command_has_help_text():
    actions = list(_every_action(_parser()))
    assert len({command for command, _ in actions}) >= 8  # run, validate, ..., scenarios
    missing = [f"{c} {'/'.join(a.option_strings) or a.dest}" for c, a in actions if not a.help]
    assert not missing, f"without help text: {missing}"


@pytest.mark.parametrize(
    "argv",
    [[], ["bogus"], ["run"], ["run", "x.yaml", "--replicate", "x"], ["sweep", "--workers"]],
)
def test_a_usage_error_is_one_line_naming_the_command_once(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    command = argv[0] if argv and argv[0] != "bogus" else ""
    head = f"fedgame: {command}: " if command else "fedgame: "
    assert err.startswith(head) and err.count("\n") == 1, err
    assert "fedgame: fedgame" not in err and err.count("fedgame") == 2, err  # and its --help
    assert err.rstrip().endswith(f"(see {' '.join(['fedgame', command]).strip()} --help)")
