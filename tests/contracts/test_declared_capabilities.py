"""Declared optional capabilities: each registered plug-in that declares one is used by its
reader (loader, memory estimate, preflight, dashboard), and one that does not is passed over.

The follower utilities of the game solver declare their fast paths the same way.
Plug-ins registered here are removed again afterwards (the registry is global).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from pydantic import BaseModel, ConfigDict, Field

from fedgame import registry
from fedgame.cli import main
from fedgame.data.partition import ChecksCapacity, DeclaresMinSize
from fedgame.errors import ScenarioError
from fedgame.game.equilibrium import (
    AggregateWarmStart,
    AnalyticBestResponse,
    FollowerGame,
    FollowerUtility,
    solve_followers,
)
from fedgame.learning.model_size import BuildsModel, SizedModel
from fedgame.mechanisms.base import SelectsK
from fedgame.mechanisms.selection.all import AllSelection
from fedgame.network.topology import BYTES_PER_EDGE, ExpectsEdges
from fedgame.scenario.footprint import estimate
from fedgame.scenario.load import validate
from fedgame.scenario.preflight import check_partition
from fedgame.scenario.schema import COMPONENT_FAMILIES
from fedgame.viz.knobs import GAMMA, knobs

#: parameters a plug-in needs beyond its defaults to validate in the small scenario below
NEEDS: dict[str, dict[str, Any]] = {
    "emd_threshold": {"quantile": 0.5},
    "edge_list": {"edges": [[0, 1], [1, 2], [2, 3]]},
}


def scenario_with(tiny: dict[str, Any], path: str, kind: str, **params: Any) -> dict[str, Any]:
    """``tiny`` with 30 clients, 12 rounds and the component at ``path`` set to ``kind``."""
    data = copy.deepcopy(tiny)
    data["population"]["clients"] = 30
    data["rounds"] = 12
    node = data
    *parents, last = path.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = {"kind": kind, **NEEDS.get(kind, {}), **params}
    return data


def _entries(family: str) -> list[registry.Entry]:
    return registry.catalogue()[family]


def _ids(entries: list[registry.Entry]) -> list[str]:
    return [f"{e.family}:{e.name}" for e in entries]


@pytest.fixture
def registered() -> Iterator[Any]:
    """``add(family, name, cls)`` registers a plug-in for one test; all are removed after."""
    added: list[tuple[str, str]] = []

    def add(family: str, name: str, cls: type) -> type:
        registry.register(family, name)(cls)
        added.append((family, name))
        return cls

    try:
        yield add
    finally:
        for family, name in added:
            registry._REGISTRY[family].pop(name, None)


# --- check_scenario (registry.ChecksScenario), called by the loader -------------------------

CHECKERS = [
    (path, e)
    for path, family in COMPONENT_FAMILIES.items()
    for e in _entries(family)
    if issubclass(e.cls, registry.ChecksScenario)
]


def test_the_cross_section_checkers_are_found():
    names = {(e.family, e.name) for _, e in CHECKERS}
    assert {("aggregation", "secure"), ("topology", "edge_list"), ("selection", "uniform")} <= names
    assert ("aggregation", "median") not in names


@pytest.mark.parametrize(("path", "entry"), CHECKERS, ids=_ids([e for _, e in CHECKERS]))
def test_every_declared_checker_is_called_once_with_its_section(tiny, monkeypatch, path, entry):
    assert isinstance(inspect.getattr_static(entry.cls, "check_scenario"), staticmethod)
    calls: list[tuple[Any, str]] = []

    def record(config: Any, scenario: Any, *, key: str) -> None:
        calls.append((config, key))

    monkeypatch.setattr(entry.cls, "check_scenario", staticmethod(record))
    scenario = validate(scenario_with(tiny, path, entry.name))
    assert len(calls) == 1
    config, key = calls[0]
    assert key == path
    assert config is scenario.config(path)


def test_a_declared_checker_refuses_and_an_undeclared_one_is_skipped(tiny, registered):
    class Refuses(AllSelection):
        """Selection refusing every scenario across sections."""

        @staticmethod
        def check_scenario(config: Any, scenario: Any, *, key: str) -> None:
            raise ScenarioError(f"{key}.probe", scenario.population.clients, "never allowed")

    class Plain(AllSelection):
        """Selection with no cross-section check."""

    class Disabled(Plain):
        """Selection whose check is switched off."""

        check_scenario = None

    registered("selection", "_refuses_probe", Refuses)
    registered("selection", "_plain_probe", Plain)
    registered("selection", "_disabled_probe", Disabled)
    with pytest.raises(ScenarioError) as info:
        validate(scenario_with(tiny, "selection", "_refuses_probe"))
    assert info.value.key == "selection.probe"
    assert "never allowed" in str(info.value)
    for kind in ("_plain_probe", "_disabled_probe"):
        assert validate(scenario_with(tiny, "selection", kind)).selection.kind == kind


def test_secure_aggregation_over_a_median_is_refused_with_exit_code_2(tiny, write_scenario, capsys):
    tiny["aggregation"] = {"kind": "secure", "inner": {"kind": "median"}}
    code = main(["validate", str(write_scenario(tiny))])
    err = capsys.readouterr().err
    assert code == 2
    assert "aggregation.inner.kind" in err
    assert "median" in err
    assert "Traceback" not in err


# --- expected_edges (ExpectsEdges), read by the memory estimate ---------------------------

TOPOLOGIES = _entries("topology")


@pytest.mark.parametrize("entry", TOPOLOGIES, ids=_ids(TOPOLOGIES))
def test_every_topology_expects_about_the_edges_it_builds(entry):
    n = 40
    config = registry.validate("topology", {"kind": entry.name, **NEEDS.get(entry.name, {})},
                               key="network.topology")  # fmt: skip
    topology = registry.create("topology", entry.name, config)
    assert isinstance(topology, ExpectsEdges)
    built = [
        topology.build(n, rng=np.random.default_rng(seed)).number_of_edges() for seed in range(8)
    ]
    mean = float(np.mean(built))  # a memory estimate: the mean over 8 graphs, within 15 %
    assert 0.85 * mean - 1.0 <= topology.expected_edges(n) <= 1.15 * mean + 1.0


@pytest.mark.parametrize("entry", TOPOLOGIES, ids=_ids(TOPOLOGIES))
def test_the_estimate_sizes_the_graph_by_expected_edges(tiny, entry):
    scenario = validate(scenario_with(tiny, "network.topology", entry.name))
    topology = registry.create("topology", entry.name, scenario.config("network.topology"))
    term = next(t for t in estimate(scenario).terms if t.what == "topology")
    assert term.bytes == int(topology.expected_edges(30) * BYTES_PER_EDGE)


def test_a_topology_without_expected_edges_counts_no_edges(tiny, registered):
    class Ring:
        """A ring that does not state its edge count."""

        def __init__(self, config: Any) -> None:
            del config

        def build(self, num_clients: int, *, rng: np.random.Generator) -> Any:
            import networkx as nx

            return nx.cycle_graph(num_clients)

    registered("topology", "_ring_probe", Ring)
    assert not isinstance(Ring(None), ExpectsEdges)
    scenario = validate(scenario_with(tiny, "network.topology", "_ring_probe"))
    term = next(t for t in estimate(scenario).terms if t.what == "topology")
    assert term.bytes == 0


# --- k (SelectsK), read by the memory estimate --------------------------------------------

SELECTIONS = _entries("selection")


@pytest.mark.parametrize("entry", SELECTIONS, ids=_ids(SELECTIONS))
def test_a_selection_declaring_k_sizes_the_plan_by_it(tiny, entry):
    declares = "k" in entry.config.model_fields
    params = {"k": 7} if declares else {}
    scenario = validate(scenario_with(tiny, "selection", entry.name, **params))
    assert isinstance(scenario.config("selection"), SelectsK) == declares
    per_round = 7 if declares else 30
    plan = next(t for t in estimate(scenario).terms if t.what == "selection plan")
    assert plan.bytes == scenario.rounds * per_round * 16


# --- build (BuildsModel), read by the memory estimate -------------------------------------

MODELS = _entries("model")


@pytest.mark.parametrize("entry", MODELS, ids=_ids(MODELS))
def test_every_model_builds_the_module_its_size_states(entry):
    model = registry.create("model", entry.name)
    assert isinstance(model, BuildsModel)
    module = model.build(input_shape=(1, 16, 16), num_classes=10)
    params = sum(p.numel() for p in module.parameters())
    if isinstance(model, SizedModel):
        assert model.size(input_shape=(1, 16, 16), num_classes=10).num_params == params


class _ModelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    hidden: int = Field(5, description="hidden width")


def test_a_model_that_only_builds_is_sized_from_its_skeleton_and_one_that_cannot_is_refused(
    tiny, registered
):
    class Builds:
        """A model stating no size: the estimate builds its skeleton."""

        Config = _ModelConfig

        def __init__(self, config: _ModelConfig) -> None:
            self.config = config

        def build(self, *, input_shape: tuple[int, ...], num_classes: int) -> Any:
            import torch
            from torch import nn

            d, h = int(np.prod(input_shape)), self.config.hidden
            meta = torch.device("meta")
            return nn.Sequential(
                nn.Flatten(), nn.Linear(d, h, device=meta), nn.Linear(h, num_classes, device=meta)
            )

    class Neither:
        """A model with neither ``build`` nor ``size``: not a model plug-in at all."""

        def __init__(self, config: Any) -> None:
            del config

    registered("model", "_builds_probe", Builds)
    sized = estimate(validate(scenario_with(tiny, "model", "_builds_probe", hidden=9))).model
    assert sized is not None
    assert sized.num_params == (64 + 1) * 9 + (9 + 1) * 10  # digits: 8x8 inputs, 10 classes
    with pytest.raises(TypeError, match="lacks build"):
        registered("model", "_neither_probe", Neither)
    assert "_neither_probe" not in registry.catalogue()["model"]


# --- min_size (DeclaresMinSize), read by the preflight capacity check ---------------------

PARTITIONS = _entries("partition")


@pytest.mark.parametrize("entry", PARTITIONS, ids=_ids(PARTITIONS))
def test_every_partition_states_its_capacity_rule(tiny, entry):
    """A partition checks its own capacity or declares ``min_size``, which preflight enforces."""
    if issubclass(entry.cls, ChecksCapacity):
        return  # its own rule (tests/data)
    assert "min_size" in entry.config.model_fields
    scenario = validate(scenario_with(tiny, "data.partition", entry.name, min_size=2))
    assert isinstance(scenario.config("data.partition"), DeclaresMinSize)
    check_partition(scenario, estimate(scenario))  # 30 clients x 2 samples fit in digits
    big = validate(scenario_with(tiny, "data.partition", entry.name, min_size=1000))
    with pytest.raises(ScenarioError) as info:
        check_partition(big, estimate(big))
    assert info.value.key == "data.partition.min_size"
    assert info.value.value == 1000


def test_a_partition_config_without_min_size_needs_one_sample_a_client(tiny, registered):
    class Whole:
        """Every client gets the whole training set."""

        def __init__(self, config: Any) -> None:
            del config

        def split(
            self,
            labels: np.ndarray,
            *,
            num_clients: int,
            rng: np.random.Generator,
            groups: np.ndarray | None = None,
        ) -> list[np.ndarray]:
            del rng, groups
            return [np.arange(len(labels)) for _ in range(num_clients)]

    registered("partition", "_whole_probe", Whole)
    scenario = validate(scenario_with(tiny, "data.partition", "_whole_probe"))
    assert not isinstance(scenario.config("data.partition"), DeclaresMinSize)
    check_partition(scenario, estimate(scenario))
    crowded = copy.deepcopy(scenario_with(tiny, "data.partition", "_whole_probe"))
    crowded["population"]["clients"] = 5000  # more clients than digits' training samples
    many = validate(crowded)
    with pytest.raises(ScenarioError) as info:
        check_partition(many, estimate(many))
    assert info.value.key == "data.partition.min_size"
    assert info.value.value == 1


# --- gamma, a declared incentive field read by the dashboard's knobs ----------------------

INCENTIVES = _entries("incentive")


@pytest.mark.parametrize("entry", INCENTIVES, ids=_ids(INCENTIVES))
def test_the_gamma_knob_starts_at_the_declared_gamma(tiny, entry):
    declares = "gamma" in entry.config.model_fields
    params = {"gamma": 0.3} if declares else {}
    scenario = validate(scenario_with(tiny, "incentive", entry.name, **params))
    knob = next(k for k in knobs(scenario) if k.key == GAMMA)
    assert knob.value == (0.3 if declares else 0.5)


# --- follower utilities: bounds, warm start, analytic best response (solve_followers) ------

NU = np.array([1.0, 1.5, 2.0, 4.0])


class Bounded:
    """A follower utility declaring only its bounds (no fast path)."""

    def __init__(self, inner: FollowerUtility) -> None:
        self.inner = inner

    def __call__(self, rho: np.ndarray) -> np.ndarray:
        return self.inner(rho)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.inner.bounds()


class Counting(Bounded):
    """Declares both fast paths and counts how often each is used."""

    def __init__(self, inner: FollowerUtility) -> None:
        super().__init__(inner)
        self.warm = 0
        self.analytic = 0

    def aggregate_equilibrium(self) -> np.ndarray | None:
        self.warm += 1
        return self.inner.aggregate_equilibrium()

    def analytic_best_response(self, i: int, rho: np.ndarray) -> float | None:
        self.analytic += 1
        return self.inner.analytic_best_response(i, rho)


@pytest.mark.parametrize("cost", ["linear", "quadratic"])
def test_the_stackelberg_incentive_utility_declares_every_fast_path(cost):
    leader = registry.create("incentive", "stackelberg", {"cost": cost, "cap": 5.0})
    utility = leader.utility(NU, 10.0)
    assert isinstance(utility, FollowerGame)
    assert isinstance(utility, AggregateWarmStart)
    assert isinstance(utility, AnalyticBestResponse)


@pytest.mark.parametrize("cost", ["linear", "quadratic"])
def test_declared_fast_paths_are_used_only_when_asked(cost):
    inner = FollowerUtility(NU, 10.0, 1.0, cost=cost)
    both = Counting(inner)
    assert isinstance(both, AggregateWarmStart) and isinstance(both, AnalyticBestResponse)
    eq = solve_followers(both, analytic=True)
    assert both.warm == 1 and both.analytic > 0
    assert eq.converged and eq.iterations <= 2  # started at the equilibrium
    np.testing.assert_allclose(eq.rho, inner.aggregate_equilibrium(), rtol=1e-8)
    cold = Counting(inner)
    solve_followers(cold, analytic=False, warm_start=False)
    assert cold.warm == 0 and cold.analytic == 0
    given = Counting(inner)
    solve_followers(given, rho0=np.ones(NU.size))
    assert given.warm == 0


@pytest.mark.parametrize("cost", ["linear", "quadratic"])
def test_a_utility_without_fast_paths_is_solved_numerically(cost):
    inner = FollowerUtility(NU, 10.0, 1.0, cost=cost)
    bounded = Bounded(inner)
    assert isinstance(bounded, FollowerGame)
    assert not isinstance(bounded, AggregateWarmStart | AnalyticBestResponse)
    plain = solve_followers(bounded, analytic=True)
    numeric = solve_followers(inner, analytic=False, warm_start=False)
    np.testing.assert_array_equal(plain.rho, numeric.rho)
    assert plain.iterations == numeric.iterations


def test_a_utility_without_bounds_needs_them_passed():
    inner = FollowerUtility(NU, 10.0, 1.0)

    def utility(rho: np.ndarray) -> np.ndarray:
        return inner(rho)

    assert not isinstance(utility, FollowerGame)
    with pytest.raises(TypeError, match="bounds="):
        solve_followers(utility)
    eq = solve_followers(utility, bounds=inner.bounds())
    np.testing.assert_allclose(eq.rho, inner.aggregate_equilibrium(), rtol=1e-6)
