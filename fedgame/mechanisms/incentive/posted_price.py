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
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field, PositiveFloat, model_validator

from fedgame import reads
from fedgame.game.belief import PrivacyValueBelief
from fedgame.game.posted_price import optimal_price, revealed_privacy_values, supply
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


@register("incentive", "optimal_price", reads=(reads.PRIVACY_VALUE, *reads.BUDGET))
class OptimalPrice(Buyer):
    """Posts the Eq. 15-minimising price per unit ρ; pays p·ρ_i to every delivered seller."""

    Config = PostedPriceConfig
    example = Example({"cap": 0.05}, needs={"policy": {"kind": "seller"}})
    round_columns = ("price", *BUYER_COLUMNS, "nu_error")

    config: PostedPriceConfig

    def __init__(self, config: PostedPriceConfig) -> None:
        super().__init__(config)
        self.cap = math.inf if config.cap is None else float(config.cap)
        self.belief: PrivacyValueBelief | None = None
        self.price = 0.0
        self.offered = np.zeros(0, dtype=np.int64)
        self.caps = np.zeros(0)
        self.responses: Responses | None = None

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        super().prepare(ctx, rng=rng)
        if self.config.belief is not None:
            self.belief = self.config.belief.build(self.nu.size)

    def capacities(self, clients: Any) -> np.ndarray:
        """q_i = min(ρ_left,i, cap): what each client can sell this round."""
        return np.minimum(rho_left(clients), self.cap)

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        c = self.config
        if self.belief is not None and self.responses is not None:
            self._learn(self.responses)
        clients = market.clients
        ids = ids_of(clients)
        caps = self.capacities(clients)
        offered = column_of(clients, "reachable", bool) & (caps >= c.min_rho)
        self.offered, self.caps = ids[offered], caps[offered]
        if self.belief is not None:
            nu = self.belief.estimate()[self.offered]
            truth = self.nu[self.offered]
            error = float(np.mean(np.abs(np.log(nu / truth)))) if nu.size else math.nan
        else:
            nu, error = column_of(clients, "privacy_value")[offered], 0.0
        if c.price is not None:
            self.price = float(c.price)
        elif self.offered.size:
            found = optimal_price(
                nu,
                self.caps,
                self.sizes[self.offered],
                phi=c.phi,
                quadratic=self.quadratic,
                t=min(max(info.round, 1), self.rounds),
                params=self.params(),
            )
            self.price = found.price
        else:
            self.price = 0.0
        self.responses = None
        self._round = {"price": self.price, "nu_error": error}
        plan = {
            "price": self.price,
            "phi": c.phi,
            "quadratic": float(self.quadratic),
            "cap": self.cap,
        }
        return Offer(reward=self.price * float(self.caps.sum()), plan=plan)

    def clear(self, offer: Offer, responses: Responses, *, info: RoundInfo) -> np.ndarray:
        """At a posted price every client that accepts it sells (the responses are kept for
        the belief and the deviation search)."""
        self.responses = responses
        return responses.ids[responses.participate]

    def _learn(self, responses: Responses) -> None:
        assert self.belief is not None
        rho = responses.rho[self.offered]
        declined = ~responses.participate[self.offered]
        priced_out = declined & (responses.reason[self.offered] == "price")
        rho = np.where(priced_out, 0.0, np.where(declined, np.nan, rho))
        nu, kind = revealed_privacy_values(
            self.price, rho, self.caps, phi=self.config.phi, quadratic=self.quadratic
        )
        self.belief.observe(PriceObservation(self.offered, nu, kind))  # type: ignore[arg-type]

    def settle(
        self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo
    ) -> dict[int, float]:
        ids = ids_of(delivered)
        rho = column_of(delivered, "rho")
        rho = np.where(np.isfinite(rho) & (rho > 0), rho, 0.0)
        pay = float(offer.plan.get("price", 0.0)) * rho
        self._round.update(self.account(ids, rho, pay, t=info.round))
        return dict(zip(ids.tolist(), pay.tolist(), strict=True))

    def deviation_gains(self, ids: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
        """Best profit p·ρ − φν_i·c(ρ) over ρ ∈ [0, q_i] (the supply, exact) minus that of the
        ρ it offered (0 when it declined); clients not offered the price gain 0."""
        del rng
        ids = np.asarray(ids, dtype=np.int64)
        gains = np.zeros(ids.size)
        if self.responses is None or not self.offered.size:
            return gains
        where = np.searchsorted(self.offered, ids)
        where = np.minimum(where, self.offered.size - 1)
        inside = self.offered[where] == ids
        if not inside.any():
            return gains
        at = ids[inside]
        caps = self.caps[where[inside]]
        best = supply(self.price, self.nu[at], caps, phi=self.config.phi, quadratic=self.quadratic)
        taken = self.responses.rho[at]
        taken = np.where(self.responses.participate[at] & np.isfinite(taken), taken, 0.0)
        profit_best = self.price * best - self.true_cost(at, best)
        profit_taken = self.price * taken - self.true_cost(at, taken)
        gains[inside] = np.maximum(profit_best - profit_taken, 0.0)
        return gains
