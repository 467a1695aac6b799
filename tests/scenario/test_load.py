"""Scenario loading: YAML and TOML, overrides, defaults, resolved plug-in configs."""

from __future__ import annotations

import pytest

from fedgame.errors import ScenarioError
from fedgame.scenario.load import apply_overrides, load_scenario, parse_override


def test_yaml_and_toml_give_the_same_scenario(write_scenario):
    yml = write_scenario("rounds: 4\nselection: {kind: uniform, k: 3}\n", name="a.yaml")
    tml = write_scenario('rounds = 4\n[selection]\nkind = "uniform"\nk = 3\n', name="a.toml")
    a, b = load_scenario(yml), load_scenario(tml)
    assert a.model_dump() == b.model_dump()
    assert a.config("selection").k == 3


def test_overrides_reach_nested_and_plugin_keys(tiny, write_scenario):
    path = write_scenario(tiny)
    s = load_scenario(path, ["privacy.clip=2.5", "population.clients=20", "training.lr=0.01"])
    assert s.config("privacy").clip == 2.5
    assert s.population.clients == 20
    assert s.training.lr == 0.01


def test_override_can_switch_component_kind(tiny, write_scenario):
    path = write_scenario(tiny)
    s = load_scenario(path, ["selection=all"])
    assert s.selection.kind == "all"


def test_parse_override_values():
    assert parse_override("a.b=3") == ("a.b", 3)
    assert parse_override("a=[1, 2]") == ("a", [1, 2])
    assert parse_override("a=true") == ("a", True)
    assert apply_overrides({"a": {"b": 1}}, [("a.c", 2)]) == {"a": {"b": 1, "c": 2}}


def test_defaults_fill_an_empty_file(write_scenario):
    s = load_scenario(write_scenario("{}\n", name="empty.yaml"))
    assert s.name == "empty"
    assert s.selection.kind == "uniform" and s.config("selection").k == 10
    assert s.privacy.kind == "none"


def test_component_shorthand_string(write_scenario):
    s = load_scenario(write_scenario("aggregation: mean\n"))
    assert s.aggregation.kind == "mean"


def test_error_is_a_value_error_with_key(write_scenario):
    with pytest.raises(ScenarioError) as info:
        load_scenario(write_scenario("rounds: -1\n"))
    assert info.value.key == "rounds"
    assert isinstance(info.value, ValueError)
