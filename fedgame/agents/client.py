"""The client agent: a strategic follower with privacy preferences and a privacy budget."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import mesa

from fedgame.agents.table import CLIENT_COLUMNS, STATIC_COLUMNS, ClientTable
from fedgame.views import ClientView, MarketView, Offer, Response, Responses

if TYPE_CHECKING:
    from fedgame.model import FedGameModel

__all__ = ["CLIENT_COLUMNS", "ClientAgent"]


class _Column:
    """Attribute backed by the agent's row of its ``ClientTable`` column."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, agent: Any, owner: type | None = None) -> Any:
        if agent is None:
            return self
        value = getattr(agent.table, self.name)[agent.client_id]
        return value.item() if hasattr(value, "item") else value

    def __set__(self, agent: Any, value: Any) -> None:
        getattr(agent.table, self.name)[agent.client_id] = value
        agent.table.invalidate(agent.client_id)
        if self.name in STATIC_COLUMNS:
            agent.table.static_changed()


class ClientAgent(mesa.Agent):
    """A data owner deciding each round whether to train and at which privacy level.

    State: dataset size |D_i| and label counts (its EMD to the population, QI-DPFL Eq. 11),
    privacy value ν_i (cost per unit of privacy loss), total budget (ε_total, δ) spent by
    composition, straggle probability and colluder flag. Its decision rule is the scenario's
    ``policy`` plug-in; the agent only stores state and applies outcomes.

    Every attribute is this client's row of the model's ``ClientTable`` (struct of arrays),
    so reading ``agent.epsilon_spent`` and the model's column updates see the same numbers.

    Utility of a round: reward − ν_i·ε_charged, where ε_charged is the increase of its
    accountant's ε this round (the privacy loss it actually incurred).
    """

    model: FedGameModel

    dataset_size = _Column()
    emd = _Column()
    privacy_value = _Column()
    epsilon_total = _Column()
    delta = _Column()
    epsilon_round = _Column()
    delta_round = _Column()
    straggle_prob = _Column()
    colluder = _Column()
    epsilon_spent = _Column()
    epsilon_after_next = _Column()
    participations = _Column()
    link_up = _Column()
    participating = _Column()
    decline_reason = _Column()
    selected = _Column()
    straggled = _Column()
    uploaded = _Column()
    noise_std = _Column()
    epsilon_charged = _Column()
    train_loss = _Column()
    reward = _Column()
    utility = _Column()

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

    def view(self) -> ClientView:
        """Read-only facts mechanisms may use (cached while the client's state is unchanged)."""
        return self.table.view(self.client_id)

    def respond(self, offer: Offer, market: MarketView) -> Response:
        """Phase 3 for this client alone, by the scenario's policy (the model batches it)."""
        if not self.link_up:
            response = Response(self.client_id, participate=False, reason="unreachable")
        elif self.client_id in offer.excluded:
            response = Response(self.client_id, participate=False, reason="excluded")
        else:
            response = self.model.policy.respond(offer, me=self.view(), market=market)
        self.table.record_responses(Responses.of([response]))
        return response
