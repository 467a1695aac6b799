"""A posted-price market for privacy: the leader posts a price, the clients take it.

Two plug-ins, written against ``fedgame.kit`` alone (docs/plugins.md, "Writing a mechanism"):

* incentive ``posted_price``: the leader posts one price p_t per unit of zCDP budget ρ, pays
  p_t·ρ_i to every client whose update was delivered, and moves the price towards a target
  uptake from what the clients offered in the last round;
* policy ``price_taker``: each client takes the price as given and offers the ρ_i that
  maximises p_t·ρ − ν_i·ρ²/2 within what is left of its privacy budget.

A scenario beside this file loads both with ``plugins: [posted_price]`` (posted_price.yaml).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, model_validator

from fedgame.kit import (
    ClientView,
    Example,
    MarketView,
    Offer,
    Response,
    Responses,
    RoundInfo,
    ServerCostParams,
    Settlement,
    SetupContext,
    column_of,
    ids_of,
    register,
    rho_left,
    server_cost,
)

# --------------------------------------------------------------------------- the maths


def uptake(responses: Sequence[Response]) -> float:
    """U = Σρ_i over the responses that take part with a finite ρ_i: the zCDP budget the
    clients offered at the posted price (0 when nobody took part)."""
    take = column_of(responses, "participate", bool)
    rho = column_of(responses, "rho")
    return float(rho[take & np.isfinite(rho)].sum())


def next_price(
    price: float,
    offered: float,
    *,
    target: float,
    step: float,
    max_change: float,
    low: float,
    high: float,
) -> float:
    """p_(t+1) = clip(p_t·clip((S*/U_t)^η, 1/g, g), low, high).

    U_t is the uptake at p_t, S* the target, η ∈ (0, 1] the step and g > 1 the largest
    factor per round. The price rises when the uptake fell short of the target and falls
    when it overshot; with price-taking clients U ∝ p until budgets bind, so η = 1 jumps
    to the price that would have met the target. No uptake (U_t = 0) raises it by g.

    >>> next_price(1.0, 0.5, target=2.0, step=0.5, max_change=4.0, low=0.01, high=100.0)
    2.0
    """
    factor = max_change if offered <= 0 else (target / offered) ** step
    factor = min(max(factor, 1.0 / max_change), max_change)
    return min(max(price * factor, low), high)


def price_taking_rho(price: float, nu: np.ndarray, left: np.ndarray) -> np.ndarray:
    """ρ_i = min(p/ν_i, ρ_left,i), the maximiser of p·ρ − ν_i·ρ²/2 on [0, ρ_left,i].

    The utility is concave in ρ with its peak where its slope p − ν_i·ρ vanishes, at
    ρ = p/ν_i; on [0, ρ_left,i] the best ρ is that peak clipped to the budget. Units: p in
    reward units per unit ρ, ν_i in reward units per ρ², ρ in zCDP.

    >>> price_taking_rho(0.1, np.array([0.5, 1.0]), np.array([1.0, 0.05])).tolist()
    [0.2, 0.05]
    """
    return np.minimum(price / nu, left)


# --------------------------------------------------------------------------- the leader


class PostedPriceConfig(BaseModel):
    """The posted-price leader's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    price: PositiveFloat = Field(0.05, description="price p_1 of round 1 (reward units per rho)")
    target: PositiveFloat = Field(
        2.0, description="target uptake S*: the sum of rho the leader wants offered per round"
    )
    step: float = Field(0.5, gt=0, le=1, description="exponent eta in (0, 1] of (S*/U)^eta")
    max_change: float = Field(2.0, gt=1, description="largest factor g > 1 of a price move")
    min_price: PositiveFloat = Field(1e-6, description="lowest price posted (> 0)")
    max_price: PositiveFloat = Field(1e6, description="highest price posted (>= min_price)")
    gamma: float = Field(
        0.5, gt=0, lt=1, description="weight gamma of the accuracy term in the server cost"
    )
    lam: PositiveFloat = Field(1.0, description="strong convexity lambda in the server cost")

    @model_validator(mode="after")
    def _ordered(self) -> PostedPriceConfig:
        if not self.min_price <= self.price <= self.max_price:
            raise ValueError(
                f"price {self.price} must lie in [min_price, max_price] = "
                f"[{self.min_price}, {self.max_price}]"
            )
        return self


@dataclass(frozen=True)
class PriceTerms:
    """What the leader fixed at its offer and reads again when it settles (``Offer.terms``):
    the uptake U_(t−1) that set the price (NaN in round 1)."""

    uptake: float


@register("incentive", "posted_price")
class PostedPrice:
    """Posts one price per unit of zCDP budget ρ, pays price·ρ_i, adjusts to the uptake.

    Round t's offer carries the price p_t in ``Offer.plan["price"]``; its ``reward`` is
    p_t·S*, what the leader pays if the uptake meets the target S* (the model's degeneracy
    checks key on it). Settling pays every delivered client p_t·ρ_i (ρ_i the budget of its
    response, 0 without one). From round 2, p_t = :func:`next_price` of p_(t−1) and of
    U_(t−1), the Σρ the willing clients offered in round t−1 (``MarketView.previous``).

    Rounds table: ``price`` p_t; ``uptake`` U_(t−1), which set it (NaN in round 1);
    ``reward`` p_t·S*; ``sum_rho`` the delivered Σρ_i; ``server_cost`` what the round costs
    a QI-DPFL leader (paper 003 Eq. 15 at the delivered budgets and the total paid, with
    π = 1, β = 1, C = 1, V = 0; NaN when no budget was delivered).

    Its cross-round memory is the price p_t (the next price moves from it); the round itself
    travels in the offer's :class:`PriceTerms` and the :class:`Settlement` ``settle`` returns.
    """

    Config = PostedPriceConfig
    example = Example({"price": 0.05, "target": 1.0}, needs={"policy": {"kind": "price_taker"}})
    round_columns = ("price", "uptake", "reward", "sum_rho", "server_cost")

    def __init__(self, config: PostedPriceConfig) -> None:
        self.config = config
        self.price = config.price  # cross-round memory: the next price moves from it
        self.sizes = np.zeros(0)
        self.cost: ServerCostParams | None = None

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        """Once before round 1: |D_i| by client id, and Eq. 15's constants (d, T)."""
        self.sizes = np.zeros(ctx.num_clients)
        self.sizes[ids_of(ctx.clients)] = column_of(ctx.clients, "dataset_size")
        dim = ctx.learner.num_params if ctx.learner is not None else 1
        c = self.config
        self.cost = ServerCostParams(
            gamma=c.gamma, discount=1.0, lam=c.lam, dim=int(dim), rounds=ctx.rounds
        )

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        c = self.config
        offered = math.nan
        if market.previous is not None:
            offered = uptake(market.previous.responses)
            self.price = next_price(
                self.price,
                offered,
                target=c.target,
                step=c.step,
                max_change=c.max_change,
                low=c.min_price,
                high=c.max_price,
            )
        terms = PriceTerms(uptake=offered)
        return Offer(reward=self.price * c.target, plan={"price": self.price}, terms=terms)

    def settle(self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo) -> Settlement:
        ids = ids_of(delivered)
        rho = column_of(delivered, "rho")
        rho = np.where(np.isfinite(rho) & (rho > 0), rho, 0.0)
        pay = offer.plan["price"] * rho
        cost = math.nan
        live = rho > 0
        if live.any() and self.cost is not None:
            t = min(info.round, self.cost.rounds)
            sizes = np.maximum(self.sizes[ids[live]], 1.0)
            found = server_cost(
                float(pay.sum()), rho=rho[live], data_sizes=sizes, t=t, params=self.cost
            )
            cost = found.total
        metrics = {
            "price": offer.plan["price"],
            "uptake": offer.terms.uptake,
            "reward": offer.reward,
            "sum_rho": float(rho.sum()),
            "server_cost": cost,
        }
        payments = dict(zip(ids.tolist(), pay.tolist()))
        return Settlement(payments, offer, round_metrics=metrics)


# --------------------------------------------------------------------------- the clients


class PriceTakerConfig(BaseModel):
    """The price taker's knob."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_rho: PositiveFloat = Field(
        1e-3, description="smallest rho worth a release; less left than this: decline (budget)"
    )


#: the scenario keys it reads outside its own section: validation warns when a scenario sets
#: a key no chosen plug-in reads, so a plug-in declares what it reads
READS = ("population.privacy_value", "population.budget.epsilon", "population.budget.delta")


@register("policy", "price_taker", reads=READS)
class PriceTaker:
    """Offers the ρ_i maximising price·ρ − ν_i·ρ²/2 within its remaining budget, or declines.

    ρ_i = min(p_t/ν_i, ρ_left,i) (:func:`price_taking_rho`), p_t the offer's
    ``plan["price"]`` (0 when the incentive posts none), ν_i the client's privacy value and
    ρ_left,i what is left of its (ε, δ) budget in zCDP units (``rho_left``). It declines with
    reason ``budget`` when less than ``min_rho`` is left (it cannot afford a release) and
    ``price`` when the price buys less than ``min_rho`` (p_t/ν_i < ``min_rho``). It chooses
    ρ (``chooses = "rho"``), so the privacy mechanism's noise must follow ρ
    (``zcdp_gaussian``: σ_i² = 2C²/(ρ_i·|D_i|²)).

    Clients table: ``rho_offered``, the ρ_i of each client that took part (NaN otherwise).
    """

    Config = PriceTakerConfig
    chooses = "rho"
    example = Example({}, needs={"incentive": {"kind": "posted_price"}})
    client_columns = ("rho_offered",)

    def __init__(self, config: PriceTakerConfig) -> None:
        self.min_rho = config.min_rho

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        return self.respond_all(offer, clients=(me,), market=market)[0][0]

    def respond_all(
        self, offer: Offer, *, clients: Sequence[ClientView], market: MarketView
    ) -> tuple[Responses, dict[str, dict[int, float]]]:
        """Every client of ``clients`` at once (the model prefers this to ``respond``), with
        its ``rho_offered`` column: each taker's ρ_i."""
        price = float(offer.plan.get("price", 0.0))
        nu = column_of(clients, "privacy_value")
        left = rho_left(clients)
        rho = price_taking_rho(price, nu, left)
        broke = left < self.min_rho
        cheap = ~broke & (price / nu < self.min_rho)
        take = ~broke & ~cheap
        reason = np.where(broke, "budget", np.where(cheap, "price", "")).astype(object)
        ids = ids_of(clients)
        offered = dict(zip(ids[take].tolist(), rho[take].tolist()))
        answers = Responses(ids, take, rho=np.where(take, rho, math.nan), reason=reason)
        return answers, {"rho_offered": offered}
