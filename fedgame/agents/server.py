"""The parameter server: the Stackelberg leader that prices, selects and aggregates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mesa
import torch

from fedgame.mechanisms.base import DrawsMasks
from fedgame.views import ClientView, MarketView, Offer, Response, RoundInfo, Selection

if TYPE_CHECKING:
    from fedgame.model import FedGameModel


class ServerAgent(mesa.Agent):
    """Holds the leader's plug-ins (incentive, selection, aggregation) and their outputs.

    It announces the round's offer, chooses participants among the reachable clients that
    accepted, aggregates what arrives and pays for it.
    """

    model: FedGameModel

    def __init__(self, model: FedGameModel, *, incentive: Any, selection: Any, aggregation: Any):
        super().__init__(model)
        self.incentive = incentive
        self.selection_rule = selection
        self.aggregation = aggregation
        #: declared capability, checked once: only a DrawsMasks aggregator gets the masks rng
        self._draws_masks = isinstance(aggregation, DrawsMasks)
        self.offer_made = Offer()
        self.selection = Selection(())
        self.payments: dict[int, float] = {}

    def offer(self, market: MarketView, info: RoundInfo) -> Offer:
        """Phase 2: the round's reward and plan (the incentive plug-in's move)."""
        self.offer_made = self.incentive.offer(market, info=info)
        return self.offer_made

    def select(self, candidates: Sequence[ClientView], info: RoundInfo) -> Selection:
        """Phase 4: the participants among the willing, reachable ``candidates``."""
        rng = self.model.plan.rng("selection", info.round)
        self.selection = self.selection_rule.select(candidates, info=info, rng=rng)
        return self.selection

    def aggregate(
        self,
        updates: torch.Tensor,
        clients: Sequence[ClientView],
        dropped: Sequence[ClientView],
        info: RoundInfo,
    ) -> torch.Tensor | None:
        """Phase 8: one update from the received rows (None: the aggregation failed)."""
        rng = self.model.plan.rng("masks", info.round) if self._draws_masks else None
        return self.aggregation.aggregate(updates, clients=clients, dropped=dropped, rng=rng)

    def pay(self, delivered: Sequence[Response], info: RoundInfo) -> dict[int, float]:
        """Phase 9: payments for the delivered updates, by the incentive's rule."""
        self.payments = self.incentive.settle(self.offer_made, delivered, info=info)
        return self.payments
