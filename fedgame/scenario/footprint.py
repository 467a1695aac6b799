"""Memory a run will need, estimated from the validated scenario before anything is built.

The estimate is a sum of terms, each tied to the scenario key that drives it, so a refusal can
name the key to change. Sizes come from the plug-ins without loading or allocating anything:
the dataset's :class:`~fedgame.data.datasets.DataFootprint` (a ``SizedDataset`` reads only
file headers), the model's :class:`~fedgame.learning.model_size.ModelSize` (a ``SizedModel``
states it from its architecture without torch; any other model plug-in builds its skeleton on
torch's ``meta`` device: parameter count, activation widths from :func:`layer_widths`), the
topology's ``expected_edges`` (:class:`~fedgame.network.topology.ExpectsEdges`), the selection's
``k`` (:class:`~fedgame.mechanisms.base.SelectsK`). The constants below were measured on the CPU
build; ``python bench/memory_estimate.py`` prints the estimate beside the peak memory of real
runs (the quickstart: 524 MiB estimated, 499 MiB measured):

* each client costs about 3 KB to set up (agent, table row, data indices):
  :data:`PER_CLIENT_BYTES`;
* the clients table holds one row per client per round until the run ends (``output.clients:
  all``; ``active`` keeps about the trained clients' rows, every player's under an
  incentive; ``none`` none), and writing it makes two more copies (one table, one Parquet
  buffer): :data:`CLIENT_VALUE_BYTES` per value;
* a training step keeps about :data:`LEARNER_COPIES` ``[K, P]`` tensors (parameters,
  gradients, noise, updates) for the K clients trained at once;
* the interpreter and libraries take :data:`BASE_BYTES` (a quickstart run peaks at 499 MiB).

Terms are upper-bound-leaning approximations, not a guarantee; the refusal they drive is meant
for scenarios that cannot fit (10^7 clients, a 10^7-unit hidden layer, 10^12 rounds), not for
fine-tuning a borderline run.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any

import fedgame.registry as registry
from fedgame.agents.table import CLIENT_COLUMNS
from fedgame.data.datasets import DataFootprint, SizedDataset
from fedgame.errors import ScenarioError
from fedgame.learning.model_size import BuildsModel, ModelSize, SizedModel
from fedgame.mechanisms.base import SelectsK
from fedgame.network.topology import BYTES_PER_EDGE, ExpectsEdges
from fedgame.scenario.output import clients_table_mode
from fedgame.scenario.schema import Scenario

BASE_BYTES = 512 << 20
PER_CLIENT_BYTES = 4096
CLIENT_VALUE_BYTES = 8 * 3
#: columns plug-ins typically add to the clients table
PLUGIN_CLIENT_COLUMNS = 10
ROUND_ROW_BYTES = 4096
LEARNER_COPIES = 6
#: elements the batched learner holds at once per gradient chunk (``learning/batched.py``)
CHUNK_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class Term:
    """One part of the estimate: ``bytes`` driven by scenario key ``key`` (value ``value``);
    ``hint`` says how to make it smaller."""

    what: str
    key: str
    value: Any
    bytes: int
    hint: str = ""


@dataclass(frozen=True)
class Footprint:
    """The estimate: :data:`BASE_BYTES` plus the terms."""

    terms: tuple[Term, ...]
    data: DataFootprint | None
    model: ModelSize | None

    @property
    def total(self) -> int:
        return BASE_BYTES + sum(t.bytes for t in self.terms)

    def largest(self) -> Term:
        return max(self.terms, key=lambda t: t.bytes)

    def describe(self, *, top: int = 3) -> str:
        """``"3.1 GiB (clients table 2.0 GiB, model 800 MiB, ...)"``."""
        parts = sorted(self.terms, key=lambda t: -t.bytes)[:top]
        inner = ", ".join(f"{t.what} {human_bytes(t.bytes)}" for t in parts if t.bytes)
        return f"{human_bytes(self.total)} ({inner})" if inner else human_bytes(self.total)


def human_bytes(n: float) -> str:
    """``1536 -> "1.5 KiB"`` (binary units up to EiB; larger sizes in powers of ten)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if abs(n) < 1024 or unit == "EiB":
            break
        n /= 1024
    if n >= 1024:
        return f"{n * 2**60:.2e} B"
    return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"


def estimate(scenario: Scenario) -> Footprint:
    """Estimate the run's memory; raises ``ScenarioError`` when the data or model cannot be
    built (missing dataset files, a model that does not fit the data's shape)."""
    pop, train = scenario.population, scenario.training
    n, rounds = pop.clients, scenario.rounds
    data = dataset_footprint(scenario)
    model = model_size(scenario, data) if data is not None else None
    k = trained_per_round(scenario)
    terms = [
        Term("population", "population.clients", n, n * PER_CLIENT_BYTES, "fewer clients"),
        Term(
            "clients table",
            "rounds",
            rounds,
            rounds
            * _client_rows(scenario, k)
            * (len(CLIENT_COLUMNS) + PLUGIN_CLIENT_COLUMNS)
            * CLIENT_VALUE_BYTES
            + rounds * ROUND_ROW_BYTES,
            "fewer rounds or clients, or output.clients: active (the clients table has one "
            "row per client per round)",
        ),
        Term(
            "selection plan",
            "selection",
            scenario.selection.kind,
            rounds * k * 16,
            "fewer rounds or a smaller selection.k",
        ),
        _topology_term(scenario),
    ]
    if data is not None:
        terms.append(
            Term(
                "data",
                "data.dataset",
                scenario.data.dataset.kind,
                max(data.load_bytes, data.resident_bytes) + 16 * max(data.num_train, n),
                "a smaller dataset (max_train, num_samples, fewer clients for generated data)",
            )
        )
    if data is not None and model is not None:
        per_client = train.local_steps * train.batch_size
        if train.mode == "fedsgd":
            per_client = 4 * math.ceil(data.num_train / n)
        width = max(1, math.prod(data.input_shape))
        chunk = min(per_client, max(1, CHUNK_ELEMENTS // (k * width)))
        p = model.num_params
        terms += [
            Term(
                "model",
                "model",
                f"{scenario.model.kind} with {p} parameters",
                4 * p * (LEARNER_COPIES * k + 4) + 12 * k * chunk * model.activations,
                "a smaller model or fewer clients trained per round (selection.k)",
            ),
            Term(
                "batches",
                "training.batch_size",
                train.batch_size,
                24 * k * per_client,
                "a smaller training.batch_size or fewer training.local_steps",
            ),
            Term(
                "evaluation",
                "training.eval_batch_size",
                train.eval_batch_size,
                8 * min(train.eval_batch_size, max(data.num_test, 1)) * model.activations,
                "a smaller training.eval_batch_size",
            ),
        ]
    return Footprint(tuple(terms), data, model)


def _client_rows(scenario: Scenario, k: int) -> int:
    """Clients-table rows a round keeps (``output.clients``, resolved as the collector does):
    every client (``all``), none, or the round's active clients: about the trained ones
    (selected, charged, paid; 4k leaves room for plug-ins that report on a few more; a
    column given for every client as ``ClientValues`` does not count), and every client
    when an incentive prices each player (its per-client columns)."""
    n = scenario.population.clients
    mode = clients_table_mode(scenario)
    if mode == "none":
        return 0
    if mode == "active" and scenario.incentive.kind == "none":
        return min(n, 4 * k)
    return n


def trained_per_round(scenario: Scenario) -> int:
    """Clients trained at once: the selection's ``k`` when it declares one, else everyone."""
    n = scenario.population.clients
    config = scenario.config("selection")
    k = config.k if isinstance(config, SelectsK) else None
    return max(1, min(k, n)) if isinstance(k, int) and not isinstance(k, bool) else n


def _topology_term(scenario: Scenario) -> Term:
    kind = scenario.network.topology.kind
    topology = registry.create("topology", kind, scenario.config("network.topology"))
    edges = 0.0
    if isinstance(topology, ExpectsEdges):
        edges = topology.expected_edges(scenario.population.clients)
    return Term(
        "topology", "network.topology", kind, int(edges * BYTES_PER_EDGE), "a sparser topology"
    )


def dataset_footprint(scenario: Scenario) -> DataFootprint | None:
    """The dataset's footprint (None for a plug-in that cannot state one)."""
    comp = scenario.data.dataset
    config = scenario.config("data.dataset")
    try:
        return _dataset_footprint(comp.kind, config.model_dump_json(), scenario.population.clients)
    except ScenarioError as err:
        raise err.with_prefix("data.dataset") from None


@functools.lru_cache(maxsize=64)
def _dataset_footprint(kind: str, config_json: str, num_clients: int) -> DataFootprint | None:
    dataset = registry.create("dataset", kind, json.loads(config_json))
    if not isinstance(dataset, SizedDataset):
        return None
    return dataset.footprint(num_clients=num_clients)


def model_size(scenario: Scenario, data: DataFootprint) -> ModelSize | None:
    """Parameters and activation widths of the scenario's model for ``data``'s samples."""
    comp, config = scenario.model, scenario.config("model")
    try:
        return _model_size(comp.kind, config.model_dump_json(), data.input_shape, data.num_classes)
    except ScenarioError as err:
        raise err.with_prefix("model") from None


@functools.lru_cache(maxsize=64)
def _model_size(
    kind: str, config_json: str, input_shape: tuple[int, ...], num_classes: int
) -> ModelSize | None:
    plugin = registry.create("model", kind, json.loads(config_json))
    if isinstance(plugin, SizedModel):
        return plugin.size(input_shape=input_shape, num_classes=num_classes)
    if not isinstance(plugin, BuildsModel):
        return None
    module = plugin.build(input_shape=input_shape, num_classes=num_classes)
    params = sum(p.numel() for p in module.parameters())
    widths = layer_widths(module, input_shape)
    return ModelSize(int(params), int(sum(widths)), int(max(widths, default=1)))


def layer_widths(module: Any, input_shape: tuple[int, ...]) -> list[int]:
    """Per-sample output size of each leaf layer, in order, without running the model.

    A linear layer gives ``out_features``; a convolution ``out_channels`` times the current
    spatial size (``same`` padding assumed, an upper bound otherwise); pooling divides the
    spatial size by its kernel area; any other layer keeps the previous width. (Running the
    skeleton on torch's ``meta`` device would be exact but imports torch's decompositions,
    seconds of start-up for a check meant to be instant.)
    """
    spatial = math.prod(input_shape[1:]) if len(input_shape) > 1 else 1
    width = math.prod(input_shape)
    widths = []
    for layer in module.modules():
        if list(layer.children()):
            continue
        if hasattr(layer, "out_features"):
            width = int(layer.out_features)
        elif hasattr(layer, "out_channels"):
            width = int(layer.out_channels) * spatial
        elif "Pool" in type(layer).__name__ and hasattr(layer, "kernel_size"):
            k = layer.kernel_size
            area = math.prod(k) if isinstance(k, tuple) else int(k) ** max(len(input_shape) - 1, 1)
            spatial = max(1, spatial // max(area, 1))
            width = max(1, width // max(area, 1))
        widths.append(width)
    return widths
