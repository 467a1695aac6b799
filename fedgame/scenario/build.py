"""Turn a validated ``Scenario`` into the parts a ``FedGameModel`` runs: data, learner, plug-ins.

Every random draw comes from the run's ``SeedPlan`` by stream name, so the same scenario and
seed rebuild the same world.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import networkx as nx
import numpy as np
import torch

import fedgame.registry as registry
from fedgame.components import Components
from fedgame.data.datasets import Dataset
from fedgame.data.quality import emd_to_population, label_counts
from fedgame.data.shards import ClientShards, as_shards
from fedgame.errors import ScenarioError
from fedgame.learning.batched import BatchedLearner
from fedgame.learning.device import device_name
from fedgame.learning.models import init_parameters
from fedgame.scenario import behaviours
from fedgame.scenario.schema import Scenario
from fedgame.seeding import SeedPlan


@dataclass(frozen=True)
class BehaviourGroup:
    """One behaviour of the population: its label, its decision rule and its clients.

    ``decision`` is a policy plug-in instance, or a registered ``ClientAgent`` subclass (with
    its validated ``params``) that decides in its own ``respond``.
    """

    label: str
    kind: str
    decision: Any
    params: Any
    ids: np.ndarray


@dataclass
class World:
    """Everything a run needs besides the agents."""

    dataset: Dataset
    parts: ClientShards
    learner: BatchedLearner
    population: dict[str, np.ndarray]
    behaviours: tuple[BehaviourGroup, ...]
    graph: nx.Graph
    components: Components
    device: torch.device
    planned_participations: int


@contextmanager
def _key_prefix(prefix: str) -> Iterator[None]:
    """A plug-in's ``ScenarioError`` names its own key (``path``); give it its dotted place."""
    try:
        yield
    except ScenarioError as err:
        raise (err if err.key.startswith(prefix) else err.with_prefix(prefix)) from None


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU is a scenario error
    (:func:`fedgame.learning.device.device_name`, the check ``preflight`` makes)."""
    return torch.device(device_name(name))


def build_components(scenario: Scenario) -> Components:
    """Instantiate every plug-in named in the scenario (client policies: ``build_behaviours``)."""
    from fedgame.scenario.schema import COMPONENT_FAMILIES

    return Components.from_paths(
        {
            path: registry.create(family, scenario.component(path).kind, scenario.config(path))
            for path, family in COMPONENT_FAMILIES.items()
            if family != "policy"
        }
    )


def build_behaviours(scenario: Scenario, index: np.ndarray) -> tuple[BehaviourGroup, ...]:
    """One group per resolved behaviour, with its decision rule and its clients' ids."""
    from fedgame.agents.client import ClientAgent

    groups = []
    for j, spec in enumerate(scenario.behaviours()):
        cls = registry.entry("policy", spec.kind).cls
        own_agent = isinstance(cls, type) and issubclass(cls, ClientAgent)
        decision = cls if own_agent else registry.create("policy", spec.kind, spec.config)
        ids = np.flatnonzero(index == j).astype(np.int64)
        groups.append(
            BehaviourGroup(spec.label, spec.kind, decision, spec.config if own_agent else None, ids)
        )
    return tuple(groups)


def sample_population(
    scenario: Scenario,
    parts: ClientShards,
    labels: np.ndarray,
    num_classes: int,
    *,
    plan: SeedPlan,
    privacy: Any,
    participations: int,
    behaviour_labels: np.ndarray,
) -> dict[str, np.ndarray]:
    """Each client's static columns (``fedgame.agents.schema``), drawn from the scenario.

    Every attribute has its own named stream, so adding one does not change the others.
    """
    pop = scenario.population
    n = pop.clients
    counts = label_counts(labels, parts, num_classes)
    eps_total = pop.budget.epsilon.sample(n, rng=plan.rng("population", "epsilon"))
    delta = pop.budget.delta.sample(n, rng=plan.rng("population", "delta"))
    try:
        eps_round, delta_round = privacy.epsilon_per_round(
            eps_total, delta, participations=participations
        )
    except ScenarioError as err:
        raise ScenarioError(
            "population.budget.epsilon", ..., f"the privacy mechanism cannot use it: {err}"
        ) from None
    colluder = np.zeros(n, dtype=bool)
    if pop.colluders:
        chosen = plan.rng("population", "colluders").choice(n, size=pop.colluders, replace=False)
        colluder[chosen] = True
    return {
        "dataset_size": parts.sizes,
        "label_counts": counts,
        "emd": emd_to_population(counts),
        "privacy_value": pop.privacy_value.sample(n, rng=plan.rng("population", "privacy_value")),
        "epsilon_total": eps_total,
        "delta": delta,
        "epsilon_round": np.asarray(eps_round, dtype=float),
        "delta_round": np.asarray(delta_round, dtype=float),
        "straggle_prob": pop.straggle_prob.sample(n, rng=plan.rng("population", "straggle_prob")),
        "colluder": colluder,
        "behaviour": behaviour_labels,
    }


def build_world(scenario: Scenario, *, plan: SeedPlan) -> World:
    """Load data, partition it, build the batched learner and every plug-in."""
    n = scenario.population.clients
    components = build_components(scenario)
    device = resolve_device(scenario.training.device)
    with _key_prefix("data.dataset"):
        dataset: Dataset = components.dataset.load(rng=plan.rng("data"), num_clients=n)
    with _key_prefix("data.partition"):
        parts = as_shards(
            components.partition.split(
                dataset.y_train, num_clients=n, rng=plan.rng("partition"), groups=dataset.groups
            )
        )
    with _key_prefix("model"):
        module = components.model.build(
            input_shape=dataset.input_shape, num_classes=dataset.num_classes
        )
    params = init_parameters(module, generator=plan.torch_generator("init"))
    learner = BatchedLearner(
        module,
        params=params,
        x_train=dataset.x_train,
        y_train=dataset.y_train,
        x_test=dataset.x_test,
        y_test=dataset.y_test,
        client_indices=parts,
        settings=scenario.training,
        device=device,
    )
    fraction = components.selection.expected_fraction(n)
    participations = max(1, math.ceil(scenario.rounds * fraction))
    index = behaviours.assignment(scenario, rng=plan.rng("population", "behaviour"))
    groups = build_behaviours(scenario, index)
    labels = np.array([g.label for g in groups], dtype=object)[index]
    population = sample_population(
        scenario,
        parts,
        dataset.y_train,
        dataset.num_classes,
        plan=plan,
        privacy=components.privacy,
        participations=participations,
        behaviour_labels=labels,
    )
    graph = components.topology.build(n, rng=plan.rng("topology"))
    components = replace(
        components, behaviours={g.label: g.decision for g in groups if g.params is None}
    )
    return World(
        dataset, parts, learner, population, groups, graph, components, device, participations
    )
