"""A posted price per unit of zCDP budget ρ, set to minimise the server cost (ours).

The leader posts p_t; each client sells its supply s_i(p_t) (policy ``seller``: the profit
maximiser of p·ρ − φν_i·c(ρ) up to its capacity q_i = min(ρ_left,i, ``cap``)) and every
delivered seller is paid p_t·ρ_i. p_t minimises QI-DPFL's Eq. 15 at the supply it expects
(:func:`fedgame.game.posted_price.optimal_price`, the contest leader's cost, so the two are
comparable), at the true ν (complete information) or at the leader's belief ν̂ (``belief``,
:mod:`fedgame.game.belief`'s log-normal estimator, updated from what each offered client
sold: :func:`fedgame.game.posted_price.revealed_privacy_values`). ``price`` fixes p instead.

Rounds table: ``price``; the Eq. 15 columns of :mod:`.buyer` (``sum_rho``, ``sellers``,
``payments_total``, ``server_cost_accuracy``, ``server_cost_payment``, ``server_cost``) at the
delivered budgets; ``nu_error``, the mean |log ν̂ − log ν| over the offered clients (0 at
complete information).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from pydantic import Field, PositiveFloat, model_validator

from fedgame import reads
from fedgame.game.belief import PrivacyValueBelief
from fedgame.game.posted_price import optimal_price, revealed_privacy_values, supply
from fedgame.mechanisms.base import Cleared, FaultDraw, Settlement
from fedgame.mechanisms.incentive.belief import BeliefSpec
from fedgame.mechanisms.incentive.buyer import BUYER_COLUMNS, Buyer, BuyerConfig
from fedgame.mechanisms.policy.market import rho_left
from fedgame.registry import Example, register
from fedgame.views import (
    MarketView,
    Offer,
    Response,
    Responses,
    RoundInfo,
    SetupContext,
    column_of,
    ids_of,
)


class PostedPriceConfig(BuyerConfig):
    cap: PositiveFloat | None = Field(
        None, description="largest rho a client sells per round (none: its remaining budget)"
    )
    min_rho: PositiveFloat = Field(
        1e-6, description="capacity below which a client is offered nothing (zCDP rho)"
    )
    price: PositiveFloat | None = Field(
        None, description="a fixed price per unit rho (none: the cost-minimising price)"
    )
    belief: BeliefSpec | None = Field(
        None, description="belief about nu: {kind, prior, obs_sd} (none: nu is known)"
    )

    @model_validator(mode="after")
    def _no_exploration(self) -> PostedPriceConfig:
        if self.belief is not None and self.belief.explore > 0:
            raise ValueError("belief.explore is not used by a posted price: leave it at 0")
        return self


@dataclass(frozen=True)
class PriceObservation:
    """What one round's supply revealed (``ids`` offered; the belief's ``observe`` reads
    ``ids`` and ``implied()``)."""

    ids: np.ndarray
    nu: np.ndarray
    kind: np.ndarray

    def implied(self) -> tuple[np.ndarray, np.ndarray]:
        return self.nu, self.kind


@dataclass(frozen=True)
class PriceTerms:
    """What the posted-price leader fixed at its offer (``Offer.terms``): the ``price``, the
    ids ``offered`` it and their capacities ``caps`` (aligned), ``nu_error`` (the rounds
    column), and, once the market is cleared, every client's ``responses``."""

    price: float
    offered: np.ndarray
    caps: np.ndarray
    nu_error: float
    responses: Responses | None = None


def price_terms(offer: Offer) -> PriceTerms:
    """The offer's :class:`PriceTerms` (``ValueError`` when it was not a posted price's)."""
    return offer.terms_as(PriceTerms, leader="a posted price")


@register("incentive", "optimal_price", reads=(reads.PRIVACY_VALUE, *reads.BUDGET))
class OptimalPrice(Buyer):
    """Posts the Eq. 15-minimising price per unit ρ; pays p·ρ_i to every delivered seller.

    Cross-round memory: the belief about ν (``belief``), updated when the market clears
    from what each offered client sold.
    """

    Config = PostedPriceConfig
    example = Example({"cap": 0.05}, needs={"policy": {"kind": "seller"}})
    round_columns = ("price", *BUYER_COLUMNS, "nu_error")

    config: PostedPriceConfig

    def __init__(self, config: PostedPriceConfig) -> None:
        super().__init__(config)
        self.cap = math.inf if config.cap is None else float(config.cap)
        self.belief: PrivacyValueBelief | None = None

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        super().prepare(ctx, rng=rng)
        if self.config.belief is not None:
            self.belief = self.config.belief.build(self.nu.size)

    def capacities(self, clients: Any) -> np.ndarray:
        """q_i = min(ρ_left,i, cap): what each client can sell this round."""
        return np.minimum(rho_left(clients), self.cap)

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        c = self.config
        clients = market.clients
        ids = ids_of(clients)
        caps = self.capacities(clients)
        mask = column_of(clients, "reachable", bool) & (caps >= c.min_rho)
        offered, caps = ids[mask], caps[mask]
        if self.belief is not None:
            nu = self.belief.estimate()[offered]
            truth = self.nu[offered]
            error = float(np.mean(np.abs(np.log(nu / truth)))) if nu.size else math.nan
        else:
            nu, error = column_of(clients, "privacy_value")[mask], 0.0
        if c.price is not None:
            price = float(c.price)
        elif offered.size:
            found = optimal_price(
                nu,
                caps,
                self.sizes[offered],
                phi=c.phi,
                quadratic=self.quadratic,
                t=min(max(info.round, 1), self.rounds),
                params=self.params(),
            )
            price = found.price
        else:
            price = 0.0
        plan = {
            "price": price,
            "phi": c.phi,
            "quadratic": float(self.quadratic),
            "cap": self.cap,
        }
        terms = PriceTerms(price, offered, caps, error)
        return Offer(reward=price * float(caps.sum()), plan=plan, terms=terms)

    def clear(self, offer: Offer, responses: Responses, *, info: RoundInfo) -> Cleared:
        """At a posted price every client that accepts it sells; the responses join the
        offer's terms (the deviation search reads them) and teach the belief."""
        terms = replace(price_terms(offer), responses=responses)
        if self.belief is not None:
            self._learn(terms)
        winners = responses.ids[responses.participate]
        return Cleared(winners, replace(offer, terms=terms))

    def _learn(self, terms: PriceTerms) -> None:
        """The belief observes what each offered client sold at the price (cross-round)."""
        assert self.belief is not None and terms.responses is not None
        responses, offered = terms.responses, terms.offered
        rho = responses.rho[offered]
        declined = ~responses.participate[offered]
        priced_out = declined & (responses.reason[offered] == "price")
        rho = np.where(priced_out, 0.0, np.where(declined, np.nan, rho))
        nu, kind = revealed_privacy_values(
            terms.price, rho, terms.caps, phi=self.config.phi, quadratic=self.quadratic
        )
        self.belief.observe(PriceObservation(offered, nu, kind))  # type: ignore[arg-type]

    def settle(self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo) -> Settlement:
        terms = price_terms(offer)
        ids = ids_of(delivered)
        rho = column_of(delivered, "rho")
        rho = np.where(np.isfinite(rho) & (rho > 0), rho, 0.0)
        pay = float(offer.plan.get("price", 0.0)) * rho
        outcome, columns = self.account(ids, rho, pay, t=info.round)
        metrics = {"price": terms.price, "nu_error": terms.nu_error, **columns}
        payments = dict(zip(ids.tolist(), pay.tolist(), strict=True))
        return Settlement(payments, offer, outcome, metrics)

    def deviation_gains(
        self,
        ids: np.ndarray,
        *,
        settlement: Settlement,
        faults: FaultDraw | None = None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Best profit p·ρ − φν_i·c(ρ) over ρ ∈ [0, q_i] (the supply, exact) minus that of the
        ρ it offered (0 when it declined); clients not offered the price gain 0. Reads the
        settled offer's terms (price, capacities, the cleared responses)."""
        del rng, faults
        ids = np.asarray(ids, dtype=np.int64)
        gains = np.zeros(ids.size)
        terms = price_terms(settlement.offer)
        responses, offered, price = terms.responses, terms.offered, terms.price
        if responses is None or not offered.size:
            return gains
        where = np.searchsorted(offered, ids)
        where = np.minimum(where, offered.size - 1)
        inside = offered[where] == ids
        if not inside.any():
            return gains
        at = ids[inside]
        caps = terms.caps[where[inside]]
        best = supply(price, self.nu[at], caps, phi=self.config.phi, quadratic=self.quadratic)
        taken = responses.rho[at]
        taken = np.where(responses.participate[at] & np.isfinite(taken), taken, 0.0)
        profit_best = price * best - self.true_cost(at, best)
        profit_taken = price * taken - self.true_cost(at, taken)
        gains[inside] = np.maximum(profit_best - profit_taken, 0.0)
        return gains
