"""Bidders in a procurement auction: truthful, shading by a factor, and a no-regret learner.

The offer's plan names the auction (``unit`` ρ each winner sells, ``winners`` k, ``reserve``
r, ``rule``, and the cost model ``phi``, ``quadratic``: :mod:`fedgame.mechanisms.incentive.
auction`). Client i's true per-unit cost is κ_i = φν_i·c(ρ)/ρ
(:func:`fedgame.game.auctions.true_unit_cost`). Each bidder answers with ``rho`` = the unit
(what it sells, and the budget of its release if it wins: ``chooses = "rho"``) and its
``bid``; it declines with ``no_auction`` (no unit offered) or ``budget`` (less than the unit
left).

* ``truthful_bidder``: b_i = κ_i;
* ``shading_bidder``: b_i = f·κ_i, f ≥ 1 (``factor``);
* ``hedge_bidder``: exponential weights over bid multipliers m_k (b = m_k·κ_i, a log grid in
  [``low``, ``high``]) with a log-normal prior centred on m = 1 (``prior_sd``;
  :func:`fedgame.game.auctions.prior_weights`) and AdaHedge's rate ln K/Δ
  (:func:`fedgame.game.learning.adaptive_rate`, de Rooij et al. 2014). Full information:
  after a round the bids are public (the last round's responses), so each grid bid's
  utility against the others' bids, per unit of its cost, is known
  (:func:`fedgame.game.auctions.bid_utilities`); each round it draws its multiplier from its
  weights (its own stream, ``prepare``'s rng). Under the threshold rule every winning bid is
  paid the same, so weights leave m = 1 only towards bids that would have won more often
  profitably; under first price a higher winning bid pays more, so the weights shade.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from fedgame import reads
from fedgame.game.auctions import (
    BUDGET_FEASIBLE,
    bid_utilities,
    others_threshold,
    prior_weights,
    shading_prior,
    true_unit_cost,
)
from fedgame.game.learning import adaptive_rate, mixability_gap
from fedgame.mechanisms.policy.market import rho_left
from fedgame.registry import Example, register
from fedgame.views import (
    ClientView,
    MarketView,
    Offer,
    Response,
    Responses,
    SetupContext,
    column_of,
    ids_of,
)

#: decline reasons, by code
REASONS = np.array(["", "no_auction", "budget"], dtype=object)
#: relative slack when comparing the unit with what is left (floating-point inversions)
_SLACK = 1e-9
_NEEDS = {"incentive": {"kind": "threshold_auction", "winners": 3}}
_RULES = {0.0: "threshold", 1.0: "first_price", 2.0: BUDGET_FEASIBLE}


class _Bidder:
    """Reads the auction from the offer and answers with the unit and a bid per client."""

    chooses = "rho"

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        return self.respond_all(offer, clients=(me,), market=market)[0]

    def respond_all(
        self, offer: Offer, *, clients: Sequence[ClientView], market: MarketView
    ) -> Responses:
        ids = ids_of(clients)
        plan = offer.plan
        unit = float(plan.get("unit", math.nan))
        if not unit > 0:
            return Responses(ids, np.zeros(ids.size, dtype=bool), why="no_auction")
        cost = true_unit_cost(
            column_of(clients, "privacy_value"),
            phi=float(plan.get("phi", 1.0)),
            unit=unit,
            quadratic=bool(plan.get("quadratic", 0.0)),
        )
        bids = self.bids(ids, cost, offer, market)
        take = rho_left(clients) >= unit * (1 - _SLACK)
        return Responses(
            ids,
            take,
            rho=np.where(take, unit, math.nan),
            bid=np.where(take, bids, math.nan),
            reason=None if take.all() else REASONS[np.where(take, 0, 2)],
        )

    def bids(
        self, ids: np.ndarray, cost: np.ndarray, offer: Offer, market: MarketView
    ) -> np.ndarray:
        raise NotImplementedError


_READS = (reads.PRIVACY_VALUE, *reads.BUDGET)


@register("policy", "truthful_bidder", reads=_READS)
class TruthfulBidder(_Bidder):
    """Bids its true per-unit cost κ_i."""

    example = Example({}, needs=_NEEDS)

    def __init__(self, config: object) -> None:
        del config

    def bids(
        self, ids: np.ndarray, cost: np.ndarray, offer: Offer, market: MarketView
    ) -> np.ndarray:
        return cost


@register("policy", "shading_bidder", reads=_READS)
class ShadingBidder(_Bidder):
    """Bids ``factor``·κ_i (a procurement bidder shades up: it asks more than its cost)."""

    example = Example({"factor": 1.5}, needs=_NEEDS)

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        factor: float = Field(
            1.25, ge=1, le=100, description="bid = factor x true per-unit cost, in [1, 100]"
        )

    def __init__(self, config: Config) -> None:
        self.factor = config.factor

    def bids(
        self, ids: np.ndarray, cost: np.ndarray, offer: Offer, market: MarketView
    ) -> np.ndarray:
        return self.factor * cost


@register("policy", "hedge_bidder", reads=_READS)
class HedgeBidder(_Bidder):
    """No-regret bidding: exponential weights over bid multipliers (module doc)."""

    example = Example({"grid": 16}, needs=_NEEDS)

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        grid: PositiveInt = Field(41, ge=2, le=1024, description="number of bid multipliers")
        low: PositiveFloat = Field(0.5, description="smallest multiplier of the cost (> 0)")
        high: PositiveFloat = Field(3.0, description="largest multiplier of the cost (> low)")
        prior_sd: PositiveFloat = Field(
            0.1, description="sd of ln(multiplier) of the prior centred on truthful bidding"
        )

        @model_validator(mode="after")
        def _ordered(self) -> HedgeBidder.Config:
            if not self.low < 1.0 < self.high:
                raise ValueError("low < 1 < high (the grid must hold truthful bidding)")
            return self

    def __init__(self, config: Config) -> None:
        self.config = config
        grid = np.geomspace(config.low, config.high, config.grid)
        self.grid = np.sort(np.append(grid, 1.0)) if not np.any(grid == 1.0) else grid
        self.log_prior = shading_prior(self.grid, config.prior_sd)
        self.cumulative = np.zeros((0, self.grid.size))
        self.gap = np.zeros(0)
        self.last_plan: dict[str, float] | None = None
        self.rng: np.random.Generator | None = None  # prepare's stream
        self.multiplier = np.zeros(0)  # last multiplier played, by client id

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        self.rng = rng

    def _ensure(self, top: int) -> None:
        if top < self.gap.size:
            return
        extra = top + 1 - self.gap.size
        self.cumulative = np.vstack([self.cumulative, np.zeros((extra, self.grid.size))])
        self.gap = np.append(self.gap, np.zeros(extra))
        self.multiplier = np.append(self.multiplier, np.full(extra, math.nan))

    def bids(
        self, ids: np.ndarray, cost: np.ndarray, offer: Offer, market: MarketView
    ) -> np.ndarray:
        self._ensure(int(ids.max()) if ids.size else 0)
        if self.last_plan is not None and market.previous is not None:
            self._learn(ids, cost, market.previous.responses.bid, self.last_plan)
        self.last_plan = dict(offer.plan)
        if self.rng is None:
            raise RuntimeError("hedge_bidder draws its bids from prepare's stream: prepare it")
        eta = adaptive_rate(self.gap[ids], self.grid.size)
        weights = prior_weights(self.cumulative[ids], eta, self.log_prior)
        draws = self.rng.random(ids.size)[:, None]
        pick = (np.cumsum(weights, axis=1) < draws).sum(axis=1)
        m = self.grid[np.minimum(pick, self.grid.size - 1)]
        self.multiplier[ids] = m
        return m * cost

    def _learn(
        self, ids: np.ndarray, cost: np.ndarray, bids: np.ndarray, plan: dict[str, float]
    ) -> None:
        """Add last round's counterfactual payoffs of every grid bid (per unit of cost)."""
        took = np.isfinite(self.multiplier[ids]) & (ids < bids.size)
        if not took.any():
            return
        at, own = ids[took], cost[took]
        unit = float(plan.get("unit", 1.0))
        critical, rule, reserve = others_threshold(
            bids,
            rule=_RULES.get(float(plan.get("rule", 0.0)), "threshold"),
            k=int(plan.get("winners", 1)),
            reserve=float(plan.get("reserve", math.inf)),
            budget=float(plan.get("budget", math.inf)) / unit,
        )
        candidates = own[:, None] * self.grid[None, :]
        payoffs = bid_utilities(
            candidates, own, critical[at], reserve=reserve, rule=rule, unit=unit
        ) / (unit * own[:, None])
        eta = adaptive_rate(self.gap[at], self.grid.size)
        played = prior_weights(self.cumulative[at], eta, self.log_prior)
        self.gap[at] += mixability_gap(played, payoffs, eta)
        self.cumulative[at] += payoffs
