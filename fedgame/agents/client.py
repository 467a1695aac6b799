"""The client agent: a strategic follower with privacy preferences and a privacy budget."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

import mesa

from fedgame.agents.schema import CLIENT_COLUMNS, FIELDS, STATIC_COLUMNS, ClientView
from fedgame.agents.table import ClientTable
from fedgame.views import ClientViews, MarketView, Offer, Response, Responses

if TYPE_CHECKING:
    from mesa.discrete_space import Cell

    from fedgame.model import FedGameModel

__all__ = ["CLIENT_COLUMNS", "BatchedPolicy", "ClientAgent", "behaviour_type"]


class _Column:
    """Attribute backed by the agent's row of its ``ClientTable`` column."""

    def __init__(self, column: str) -> None:
        self.column = column

    def __get__(self, agent: Any, owner: type | None = None) -> Any:
        if agent is None:
            return self
        value = agent.table.columns[self.column][agent.client_id]
        return value.item() if hasattr(value, "item") else value

    def __set__(self, agent: Any, value: Any) -> None:
        agent.table.columns[self.column][agent.client_id] = value
        if self.column in STATIC_COLUMNS:
            agent.table.static_changed()
        else:  # a round's or a state column changed: the row is active this round
            agent.table.touch([agent.client_id])
            agent.table.budget_version += 1  # it may be ε spent: a new budget state


@runtime_checkable
class BatchedPolicy(Protocol):
    """Capability of a client policy: answer for many clients at once (columnar); it may
    return ``(responses, client_metrics)``, the values of its declared ``client_columns``
    (``{column: {id: value}}``), written by the model as the answers are recorded."""

    def respond_all(
        self, offer: Offer, *, clients: ClientViews, market: MarketView
    ) -> Responses | tuple[Responses, Mapping[str, Any]]: ...


class ClientAgent(mesa.Agent):
    """A data owner deciding each round whether to train and at which privacy level.

    State: dataset size |D_i| and label counts (its EMD to the population, QI-DPFL Eq. 11),
    privacy value ν_i (cost per unit of privacy loss), total budget (ε_total, δ) spent by
    composition, straggle probability and colluder flag: every field of
    :mod:`fedgame.agents.schema`, each an attribute backed by this client's row of the model's
    ``ClientTable`` (struct of arrays), so ``agent.epsilon_spent`` and the model's column
    updates see the same numbers.

    Its decision is :meth:`respond`. An agent *type* is a behaviour: the model builds one
    subclass per entry of ``population.behaviours`` (``model.agents_by_type[...]``) whose
    ``policy`` is the scenario's decision-rule plug-in. To give clients a rule of your own,
    subclass ``ClientAgent``, override ``respond`` and register the class as a ``policy``
    plug-in (``fedgame.register("policy", "mine")``); the model then asks each such agent in
    turn. Built-in behaviours whose policy answers for many clients at once (``respond_all``)
    are asked once per type per round instead.

    Utility of a round: reward − ν_i·ε_charged, where ε_charged is the increase of its
    accountant's ε this round (the privacy loss it actually incurred).
    """

    model: FedGameModel
    #: this agent type's label (the ``behaviour`` column of the clients table)
    behaviour: ClassVar[str] = "custom"
    #: the decision-rule plug-in agents of this type consult (a ``ClientPolicy``)
    policy: ClassVar[Any] = None
    #: the validated parameters of a registered ``ClientAgent`` subclass (its ``Config``)
    params: ClassVar[Any] = None
    #: the privacy level ``respond`` chooses (``fedgame.privacy.levels``): ``"default"`` (none:
    #: the mechanism's plan sets it), ``"rho"`` or ``"epsilon"``; a subclass whose responses
    #: name a level says so, and validation checks that the privacy mechanism follows it
    chooses: ClassVar[str] = "default"

    if TYPE_CHECKING:  # the schema's fields are attributes (installed below)

        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, model: FedGameModel, *, client_id: int, table: ClientTable) -> None:
        super().__init__(model)
        self.client_id = client_id
        self.table = table

    @property
    def label_counts(self) -> tuple[int, ...]:
        return tuple(int(v) for v in self.table.label_counts[self.client_id])

    @property
    def response(self) -> Response:
        """This round's move (participation, privacy level, reason)."""
        return self.table.response(self.client_id)

    @property
    def extra(self) -> dict[str, float]:
        """Plug-in metrics reported for this client this round."""
        values = {name: float(col[self.client_id]) for name, col in self.table.extra.items()}
        return {k: v for k, v in values.items() if not math.isnan(v)}

    @property
    def cell(self) -> Cell:
        """This client's cell of the model's ``mesa.discrete_space.Network`` (its topology)."""
        return self.model.network[self.client_id]

    def view(self) -> ClientView:
        """Read-only facts mechanisms may use about this client."""
        return self.table.view(self.client_id)

    def respond(self, offer: Offer, market: MarketView) -> Response:
        """Phase 3: take part or not, and at which privacy level, given the leader's offer.

        The model asks only clients that are reachable and not excluded by the offer.
        """
        if self.policy is None:
            raise NotImplementedError(
                f"{type(self).__name__} has no policy: override respond() or use a registered "
                "policy as its behaviour"
            )
        return self.policy.respond(offer, me=self.view(), market=market)


for _spec in FIELDS:  # one attribute per schema field, backed by the table column
    if _spec.name not in ("client_id", "label_counts", "behaviour"):
        setattr(ClientAgent, _spec.name, _Column(_spec.column))


def type_name(label: str) -> str:
    """``best_response`` -> ``BestResponseClient`` (a valid Python class name)."""
    words = re.split(r"[^0-9A-Za-z]+", label)
    name = "".join(w[:1].upper() + w[1:] for w in words if w) or "Custom"
    return f"{'_' if name[0].isdigit() else ''}{name}Client"


def behaviour_type(label: str, decision: Any, *, params: Any = None) -> type[ClientAgent]:
    """The agent type of one behaviour: a ``ClientAgent`` subclass labelled ``label``.

    ``decision`` is either a policy plug-in instance (the type's agents consult it) or a
    ``ClientAgent`` subclass with its own ``respond`` (then ``params`` is its validated config).
    """
    if isinstance(decision, type) and issubclass(decision, ClientAgent):
        base, attrs = decision, {"behaviour": label, "params": params}
    else:
        base, attrs = ClientAgent, {"behaviour": label, "policy": decision}
    name = type_name(label)
    return type(name, (base,), {**attrs, "__module__": __name__, "__qualname__": name})


def answers_in_batch(agent_type: type[ClientAgent]) -> bool:
    """Whether the model may ask a whole type at once: ``respond`` is the policy's (not
    overridden) and the policy declares ``respond_all``."""
    return agent_type.respond is ClientAgent.respond and isinstance(
        agent_type.policy, BatchedPolicy
    )
