"""Turn a validated ``Scenario`` into the parts a ``FedGameModel`` runs: data, learner, plug-ins.

Every random draw comes from the run's ``SeedPlan`` by stream name, so the same scenario and
seed rebuild the same world.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import torch

from fedgame import registry
from fedgame.data.datasets import Dataset
from fedgame.data.quality import emd_to_population, label_counts
from fedgame.errors import ScenarioError
from fedgame.learning.batched import BatchedLearner
from fedgame.learning.batched import resolve_device as learner_device
from fedgame.learning.models import init_parameters
from fedgame.scenario.schema import Scenario
from fedgame.seeding import SeedPlan


@dataclass
class Population:
    """Per-client attribute arrays, indexed by client id."""

    dataset_size: np.ndarray
    label_counts: np.ndarray
    emd: np.ndarray
    privacy_value: np.ndarray
    epsilon_total: np.ndarray
    delta: np.ndarray
    epsilon_round: np.ndarray
    delta_round: np.ndarray
    straggle_prob: np.ndarray
    colluder: np.ndarray


@dataclass
class World:
    """Everything a run needs besides the agents."""

    dataset: Dataset
    parts: list[np.ndarray]
    learner: BatchedLearner
    population: Population
    graph: nx.Graph
    components: dict[str, Any]
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
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU is a scenario error."""
    if name == "cuda" and not torch.cuda.is_available():
        raise ScenarioError("training.device", name, "CUDA is not available here; use auto or cpu")
    return learner_device(name)


def build_components(scenario: Scenario) -> dict[str, Any]:
    """Instantiate every plug-in named in the scenario."""
    from fedgame.scenario.schema import COMPONENT_FAMILIES

    return {
        path: registry.create(family, scenario.component(path).kind, scenario.config(path))
        for path, family in COMPONENT_FAMILIES.items()
    }


def sample_population(
    scenario: Scenario,
    parts: list[np.ndarray],
    labels: np.ndarray,
    num_classes: int,
    *,
    plan: SeedPlan,
    privacy: Any,
    participations: int,
) -> Population:
    """Draw each client's economic and privacy attributes from the scenario's distributions."""
    pop = scenario.population
    n = pop.clients
    counts = label_counts(labels, parts, num_classes)
    eps_total = pop.budget.epsilon.sample(n, rng=plan.rng("population", "epsilon"))
    delta = pop.budget.delta.sample(n, rng=plan.rng("population", "delta"))
    eps_round, delta_round = privacy.epsilon_per_round(
        eps_total, delta, participations=participations
    )
    colluder = np.zeros(n, dtype=bool)
    if pop.colluders:
        chosen = plan.rng("population", "colluders").choice(n, size=pop.colluders, replace=False)
        colluder[chosen] = True
    return Population(
        dataset_size=np.array([len(p) for p in parts], dtype=np.int64),
        label_counts=counts,
        emd=emd_to_population(counts),
        privacy_value=pop.privacy_value.sample(n, rng=plan.rng("population", "privacy_value")),
        epsilon_total=eps_total,
        delta=delta,
        epsilon_round=np.asarray(eps_round, dtype=float),
        delta_round=np.asarray(delta_round, dtype=float),
        straggle_prob=pop.straggle_prob.sample(n, rng=plan.rng("population", "straggle_prob")),
        colluder=colluder,
    )


def build_world(scenario: Scenario, *, plan: SeedPlan) -> World:
    """Load data, partition it, build the batched learner and every plug-in."""
    n = scenario.population.clients
    components = build_components(scenario)
    device = resolve_device(scenario.training.device)
    with _key_prefix("data.dataset"):
        dataset: Dataset = components["data.dataset"].load(rng=plan.rng("data"), num_clients=n)
    with _key_prefix("data.partition"):
        parts = components["data.partition"].split(
            dataset.y_train, num_clients=n, rng=plan.rng("partition"), groups=dataset.groups
        )
    with _key_prefix("model"):
        module = components["model"].build(
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
    fraction = components["selection"].expected_fraction(n)
    participations = max(1, math.ceil(scenario.rounds * fraction))
    population = sample_population(
        scenario,
        parts,
        dataset.y_train,
        dataset.num_classes,
        plan=plan,
        privacy=components["privacy"],
        participations=participations,
    )
    graph = components["network.topology"].build(n, rng=plan.rng("topology"))
    return World(dataset, parts, learner, population, graph, components, device, participations)
