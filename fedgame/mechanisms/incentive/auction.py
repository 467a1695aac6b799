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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.game.auctions import BUDGET_FEASIBLE, clear_market, deviation_gains, true_unit_cost
from fedgame.mechanisms.base import Cleared, FaultDraw, Settlement
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


@dataclass(frozen=True)
class AuctionTerms:
    """What the auction fixed (``Offer.terms``), by client id: the ``bids`` (NaN: no bid),
    the ``prices`` per unit (0: lost) and who ``won``; ``cleared`` the clearing's rounds
    columns and ``clients`` its clients columns (empty until the market is cleared)."""

    bids: np.ndarray
    prices: np.ndarray
    won: np.ndarray
    cleared: Mapping[str, float]
    clients: Mapping[str, ClientValues]


def auction_terms(offer: Offer) -> AuctionTerms:
    """The offer's :class:`AuctionTerms` (``ValueError`` when it was not an auction's)."""
    return offer.terms_as(AuctionTerms, leader="an auction")


class _Auction(Buyer):
    """A procurement auction for units of ρ; ``rule`` is the payment rule (module doc).

    No cross-round memory: the round's bids, prices and winners are the offer's terms.
    """

    Config: type[BuyerConfig] = AuctionConfig
    rule = "threshold"
    round_columns = ("bids", "winners", "clearing_price", "shading", *BUYER_COLUMNS)
    client_columns = ("bid", "unit_price")

    config: Any

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        c = self.config
        n = len(market.clients)
        terms = AuctionTerms(np.full(n, math.nan), np.zeros(n), np.zeros(n, dtype=bool), {}, {})
        plan = {
            "unit": c.rho,
            "winners": float(self.k),
            "reserve": self.reserve,
            "budget": self.budget,
            "rule": RULE_CODES[self.rule],
            "phi": c.phi,
            "quadratic": float(self.quadratic),
        }
        return Offer(reward=self.spend_at_most(), plan=plan, terms=terms)

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

    def clear(self, offer: Offer, responses: Responses, *, info: RoundInfo) -> Cleared:
        """The k lowest bids at or below the reserve win; their prices are fixed here (the
        returned offer's terms)."""
        c = self.config
        before = auction_terms(offer)
        all_bids, all_prices, all_won = before.bids.copy(), before.prices.copy(), before.won.copy()
        ids = responses.ids
        bids = np.where(responses.participate, responses.bid, math.nan)
        bids = np.where(bids >= 0, bids, math.nan)  # a negative or NaN bid is no bid
        won, prices = clear_market(
            bids, rule=self.rule, k=self.k, reserve=self.reserve, budget=self.budget / c.rho
        )
        all_bids[ids], all_prices[ids], all_won[ids] = bids, prices, won
        bidders = ids[np.isfinite(bids)]
        shading = math.nan
        if bidders.size:
            shading = float(np.mean(all_bids[bidders] / self.unit_costs(bidders) - 1.0))
        clearing = math.nan
        if won.any():
            clearing = float(np.mean(prices[won]))
        cleared = {
            "bids": float(bidders.size),
            "winners": float(won.sum()),
            "clearing_price": clearing,
            "shading": shading,
        }
        clients = {
            "bid": ClientValues(bidders, all_bids[bidders]),
            "unit_price": ClientValues(bidders, all_prices[bidders]),
        }
        terms = AuctionTerms(all_bids, all_prices, all_won, cleared, clients)
        return Cleared(ids[won], replace(offer, terms=terms))

    def settle(self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo) -> Settlement:
        terms = auction_terms(offer)
        won, prices, bids = terms.won, terms.prices, terms.bids
        ids = ids_of(delivered)
        rho = column_of(delivered, "rho")
        paid = (ids < won.size) & won[np.minimum(ids, max(won.size - 1, 0))]
        rho = np.where(paid & np.isfinite(rho) & (rho > 0), rho, 0.0)
        pay = np.where(paid, prices[ids] * rho, 0.0) if ids.size else np.zeros(0)
        reported = bids[ids] if ids.size else np.zeros(0)
        outcome, columns = self.account(ids, rho, pay, t=info.round, reported=reported)
        payments = dict(zip(ids.tolist(), pay.tolist(), strict=True))
        metrics = {**terms.cleared, **columns}
        return Settlement(payments, offer, outcome, metrics, dict(terms.clients))

    def deviation_gains(
        self,
        ids: np.ndarray,
        *,
        settlement: Settlement,
        faults: FaultDraw | None = None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Each client's best gain from another bid (grid × its cost, the reserve, just below
        each other bid), the others' bids held fixed (the settled offer's terms), re-cleared by
        this rule (≥ 0)."""
        del rng, faults
        c = self.config
        ids = np.asarray(ids, dtype=np.int64)
        bids = auction_terms(settlement.offer).bids
        if not bids.size or not ids.size:
            return np.zeros(ids.size)
        every = np.arange(bids.size)
        return deviation_gains(
            bids,
            self.unit_costs(every),
            ids,
            k=self.k,
            reserve=self.reserve,
            rule=self.rule,
            unit=c.rho,
            grid=DEVIATION_GRID,
            budget=self.budget / c.rho,
        )


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
