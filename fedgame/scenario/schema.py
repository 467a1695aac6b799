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
    field_validator,
    model_validator,
)

from fedgame.agents.population import Constant, Distribution, coerce_distribution
from fedgame.game.rules import GameRules
from fedgame.learning.settings import TrainingSettings

NAME = re.compile(r"[A-Za-z0-9_\-][A-Za-z0-9_.\-]{0,99}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Component(BaseModel):
    """``{kind: NAME, ...params}``: a plug-in chosen by name; params checked by the plug-in."""

    model_config = ConfigDict(extra="allow", frozen=True)
    kind: str

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"kind": value} if isinstance(value, str) else value

    @property
    def params(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _component(kind: str, **params: Any) -> Any:
    return Field(default_factory=lambda: Component(kind=kind, **params))


class Budget(_Strict):
    """Each client's total privacy budget (ε_total, δ)."""

    epsilon: Distribution = Field(default_factory=lambda: Constant(value=10.0))
    delta: Distribution = Field(default_factory=lambda: Constant(value=1e-5))

    _coerce = field_validator("epsilon", "delta", mode="before")(
        classmethod(lambda cls, v: coerce_distribution(v))
    )


class Behaviour(Component):
    """One behaviour of a mixed population: a ``policy`` plug-in (``kind`` and its parameters)
    followed by a ``share`` of the clients (or by the clients ``population.assign`` gives it).
    ``name`` labels its agent type (default: the kind, numbered when a kind repeats)."""

    share: float | None = Field(None, gt=0.0, le=1.0)
    name: str | None = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")


class Population(_Strict):
    """The clients: how many, and distributions of their economic and privacy attributes.

    ``behaviours`` mixes decision rules (each one a Mesa agent type); without it every client
    follows the scenario's ``policy``. ``assign`` lists each client's behaviour index instead
    of shares.
    """

    clients: PositiveInt = 50
    behaviours: list[Behaviour] = Field(default_factory=list)
    assign: list[int] | None = None
    privacy_value: Distribution = Field(default_factory=lambda: Constant(value=1.0))
    budget: Budget = Field(default_factory=Budget)
    straggle_prob: Distribution = Field(default_factory=lambda: Constant(value=0.0))
    colluders: NonNegativeInt = 0

    _coerce = field_validator("privacy_value", "straggle_prob", mode="before")(
        classmethod(lambda cls, v: coerce_distribution(v))
    )


class Data(_Strict):
    """Dataset and how it is split across clients."""

    dataset: Component = _component("digits")
    partition: Component = _component("iid")


class Network(_Strict):
    """Client-client topology and the per-round fault model."""

    topology: Component = _component("star")
    faults: Component = _component("independent")


class Output(_Strict):
    """Where results go: ``<dir>/<scenario name>/<run-id>/`` (checked writable before a run).

    ``clients``: rows of the clients table: ``all`` (every client, every round), ``active``
    (each round's selected, charged, paid or plug-in-reported clients), ``none``; ``auto``
    is ``all`` up to 2,000,000 client rows (clients x rounds), else ``active``
    (:func:`fedgame.scenario.output.clients_table_mode`). The rounds table is always written.
    """

    dir: str = Field(default="results", min_length=1, max_length=4096)
    clients: Literal["auto", "all", "active", "none"] = "auto"

    @field_validator("dir")
    @classmethod
    def _plain_path(cls, value: str) -> str:
        if "\x00" in value:
            raise ValueError("a folder path without NUL characters")
        return value


class Sweep(_Strict):
    """Grid over dotted scenario keys times replicates (used by ``fedgame sweep``)."""

    grid: dict[str, list[Any]] = Field(default_factory=dict)
    replicates: PositiveInt = 1
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


class Scenario(_Strict):
    """A complete, validated scenario."""

    #: one safe path segment: letters, digits, ``_ . -``, not starting with a dot (so never
    #: ``.`` or ``..``), at most 100 characters; results go to ``<output.dir>/<name>/``
    name: str = "scenario"
    description: str = ""
    #: modules to import before the components are looked up (a user's own plug-ins; see
    #: :mod:`fedgame.plugins`), in the main process and in every sweep worker; they are code,
    #: imported only when trusted (:mod:`fedgame.trust`) and only once every other key of
    #: the schema has validated (:func:`fedgame.scenario.load.validate`)
    plugins: list[str] = Field(default_factory=list)
    seed: NonNegativeInt = 0
    rounds: PositiveInt = 30
    population: Population = Field(default_factory=Population)
    data: Data = Field(default_factory=Data)
    model: Component = _component("logreg")
    training: TrainingSettings = Field(default_factory=TrainingSettings)
    incentive: Component = _component("none")
    policy: Component = _component("always")
    selection: Component = _component("uniform", k=10)
    privacy: Component = _component("none")
    aggregation: Component = _component("fedavg")
    network: Network = Field(default_factory=Network)
    game: GameRules = Field(default_factory=GameRules)
    output: Output = Field(default_factory=Output)
    sweep: Sweep = Field(default_factory=Sweep)

    _configs: dict[str, BaseModel] = PrivateAttr(default_factory=dict)
    _behaviours: tuple[Any, ...] = PrivateAttr(default=())

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
