"""``fedgame explain scenario [KEY]``: every key of the scenario schema, with type, default and
meaning."""

from __future__ import annotations

import pytest

from fedgame.cli import main
from fedgame.scenario.keys import scenario_keys
from fedgame.scenario.schema import COMPONENT_FAMILIES, Scenario


def _leaf_paths(tree: dict, prefix: str = "") -> set[str]:
    """Dotted paths of a dumped scenario, stopping at plug-ins ({kind}) and distributions."""
    out = set()
    for name, value in tree.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict) and value and not {"kind", "dist"} & set(value):
            out |= _leaf_paths(value, f"{path}.")
        else:
            out.add(path)
    return out


def test_every_key_of_the_schema_is_listed_with_type_default_and_meaning():
    keys = {k.path: k for k in scenario_keys()}
    dumped = _leaf_paths(Scenario().model_dump(mode="json"))
    assert dumped <= set(keys), sorted(dumped - set(keys))
    for key in keys.values():
        assert key.meaning, f"{key.path} has no meaning (add a Field description)"
        if not key.section:
            assert key.type and key.default, key
    assert keys["population.clients"].default == "50"
    assert keys["population.clients"].type == "int > 0"
    assert keys["population.budget.epsilon"].default == "10.0"
    assert keys["selection"].default == "{kind: uniform, k: 10}"
    assert keys["game.degeneracy.max_share"].type == "float in (0.5, 1.0]"
    assert {"population.behaviours.N.share", "population.assign", "output.clients"} <= set(keys)
    assert set(COMPONENT_FAMILIES) <= set(keys)


def test_explain_scenario_prints_every_key(capsys):
    assert main(["explain", "scenario"]) == 0
    out = capsys.readouterr().out
    heads = [line.split(":")[0] for line in out.splitlines() if not line.startswith(" ")]
    assert heads == [k.path for k in scenario_keys()]
    assert "game.stop_on_degenerate: bool (default: False)" in out


@pytest.mark.parametrize(
    ("key", "first", "count"),
    [
        ("game", "game: section", 16),
        ("output.dir", "output.dir: str", 1),
        ("population.behaviours.0.share", "population.behaviours.N.share: float", 1),
    ],
)
def test_explain_scenario_key_prints_that_key_and_those_under_it(key, first, count, capsys):
    assert main(["explain", "scenario", key]) == 0
    out = capsys.readouterr().out
    heads = [line for line in out.splitlines() if not line.startswith(" ")]
    assert heads[0].startswith(first) and len(heads) == count


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("populaton.clients", "did you mean population.clients?"),
        (
            "privacy.clip",
            "a parameter of the privacy plug-in the scenario names: see fedgame "
            "explain privacy NAME",
        ),
    ],
)
def test_a_key_that_is_not_one_says_what_it_might_be(key, said, capsys):
    assert main(["explain", "scenario", key]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


def test_a_plugin_family_without_a_name_lists_its_plugins(capsys):
    assert main(["explain", "privacy"]) == 2
    err = capsys.readouterr().err
    assert "'NAME' is required" in err and "gaussian" in err
