"""Keys that change nothing under the chosen plug-ins are named (fedgame.scenario.effects).

Each key of ``OPTIONAL`` is checked both ways: a scenario where no chosen plug-in reads it
(warned) and one where a plug-in does (not warned). For the idle cases the run is executed
with the default and with the set value: the tables must be identical, so the warning says
the truth. Every registered plug-in's declared keys must be real scenario keys.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

import fedgame
import fedgame.registry as registry
from fedgame.scenario import effects
from fedgame.scenario.keys import key_paths
from fedgame.scenario.load import apply_overrides, validate

REPO = Path(__file__).resolve().parents[2]

#: a small run nobody prices privacy in: no incentive, every client takes part
BASE: dict[str, Any] = {
    "name": "effects",
    "seed": 5,
    "rounds": 2,
    "population": {"clients": 8},
    "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "iid"}},
    "training": {"local_steps": 1, "batch_size": 8, "device": "cpu"},
    "selection": {"kind": "uniform", "k": 4},
    "privacy": {"kind": "gaussian", "clip": 1.0},
    "network": {"faults": {"kind": "independent", "link_failure": 0.1}},
}

#: a contest: QI-DPFL's leader and best-responding clients
CONTEST = {
    "incentive": {"kind": "qi_dpfl"},
    "policy": {"kind": "best_response"},
    "selection": {"kind": "all"},
    "privacy": {"kind": "zcdp_gaussian", "clip": 1.0},
    "aggregation": {"kind": "mean"},
}

#: key -> (a non-default value, overrides making it idle, overrides making it read)
CASES: dict[str, tuple[Any, dict[str, Any], dict[str, Any]]] = {
    "network.topology": (
        {"kind": "watts_strogatz", "k": 2, "p": 0.3},
        {"population.straggle_prob": 0.3},
        {"network.faults.edge_failure": 0.2},
    ),
    "population.privacy_value": ({"dist": "uniform", "low": 0.5, "high": 1.5}, {}, CONTEST),
    "population.straggle_prob": (0.3, {"network.faults": {"kind": "none"}}, {}),
    "population.colluders": (
        3,
        {},
        {"privacy": {"kind": "ldp", "clip": 1.0}, "aggregation": {"kind": "mean"}},
    ),
    "population.budget.epsilon": (4.0, {"privacy": {"kind": "none"}}, {}),
    "population.budget.delta": (1e-3, {"privacy": {"kind": "none"}}, {}),
    "game.complete_information": (True, {}, CONTEST),
    "game.cartel": (True, {"population.colluders": 2}, {**CONTEST, "population.colluders": 2}),
}


def scenario_with(key: str | None, value: Any, overrides: dict[str, Any]) -> dict[str, Any]:
    data = apply_overrides(copy.deepcopy(BASE), overrides.items())
    return apply_overrides(data, [(key, value)]) if key else data


def idle_of(data: dict[str, Any]) -> list[str]:
    return [k.key for k in effects.idle_keys(validate(data))]


def test_every_optional_key_has_cases() -> None:
    assert set(CASES) == set(effects.OPTIONAL)
    assert set(effects.OPTIONAL) <= set(key_paths())


@pytest.mark.parametrize("key", list(CASES))
def test_idle_key_is_named(key: str) -> None:
    value, idle, _ = CASES[key]
    assert key in idle_of(scenario_with(key, value, idle))
    # the same scenario without the key set: nothing to say
    assert key not in idle_of(scenario_with(None, None, idle))


@pytest.mark.parametrize("key", list(CASES))
def test_read_key_is_not_named(key: str) -> None:
    value, _, read = CASES[key]
    scenario = validate(scenario_with(key, value, read))
    assert key in effects.keys_read(scenario)
    assert key not in [k.key for k in effects.idle_keys(scenario)]


def test_a_value_equal_to_the_default_is_not_named() -> None:
    data = scenario_with("network.topology", {"kind": "star"}, {})
    data["population"]["privacy_value"] = 1.0
    data["population"]["colluders"] = 0
    assert idle_of(data) == []


def test_behaviours_count_as_chosen_policies() -> None:
    data = scenario_with("population.privacy_value", {"dist": "uniform", "low": 1, "high": 2}, {})
    assert "population.privacy_value" in idle_of(data)
    data["population"]["behaviours"] = [
        {"kind": "always", "share": 0.5},
        {"kind": "learning", "share": 0.5},
    ]
    assert "population.privacy_value" not in idle_of(data)


def _tables(data: dict[str, Any], *, shown: tuple[str, ...] = ()) -> tuple[pd.DataFrame, ...]:
    """The run's tables without wall times and without the columns that report the key."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = fedgame.run(data)
    rounds = result.rounds.drop(columns=[c for c in result.rounds if "time" in c])
    # the clients table echoes each client's static attributes (the key itself)
    echoes = ["privacy_value", "straggle_prob", "colluder", "epsilon_total", "delta", *shown]
    clients = result.clients.drop(columns=[c for c in echoes if c in result.clients])
    return rounds, clients


@pytest.mark.parametrize(
    "key",
    ["network.topology", "population.privacy_value", "population.colluders", "game.cartel"],
)
def test_an_idle_key_leaves_the_run_unchanged(key: str) -> None:
    """The warning is true: the set value and the default give the same tables."""
    value, idle, _ = CASES[key]
    with_key = scenario_with(key, value, idle)
    assert key in idle_of(with_key)
    shown = ("utility",) if key == "population.privacy_value" else ()  # Conditional.shown_in
    rounds_a, clients_a = _tables(scenario_with(None, None, idle), shown=shown)
    rounds_b, clients_b = _tables(with_key, shown=shown)
    pd.testing.assert_frame_equal(rounds_a, rounds_b)
    pd.testing.assert_frame_equal(clients_a, clients_b)


def test_a_read_topology_changes_the_run() -> None:
    """The converse: with failing edges the graph is read, and the tables differ."""
    value, _, read = CASES["network.topology"]
    rounds_a, _ = _tables(scenario_with(None, None, read))
    rounds_b, _ = _tables(scenario_with("network.topology", value, read))
    assert not rounds_a["failed_edges"].equals(rounds_b["failed_edges"])


def test_declared_keys_are_scenario_keys() -> None:
    """Every plug-in's ``reads`` names keys of the schema (under its example config)."""
    paths = set(key_paths())
    base = validate(copy.deepcopy(BASE))
    for family, entries in registry.catalogue().items():
        for entry in entries:
            example = dict(registry.example(family, entry.name).config)
            try:
                config = entry.config.model_validate(example)
            except ValueError:  # needs input of its own (edge_list's edges): reads nothing
                assert not callable(entry.reads), f"{family} {entry.name} has no example"
                config = None
            for key in entry.keys_read(config, base):
                assert key in paths, f"{family} {entry.name} reads unknown key {key!r}"


def test_register_refuses_a_bare_string(scratch_registry) -> None:
    with pytest.raises(TypeError, match="not the string"):

        @scratch_registry.register("topology", "one_string", reads="network.topology")
        class OneString:
            def build(self, num_clients: int, *, rng: Any) -> Any: ...


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "fedgame", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )


def test_validate_and_run_warn_in_one_line(tmp_path: Path) -> None:
    data = scenario_with("network.topology", {"kind": "complete"}, {})
    file = tmp_path / "s.yaml"
    file.write_text(yaml.safe_dump(data))
    checked = _cli("validate", str(file), cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr
    lines = checked.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith(f"fedgame: warning: {file}: network.topology is set (complete)")
    assert "no effect" in lines[0] and "Traceback" not in checked.stderr
    ran = _cli("run", str(file), "--quiet", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stderr.splitlines()[0] == lines[0]  # then the run's own (noise) warning
    (manifest,) = (tmp_path / "out").rglob("manifest.json")
    assert list(yaml.safe_load(manifest.read_text())["idle_keys"]) == ["network.topology"]


def test_api_run_warns() -> None:
    data = scenario_with("population.budget.epsilon", 4.0, {"privacy": {"kind": "none"}})
    data["rounds"] = 1
    with pytest.warns(UserWarning, match="population.budget.epsilon is set"):
        fedgame.run(data)


def test_sweep_names_a_grid_key_without_effect() -> None:
    from fedgame.run.grid import plan_from_data

    grid = {"network.topology.kind": ["star", "complete"]}
    plan = plan_from_data(copy.deepcopy(BASE), grid=grid)
    assert len(plan.idle) == 1
    assert plan.idle[0].startswith("sweep.grid network.topology.kind has no effect")
    read = scenario_with(None, None, {"network.faults.edge_failure": 0.1})
    assert plan_from_data(read, grid=grid).idle == ()
    # a key idle in every run of the sweep is named once
    idle = scenario_with("population.colluders", 2, {})
    lines = plan_from_data(idle, grid={"rounds": [1, 2]}).idle
    assert [line.split(" is set")[0] for line in lines] == ["population.colluders"]


def test_bundled_scenarios_set_no_idle_key() -> None:
    """The scenarios fedgame ships set no key that their plug-ins ignore."""
    from fedgame.scenario.load import load_scenario

    for file in sorted((REPO / "fedgame" / "scenarios").glob("*.yaml")):
        assert effects.idle_keys(load_scenario(file)) == [], file.name
