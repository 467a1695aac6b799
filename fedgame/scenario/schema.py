"""The scenario schema: what a scenario file may say, with defaults.

Components (dataset, partition, model, incentive, policy, selection, privacy, aggregation,
topology, faults) are written ``{kind: NAME, ...params}``; ``kind`` picks a registered plug-in
and its params are validated against that plug-in's own ``Config`` by
:func:`fedgame.scenario.load.resolve_components`. A bare string is shorthand for ``{kind: NAME}``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    NonNegativeInt,
    PositiveInt,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from fedgame.agents.population import Constant, Distribution, coerce_distribution
from fedgame.game.rules import GameRules
from fedgame.learning.settings import TrainingSettings
from fedgame.market.spec import MarketRules, ServerSpec

NAME = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,99}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Component(BaseModel):
    """``{kind: NAME, ...params}``: a plug-in chosen by name; params checked by the plug-in."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str = Field(description="the plug-in's name (fedgame list FAMILY)")

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _component(kind: str, *, description: str = "", **params: Any) -> Any:
    return Field(
        default_factory=lambda: Component(kind=kind, **params), description=description or None
    )


class Budget(_Strict):
    """Each client's total privacy budget (ε_total, δ)."""

    epsilon: Distribution = Field(
        default_factory=lambda: Constant(value=10.0),
        description="ε_total, each client's privacy budget for the whole run",
    )
    delta: Distribution = Field(
        default_factory=lambda: Constant(value=1e-5),
        description="δ_total, each client's δ for the whole run, at which ε spent is reported",
    )

    _coerce = field_validator("epsilon", "delta", mode="before")(
        classmethod(lambda cls, v: coerce_distribution(v))
    )


class Behaviour(Component):
    """One behaviour of a mixed population: a ``policy`` plug-in (``kind`` and its parameters)
    followed by a ``share`` of the clients (or by the clients ``population.assign`` gives it).
    ``name`` labels its agent type (default: the kind, numbered when a kind repeats)."""

    kind: str = Field(description="the policy plug-in it follows (fedgame list policy)")
    share: float | None = Field(
        default=None,
        gt=0.0,
        le=1.0,
        description="share of the clients that follow this behaviour (or use population.assign)",
    )
    name: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="label of its agent type (default: the kind, numbered when a kind repeats)",
    )


class Population(_Strict):
    """The clients: how many, and distributions of their economic and privacy attributes.

    ``behaviours`` mixes decision rules (each one a Mesa agent type); without it every client
    follows the scenario's ``policy``. ``assign`` lists each client's behaviour index instead
    of shares.
    """

    clients: PositiveInt = Field(default=50, description="number of clients N")
    behaviours: list[Behaviour] = Field(
        default_factory=list,
        description="a mix of client policies, each a Mesa agent type: [{kind: POLICY, share: "
        "0.6, ...}, ...] (empty: every client follows the scenario's policy)",
    )
    assign: list[int] | None = Field(
        default=None,
        description="each client's behaviour (an index into behaviours, one per client), "
        "instead of shares",
    )
    privacy_value: Distribution = Field(
        default_factory=lambda: Constant(value=1.0),
        description="ν_i, each client's cost per unit of privacy loss",
    )
    budget: Budget = Field(default_factory=Budget, description="each client's privacy budget")
    straggle_prob: Distribution = Field(
        default_factory=lambda: Constant(value=0.0),
        description="each client's chance to miss the upload deadline in a round",
    )
    colluders: NonNegativeInt = Field(
        default=0,
        description="number of clients, drawn at random, that share their noise with the server",
    )

    _coerce = field_validator("privacy_value", "straggle_prob", mode="before")(
        classmethod(lambda cls, v: coerce_distribution(v))
    )


class Data(_Strict):
    """Dataset and how it is split across clients."""

    dataset: Component = _component("digits", description="the dataset (a dataset plug-in)")
    partition: Component = _component(
        "iid", description="how the training set is split across clients (a partition plug-in)"
    )


class Network(_Strict):
    """Client-client topology and the per-round fault model."""

    topology: Component = _component(
        "star", description="the client-client graph (a topology plug-in)"
    )
    faults: Component = _component(
        "independent", description="each round's failed links and stragglers (a faults plug-in)"
    )


class Output(_Strict):
    """Where results go: ``<dir>/<scenario name>/<run-id>/`` (checked writable before a run).

    ``clients``: rows of the clients table: ``all`` (every client, every round), ``active``
    (each round's selected, charged, paid or plug-in-reported clients), ``none``; ``auto``
    is ``all`` up to 2,000,000 client rows (clients x rounds), else ``active``
    (:func:`fedgame.scenario.output.clients_table_mode`). The rounds table is always written.
    """

    dir: str = Field(
        default="results",
        min_length=1,
        max_length=4096,
        description="results folder: a run goes to <dir>/<name>/<run-id>/, a sweep to "
        "<dir>/<name>/sweep-<id>/",
    )
    clients: Literal["auto", "all", "active", "none"] = Field(
        default="auto",
        description="rows of clients.parquet: all (every client every round), active (the "
        "clients each round touched), none; auto: all up to 2,000,000 rows, else active",
    )

    @field_validator("dir")
    @classmethod
    def _plain_path(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("a folder path without NUL characters")
        return value


class Sweep(_Strict):
    """Grid over dotted scenario keys times replicates (used by ``fedgame sweep``)."""

    grid: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="dotted scenario key -> list of values; fedgame sweep runs every "
        "combination (--grid adds to it)",
    )
    replicates: PositiveInt = Field(
        default=1, description="runs per grid point, each an independent seed stream of seed"
    )
    gpus_per_run: float = Field(
        default=1.0,
        gt=0.0,
        le=8.0,
        description="GPUs a Ray task asks for when its run trains on CUDA, in (0, 8] (a "
        "fraction shares a GPU between runs); CPU runs ask for none",
    )
    workers_per_gpu: PositiveInt = Field(
        default=1,
        le=64,
        description="local executor workers per visible GPU when the runs train on CUDA, "
        "1..64 (each worker sees only its GPU through CUDA_VISIBLE_DEVICES)",
    )
    batch_runs: PositiveInt = Field(
        default=16,
        le=4096,
        description="batched executor: at most this many runs a worker steps in lockstep "
        "(and holds in memory) at once, 1..4096",
    )


class Scenario(_Strict):
    """A complete, validated scenario."""

    #: one safe path segment: letters, digits, ``_ . -``, not starting with a dot (so never
    #: ``.`` or ``..``), at most 100 characters; results go to ``<output.dir>/<name>/``
    name: str = Field(
        default="scenario",
        description="names the results folder <output.dir>/<name>/: 1-100 letters, digits, "
        "'_', '-' or '.', not starting with '.'",
    )
    description: str = Field(
        default="", description="one line about the scenario (fedgame scenarios shows it)"
    )
    #: modules to import before the components are looked up (a user's own plug-ins; see
    #: :mod:`fedgame.plugins`), in the main process and in every sweep worker; they are code,
    #: imported only when trusted (:mod:`fedgame.trust`) and only once every other key of
    #: the schema has validated (:func:`fedgame.scenario.load.validate`)
    plugins: list[str] = Field(
        default_factory=list,
        description="modules to import before plug-ins are looked up (your own plug-ins), "
        "here and in every sweep worker; imported only when trusted (--trust-plugins)",
    )
    seed: NonNegativeInt = Field(
        default=0,
        description="the seed of every random stream (data, partition, faults, noise, ...)",
    )
    rounds: PositiveInt = Field(default=30, description="federated rounds (one Mesa step each)")
    population: Population = Field(default_factory=Population)
    data: Data = Field(default_factory=Data)
    model: Component = _component("logreg", description="the model trained (a model plug-in)")
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    incentive: Component = _component(
        "none", description="the leader's incentive: what it offers and pays each round"
    )
    policy: Component = _component(
        "always",
        description="how clients decide to take part and at what privacy level (every client "
        "unless population.behaviours mixes several)",
    )
    selection: Component = _component(
        "uniform",
        description="how the server picks the round's clients among the willing, reachable ones",
        k=10,
    )
    privacy: Component = _component(
        "none", description="the privacy mechanism: clipping, noise and their accounting"
    )
    aggregation: Component = _component(
        "fedavg", description="how the server combines the updates it received"
    )
    network: Network = Field(default_factory=Network)
    game: GameRules = Field(
        default_factory=GameRules,
        description="rules of the game every plug-in sees: who knows what, cartels, and when "
        "a round counts as degenerate",
    )
    output: Output = Field(default_factory=Output)
    sweep: Sweep = Field(default_factory=Sweep)
    servers: list[ServerSpec] = Field(
        default_factory=list,
        description="competing servers, each {name, and any of data, model, training, "
        "incentive, selection, aggregation, privacy}; empty: the one-server game",
    )
    market: MarketRules = Field(
        default_factory=MarketRules, description="how competing servers play (with servers:)"
    )

    _configs: dict[str, BaseModel] = PrivateAttr(default_factory=dict)
    _behaviours: tuple[Any, ...] = PrivateAttr(default=())

    @model_serializer(mode="wrap")
    def _one_server_dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """Without ``servers`` the dump is the one-server scenario's, key for key (run ids,
        sweep ids and resolved files of one-server scenarios do not change)."""
        data = handler(self)
        if not self.servers:
            data.pop("servers", None)
            data.pop("market", None)
        return data

    @field_validator("name")
    @classmethod
    def _one_path_segment(cls, value: str) -> str:
        if not NAME.fullmatch(value):
            raise ValueError(
                "a name of 1-100 letters, digits, '_', '-' or '.', not starting with '.' "
                "(it names the results folder)"
            )
        return value

    @field_validator("plugins")
    @classmethod
    def _module_names(cls, value: list[str]) -> list[str]:
        from fedgame.plugins import check_module_names

        return check_module_names(value)

    def config(self, path: str) -> Any:
        """The validated plug-in config at dotted ``path`` (e.g. ``"selection"``)."""
        return self._configs[path]

    def behaviours(self) -> tuple[Any, ...]:
        """The resolved behaviours (``fedgame.scenario.behaviours.BehaviourSpec``)."""
        return self._behaviours

    def component(self, path: str) -> Component:
        """The ``Component`` at dotted ``path``."""
        node: Any = self
        for part in path.split("."):
            node = getattr(node, part)
        return node


#: dotted path of every component in the schema -> registry family
COMPONENT_FAMILIES: dict[str, str] = {
    "data.dataset": "dataset",
    "data.partition": "partition",
    "model": "model",
    "incentive": "incentive",
    "policy": "policy",
    "selection": "selection",
    "privacy": "privacy",
    "aggregation": "aggregation",
    "network.topology": "topology",
    "network.faults": "faults",
}
