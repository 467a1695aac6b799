"""A price-taking seller of privacy: sells its profit-maximising ρ at the posted price.

At price p (``Offer.plan["price"]``, per unit zCDP ρ) client i sells
s_i(p) = argmax_{0 ≤ ρ ≤ q_i} p·ρ − φ·ν_i·c(ρ) (:func:`fedgame.game.posted_price.supply`:
all of q_i when p ≥ φν_i under linear cost; min(p/(2φν_i), q_i) under quadratic cost), with
q_i = min(ρ_left,i, ``cap``) its capacity and φ, c and the cap from the offer's plan. The ρ
it sells is the budget of its release (``chooses = "rho"``), so what it is paid for sets its
noise. Declines: ``no_price`` (no positive price posted), ``budget`` (capacity below
``min_rho``), ``price`` (the price is below its cost: it sells nothing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

from fedgame import reads
from fedgame.game.posted_price import supply
from fedgame.mechanisms.policy.market import rho_left
from fedgame.registry import Example, register
from fedgame.views import ClientView, MarketView, Offer, Response, Responses, column_of, ids_of

#: decline reasons, by code
REASONS = np.array(["", "no_price", "budget", "price"], dtype=object)


@register("policy", "seller", reads=(reads.PRIVACY_VALUE, *reads.BUDGET))
class Seller:
    """Sells s_i(p), its profit-maximising ρ up to its capacity, at the posted price."""

    chooses = "rho"
    example = Example({}, needs={"incentive": {"kind": "optimal_price", "cap": 0.05}})

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        min_rho: PositiveFloat = Field(
            1e-6, description="capacity (zCDP rho) below which the client sells nothing"
        )

    def __init__(self, config: Config) -> None:
        self.min_rho = config.min_rho

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        return self.respond_all(offer, clients=(me,), market=market)[0]

    def respond_all(
        self, offer: Offer, *, clients: Sequence[ClientView], market: MarketView
    ) -> Responses:
        """Every client's supply at the posted price (columns)."""
        ids = ids_of(clients)
        plan = offer.plan
        price = float(plan.get("price", 0.0))
        caps = np.minimum(rho_left(clients), float(plan.get("cap", math.inf)))
        rho = supply(
            price,
            column_of(clients, "privacy_value"),
            caps,
            phi=float(plan.get("phi", 1.0)),
            quadratic=bool(plan.get("quadratic", 0.0)),
        )
        codes = np.where(rho > 0, 0, 3)
        codes[caps < self.min_rho] = 2
        if not price > 0:
            codes[:] = 1
        take = codes == 0
        reason = None if take.all() else REASONS[codes]
        return Responses(ids, take, rho=np.where(take, rho, math.nan), reason=reason)
