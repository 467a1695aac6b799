"""Procurement auctions for k units of privacy: threshold (truthful) and first price (ours).

The leader announces the unit (each winner sells ``rho`` of zCDP budget), the number of
winners k (``winners``) and a reserve r (the most it pays per unit ρ). Clients bid a
per-unit cost (``Response.bid``; policies ``truthful_bidder``, ``shading_bidder``,
``hedge_bidder``); at the end of phase 3 the leader clears the market (``ClearsMarket``):
the k lowest bids at or below r win and only they train, at ρ = the unit, which sets their
noise (the one privacy path). Delivered winners are paid unit·price, the price being the
critical value min(r, b_(k+1)) (``threshold_auction``, dominant-strategy truthful) or the bid
(``first_price_auction``); ``budget_feasible_auction`` (Singer 2010) buys instead as many
units as a budget B a round allows, at thresholds that keep it truthful and within B
(per-unit budget B/ρ); :mod:`fedgame.game.auctions` has the rules and their sources.

Rounds table: ``bids`` (clients that bid), ``winners``, ``clearing_price`` (the threshold
price; under first price the mean winning bid), ``shading`` (mean b_i/κ_i − 1 over the
bidders, κ_i = φν_i·c(ρ)/ρ the true per-unit cost: 0 when everyone bids truthfully), and the
Eq. 15 columns of :mod:`.buyer`. Clients table: ``bid`` and ``unit_price`` of the bidders.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.game.auctions import BUDGET_FEASIBLE, clear_market, deviation_gains, true_unit_cost
from fedgame.mechanisms.incentive.buyer import BUYER_COLUMNS, Buyer, BuyerConfig
from fedgame.registry import Example, register
from fedgame.views import (
    ClientValues,
    MarketView,
    Offer,
    Response,
    Responses,
    RoundInfo,
    column_of,
    ids_of,
)

#: bid multipliers of the cost searched by the deviation search (with the others' bids)
DEVIATION_GRID = np.geomspace(0.25, 4.0, 65)
#: the rule's code in ``Offer.plan["rule"]``
RULE_CODES = {"threshold": 0.0, "first_price": 1.0, BUDGET_FEASIBLE: 2.0}


class AuctionConfig(BuyerConfig):
    rho: PositiveFloat = Field(0.05, description="the unit: zCDP rho each winner sells (> 0)")
    winners: PositiveInt = Field(5, description="k, the number of units (winners) bought a round")
    reserve: PositiveFloat = Field(
        2.0, description="reserve r: the highest price per unit rho the leader pays (> 0)"
    )


class _Auction(Buyer):
    """A procurement auction for units of ρ; ``rule`` is the payment rule (module doc)."""

    Config: type[BuyerConfig] = AuctionConfig
    rule = "threshold"
    round_columns = ("bids", "winners", "clearing_price", "shading", *BUYER_COLUMNS)
    client_columns = ("bid", "unit_price")

    config: Any

    def __init__(self, config: AuctionConfig) -> None:
        super().__init__(config)
        self.bids = np.zeros(0)  # this round's bids by client id (nan: no bid)
        self.prices = np.zeros(0)  # this round's price per unit by client id (0: lost)
        self.won = np.zeros(0, dtype=bool)
        self._clients: dict[str, ClientValues] = {}

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        c = self.config
        n = len(market.clients)
        self.bids, self.prices = np.full(n, math.nan), np.zeros(n)
        self.won = np.zeros(n, dtype=bool)
        self._round, self._clients = {}, {}
        plan = {
            "unit": c.rho,
            "winners": float(self.k),
            "reserve": self.reserve,
            "budget": self.budget,
            "rule": RULE_CODES[self.rule],
            "phi": c.phi,
            "quadratic": float(self.quadratic),
        }
        return Offer(reward=self.spend_at_most(), plan=plan)

    @property
    def k(self) -> int:
        return int(getattr(self.config, "winners", 1))

    @property
    def reserve(self) -> float:
        return float(getattr(self.config, "reserve", math.inf))

    @property
    def budget(self) -> float:
        return float(getattr(self.config, "budget", math.inf))

    def spend_at_most(self) -> float:
        """The most the round can cost: reserve·unit·k, or the budget."""
        return self.reserve * self.config.rho * self.k

    def unit_costs(self, ids: np.ndarray) -> np.ndarray:
        """κ_i, the true per-unit cost (for measurement only, never to allocate)."""
        c = self.config
        return true_unit_cost(self.nu[ids], phi=c.phi, unit=c.rho, quadratic=self.quadratic)

    def clear(self, offer: Offer, responses: Responses, *, info: RoundInfo) -> np.ndarray:
        """The k lowest bids at or below the reserve win; their prices are fixed here."""
        c = self.config
        ids = responses.ids
        bids = np.where(responses.participate, responses.bid, math.nan)
        bids = np.where(bids >= 0, bids, math.nan)  # a negative or NaN bid is no bid
        won, prices = clear_market(
            bids, rule=self.rule, k=self.k, reserve=self.reserve, budget=self.budget / c.rho
        )
        self.bids[ids], self.prices[ids], self.won[ids] = bids, prices, won
        bidders = ids[np.isfinite(bids)]
        shading = math.nan
        if bidders.size:
            shading = float(np.mean(self.bids[bidders] / self.unit_costs(bidders) - 1.0))
        clearing = math.nan
        if won.any():
            clearing = float(np.mean(prices[won]))
        self._round = {
            "bids": float(bidders.size),
            "winners": float(won.sum()),
            "clearing_price": clearing,
            "shading": shading,
        }
        self._clients = {
            "bid": ClientValues(bidders, self.bids[bidders]),
            "unit_price": ClientValues(bidders, self.prices[bidders]),
        }
        return ids[won]

    def settle(
        self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo
    ) -> dict[int, float]:
        ids = ids_of(delivered)
        rho = column_of(delivered, "rho")
        paid = (ids < self.won.size) & self.won[np.minimum(ids, max(self.won.size - 1, 0))]
        rho = np.where(paid & np.isfinite(rho) & (rho > 0), rho, 0.0)
        pay = np.where(paid, self.prices[ids] * rho, 0.0) if ids.size else np.zeros(0)
        reported = self.bids[ids] if ids.size else np.zeros(0)
        self._round.update(self.account(ids, rho, pay, t=info.round, reported=reported))
        return dict(zip(ids.tolist(), pay.tolist(), strict=True))

    def deviation_gains(self, ids: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
        """Each client's best gain from another bid (grid × its cost, the reserve, just below
        each other bid), the others' bids held fixed, re-cleared by this rule (≥ 0)."""
        del rng
        c = self.config
        ids = np.asarray(ids, dtype=np.int64)
        if not self.bids.size or not ids.size:
            return np.zeros(ids.size)
        every = np.arange(self.bids.size)
        return deviation_gains(
            self.bids,
            self.unit_costs(every),
            ids,
            k=self.k,
            reserve=self.reserve,
            rule=self.rule,
            unit=c.rho,
            grid=DEVIATION_GRID,
            budget=self.budget / c.rho,
        )

    def client_metrics(self) -> dict[str, ClientValues]:
        return dict(self._clients)


_READS = (reads.PRIVACY_VALUE, *reads.BUDGET)


@register("incentive", "threshold_auction", reads=_READS)
class ThresholdAuction(_Auction):
    """k lowest bids win, each paid the critical value min(r, b_(k+1)) per unit (truthful)."""

    rule = "threshold"
    example = Example({"winners": 3}, needs={"policy": {"kind": "truthful_bidder"}})


@register("incentive", "first_price_auction", reads=_READS)
class FirstPriceAuction(_Auction):
    """k lowest bids win, each paid its own bid per unit (pay as bid: bidders shade)."""

    rule = "first_price"
    example = Example({"winners": 3}, needs={"policy": {"kind": "shading_bidder"}})


class BudgetAuctionConfig(BuyerConfig):
    rho: PositiveFloat = Field(0.05, description="the unit: zCDP rho each winner sells (> 0)")
    budget: PositiveFloat = Field(
        0.5, description="B, the most the leader pays a round (reward units, > 0)"
    )


@register("incentive", "budget_feasible_auction", reads=_READS)
class BudgetFeasibleAuction(_Auction):
    """Singer's (2010) proportional share: the k* lowest bids with b_(k*) ≤ B/k* win, each
    paid its threshold; total payments ≤ B (truthful, budget feasible)."""

    Config = BudgetAuctionConfig
    rule = BUDGET_FEASIBLE
    example = Example({"budget": 0.2}, needs={"policy": {"kind": "truthful_bidder"}})

    def spend_at_most(self) -> float:
        return self.budget
