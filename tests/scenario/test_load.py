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


def test_override_indexes_into_lists():
    data = {"population": {"behaviours": [{"share": 0.5, "x": {"y": 1}}, {"share": 0.5}]}}
    out = apply_overrides(data, [("population.behaviours.1.share", 0.7)])
    assert out["population"]["behaviours"][1] == {"share": 0.7}
    sets = [("population.behaviours.0.x.y", 2), ("population.behaviours.0", {})]
    out = apply_overrides(data, sets)
    assert out["population"]["behaviours"] == [{}, {"share": 0.5}]
    assert data["population"]["behaviours"][0] == {"share": 0.5, "x": {"y": 1}}  # a copy
    assert apply_overrides({"a": [1, 2]}, [("a.1", 5)]) == {"a": [1, 5]}


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("a.2", "an index 0..1 into the list at a"),
        ("a.x", "an index 0..1 into the list at a"),
        ("a.2.b", "an index 0..1 into the list at a"),
        ("e.0", "nothing: the list at e is empty"),
    ],
)
def test_override_outside_a_list_names_the_key_and_range(key, allowed):
    with pytest.raises(ScenarioError) as info:
        apply_overrides({"a": [{"b": 1}, {"b": 2}], "e": []}, [(key, 3)])
    assert info.value.key == key and allowed in str(info.value)


def test_override_of_a_behaviour_reaches_the_validated_scenario():
    from fedgame.scenario.load import validate

    data = {
        "population": {
            "behaviours": [
                {"kind": "best_response", "share": 0.5},
                {"kind": "learning", "share": 0.5},
            ]
        }
    }
    sets = [("population.behaviours.1.share", 0.25), ("population.behaviours.0.share", 0.75)]
    scenario = validate(apply_overrides(data, sets))
    assert [b.share for b in scenario.population.behaviours] == [0.75, 0.25]


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
