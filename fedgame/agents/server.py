"""The parameter server: the Stackelberg leader that prices, selects and aggregates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import mesa
import numpy as np
import torch

from fedgame.mechanisms.base import (
    Cleared,
    ClearsMarket,
    DrawsMasks,
    Settlement,
    Valuation,
    ValuesContributions,
    settlement_of,
)
from fedgame.mechanisms.metrics import split_metrics
from fedgame.views import ClientView, MarketView, Offer, Response, RoundInfo, Selection

if TYPE_CHECKING:
    from fedgame.agents.table import ClientTable
    from fedgame.model import FedGameModel


def check_candidates(ids: np.ndarray, willing: np.ndarray, *, who: str, round_: int) -> None:
    """A selection names only this round's candidates, the ``willing`` clients (O(K))."""
    inside = (ids >= 0) & (ids < len(willing))
    ok = inside.copy()
    ok[inside] = willing[ids[inside]]
    if not ok.all():
        raise RuntimeError(
            f"{who} chose clients that were not candidates in round {round_}: "
            f"{ids[~ok][:10].tolist()}"
        )


def contribution_valuer(incentive: Any, *, audit: bool) -> ValuesContributions | None:
    """The incentive when it values contributions (``ValuesContributions``); else, with
    ``game.audit_contributions``, a Shapley estimator that values only (never offers or pays;
    its defaults: exact up to 8 senders, else GTG); else None."""
    if isinstance(incentive, ValuesContributions):
        return incentive
    if not audit:
        return None
    from fedgame.mechanisms.incentive.shapley import ShapleyConfig, ShapleyPayments

    return ShapleyPayments(ShapleyConfig.model_validate({}))


class ServerAgent(mesa.Agent):
    """Holds the leader's plug-ins (incentive, selection, aggregation) and their outputs.

    It announces the round's offer, clears an auction, chooses participants among the
    reachable clients that accepted, values and aggregates what arrives and pays for it.
    It keeps the round's offer (with the terms the leader fixed, updated by ``clear``), the
    round's valuation and the :class:`Settlement` the incentive returned (``settlement``:
    the model writes its metrics as phase 9 ends, the economics monitor reads its outcome).
    """

    model: FedGameModel

    def __init__(self, model: FedGameModel, *, incentive: Any, selection: Any, aggregation: Any):
        super().__init__(model)
        self.incentive = incentive
        self.selection_rule = selection
        self.aggregation = aggregation
        #: declared capability, checked once: only a DrawsMasks aggregator gets the masks rng
        self._draws_masks = isinstance(aggregation, DrawsMasks)
        #: what estimates each sender's contribution (:func:`contribution_valuer`), or None
        self.valuer = contribution_valuer(incentive, audit=model.scenario.game.audit_contributions)
        self.offer_made = Offer()
        self.selection = Selection(())
        self.payments: dict[int, float] = {}
        #: the incentive's valuation of this round's senders (phase 8; None: none)
        self.valuation: Valuation | None = None
        #: the round's settlement (phase 9)
        self.settlement = Settlement({})

    def offer(self, market: MarketView, info: RoundInfo) -> Offer:
        """Phase 2: the round's reward and plan (the incentive plug-in's move)."""
        self.offer_made = self.incentive.offer(market, info=info)
        self.valuation = None
        return self.offer_made

    def clear(self, table: ClientTable, info: RoundInfo) -> None:
        """Phase 3, after the answers: an incentive that ``ClearsMarket`` (an auction) picks
        the winners; the other willing clients decline (``not allocated``) and do not train.
        The offer kept is the cleared one (its terms fixed by the clearing)."""
        if not isinstance(self.incentive, ClearsMarket):
            return
        cleared = self.incentive.clear(self.offer_made, table.responses(), info=info)
        if not isinstance(cleared, Cleared):  # a bare array of winners
            cleared = Cleared(np.asarray(cleared, dtype=np.int64), self.offer_made)
        self.offer_made = cleared.offer
        lost = table.participating.copy()
        lost[np.asarray(cleared.winners, dtype=np.int64)] = False
        table.participating[lost] = False
        table.decline_reason[lost] = "not allocated"

    def select(self, table: ClientTable, info: RoundInfo) -> tuple[Selection, dict[str, float]]:
        """Phase 4: the participants among the willing, reachable clients of ``table``, and
        the round metrics the rule measured; ``RuntimeError`` when the rule names a client
        that was not a candidate."""
        candidates = table.views(np.flatnonzero(table.participating))
        rng = self.model.plan.rng("selection", info.round)
        out = self.selection_rule.select(candidates, info=info, rng=rng)
        self.selection, metrics = split_metrics(out)
        ids = np.asarray(self.selection.client_ids, dtype=np.int64)
        rule = f"selection rule {type(self.selection_rule).__name__}"
        check_candidates(ids, table.participating, who=rule, round_=info.round)
        return self.selection, metrics

    def value(
        self, received: torch.Tensor, ids: np.ndarray, table: ClientTable, info: RoundInfo
    ) -> dict[int, float] | None:
        """Phase 8: each sender's estimated contribution (:attr:`valuer`; None without one);
        the incentive's own valuation is kept for its ``settle``."""
        if self.valuer is None:
            return None
        from fedgame.learning.coalitions import CoalitionEvaluator, aggregation_weights

        weights = aggregation_weights(self.aggregation, table.views(ids))
        evaluator = CoalitionEvaluator(self.model.learner, received, weights)
        rng = self.model.plan.rng("contributions", info.round)
        found = self.valuer.value_contributions(evaluator, ids, info=info, rng=rng)
        if found is None:
            return None
        valuation = found if isinstance(found, Valuation) else Valuation(dict(found))
        if self.valuer is self.incentive:
            self.valuation = valuation
        return dict(valuation.contributions)

    def aggregate(
        self,
        updates: torch.Tensor,
        clients: Sequence[ClientView],
        dropped: Sequence[ClientView],
        info: RoundInfo,
    ) -> tuple[torch.Tensor | None, dict[str, float]]:
        """Phase 8: one update from the received rows (None: the aggregation failed), and the
        round metrics the aggregator measured. A ``DrawsMasks`` aggregator also gets the
        round's masks stream and fault draw."""
        if not self._draws_masks:
            return split_metrics(
                self.aggregation.aggregate(updates, clients=clients, dropped=dropped)
            )
        rng = self.model.plan.rng("masks", info.round)
        out = self.aggregation.aggregate(
            updates, clients=clients, dropped=dropped, rng=rng, faults=self.model.state.faults
        )
        return split_metrics(out)

    def pay(self, delivered: Sequence[Response], info: RoundInfo) -> dict[int, float]:
        """Phase 9: payments for the delivered updates, by the incentive's rule (an incentive
        that values contributions is handed the round's valuation); the settlement is kept."""
        settle = self.incentive.settle
        if isinstance(self.incentive, ValuesContributions):
            out = settle(self.offer_made, delivered, info=info, valuation=self.valuation)
        else:
            out = settle(self.offer_made, delivered, info=info)
        self.settlement = settlement_of(out, self.offer_made)
        self.payments = dict(self.settlement.payments)
        return self.payments
