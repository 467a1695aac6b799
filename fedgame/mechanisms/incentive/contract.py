"""Screening contracts: the leader offers a menu {(ρ_k, r_k)}, each client takes one item.

The menu is the optimal screening menu of :mod:`fedgame.game.contracts` (Laffont & Martimort
2002 ch. 2-3) for a discrete law of the type θ = φ·ν: configured (``types``, ν values, with
``probabilities``) or drawn from the population's privacy values (``bins`` equal-count
groups, each typed by its largest ν). The leader values ρ through the noise term of the
contest's server cost (paper 003 Eq. 15), V(ρ) = −α_t/ρ (:func:`server_value_alpha`), so the
menu moves with the discount π^(t−1) as the contest's reward does. Clients self-select with
policy ``self_select`` (:mod:`fedgame.mechanisms.policy.menu`); the ρ of the item taken is
the response's ``rho``, which sets the noise (a mechanism that follows ρ is required).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.game.contracts import (
    Menu,
    cost_of,
    item_utilities,
    population_types,
    screening_menu,
    server_value_alpha,
)
from fedgame.game.economics import RoundOutcome
from fedgame.game.stackelberg import ServerCostParams
from fedgame.mechanisms.base import FaultDraw, Settlement
from fedgame.mechanisms.policy.market import rho_left
from fedgame.registry import Example, register
from fedgame.views import MarketView, Offer, Response, RoundInfo, SetupContext, column_of, ids_of


class ContractConfig(BaseModel):
    """The screening leader's knobs (the server-cost constants are the contest's, Eq. 15)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    types: list[PositiveFloat] | None = Field(
        None, description="privacy values nu_k of the designed types (default: from population)"
    )
    probabilities: list[PositiveFloat] | None = Field(
        None, description="probability of each type (with types; summing to 1)"
    )
    bins: PositiveInt = Field(
        3, description="types drawn from the population: equal-count groups of nu (>= 1)"
    )
    cost: Literal["linear", "quadratic"] = Field(
        "linear", description="client privacy cost phi*nu*c(rho): c = rho or rho^2/2"
    )
    cap: PositiveFloat | None = Field(None, description="largest rho bought from one client")
    phi: PositiveFloat = Field(1.0, description="privacy-cost weight phi > 0 (theta = phi*nu)")
    gamma: float = Field(0.5, gt=0, lt=1, description="weight gamma of accuracy vs payments")
    discount: float = Field(1.0, gt=0, le=1, description="discount factor pi in (0, 1]")
    beta: PositiveFloat = Field(1.0, description="smoothness beta > 0 in the server cost")
    lam: PositiveFloat = Field(1.0, description="strong convexity lambda > 0 in the server cost")
    clip: PositiveFloat = Field(1.0, description="clipping bound C > 0 in the server cost")
    dim: PositiveInt | None = Field(
        None, description="noised coordinates d (default: the model's parameter count)"
    )

    @model_validator(mode="after")
    def _types(self) -> ContractConfig:
        if (self.types is None) != (self.probabilities is None):
            raise ScenarioError("probabilities", self.probabilities, "given together with types")
        if self.types is not None and self.probabilities is not None:
            if len(self.types) != len(self.probabilities):
                raise ScenarioError(
                    "probabilities", self.probabilities, f"{len(self.types)} values, one per type"
                )
            if any(b <= a for a, b in zip(self.types, self.types[1:], strict=False)):
                raise ScenarioError("types", self.types, "strictly increasing privacy values")
            if abs(sum(self.probabilities) - 1.0) > 1e-9:
                raise ScenarioError("probabilities", self.probabilities, "values summing to 1")
        return self


def match_items(rho: np.ndarray, items: np.ndarray) -> np.ndarray:
    """Index of the menu item whose ρ equals each ``rho`` (relative 1e-9), −1 where none does."""
    if items.size == 0 or rho.size == 0:
        return np.full(rho.size, -1, dtype=np.int64)
    gap = np.abs(rho[:, None] - items[None, :])
    nearest = np.argmin(gap, axis=1)
    ok = np.isfinite(rho) & (gap[np.arange(rho.size), nearest] <= 1e-9 * items[nearest])
    return np.where(ok, nearest, -1).astype(np.int64)


@dataclass(frozen=True)
class ContractTerms:
    """What the screening leader fixed at its offer (``Offer.terms``): the round's ``menu``
    and, by client id, the zCDP budget each client had ``left`` (what it could afford)."""

    menu: Menu
    left: np.ndarray


def contract_terms(offer: Offer) -> ContractTerms:
    """The offer's :class:`ContractTerms` (``ValueError`` when it was not a contract's)."""
    return offer.terms_as(ContractTerms, leader="a contract")


@register("incentive", "contract", reads=(reads.PRIVACY_VALUE,))
class Contract:
    """Offers the optimal screening menu each round and pays r_k for item k delivered.

    ``Offer.menu`` holds the distinct items (ρ_k, r_k), the largest ρ first; ``plan`` holds
    ``phi`` and ``quadratic`` (the clients' utility family); ``reward`` is the menu's
    expected total payment N·Σ_k p_k·r_k. Settling pays each delivered client the r_k of the
    item whose ρ its response names (0 for a ρ that is no item).

    Rounds table: ``menu_items`` (distinct items), ``menu_rho_low``/``menu_rho_high`` and
    ``menu_pay_low``/``menu_pay_high`` (the smallest and largest ρ_k and r_k), ``sum_rho``
    (delivered Σρ), ``payments_total`` (Σ payments). Declares ``ReportsOutcome`` (units ρ, true cost
    φ·ν_i·c(ρ_i)) and ``MeasuresDeviation`` (:meth:`deviation_gains`).

    No cross-round memory: the set-up of ``prepare`` (ν, |D_i|, the designed types, Eq. 15's
    constants) is kept; the round's menu and budgets travel in the offer's terms.
    """

    Config = ContractConfig
    example = Example({"bins": 2, "lam": 0.01}, needs={"policy": {"kind": "self_select"}})
    round_columns = (
        "menu_items",
        "menu_rho_low",
        "menu_rho_high",
        "menu_pay_low",
        "menu_pay_high",
        "sum_rho",
        "payments_total",
    )
    reports_outcome = True

    def __init__(self, config: ContractConfig) -> None:
        self.config = config
        self.nu = np.zeros(0)
        self.sizes = np.ones(1)
        self.num_clients = 1
        self.params: ServerCostParams | None = None
        self.theta = np.zeros(0)
        self.prob = np.zeros(0)

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        """Once before round 1: ν and |D_i| by client id, the designed types, Eq. 15's d, T."""
        c = self.config
        ids = ids_of(ctx.clients)
        self.num_clients = ctx.num_clients
        self.nu = np.zeros(ctx.num_clients)
        self.nu[ids] = column_of(ctx.clients, "privacy_value")
        self.sizes = np.maximum(column_of(ctx.clients, "dataset_size"), 1.0)
        dim = c.dim or (ctx.learner.num_params if ctx.learner is not None else 1)
        self.params = ServerCostParams(
            gamma=c.gamma,
            discount=c.discount,
            beta=c.beta,
            lam=c.lam,
            clip=c.clip,
            dim=int(dim),
            rounds=ctx.rounds,
        )
        if c.types is not None and c.probabilities is not None:
            self.theta = c.phi * np.asarray(c.types, dtype=float)
            self.prob = np.asarray(c.probabilities, dtype=float)
        else:
            self.theta, self.prob = population_types(self.nu[ids], bins=c.bins, phi=c.phi)

    def design(self, t: int) -> Menu:
        """The round-t menu (types and law fixed, α_t from Eq. 15 at round t)."""
        if self.params is None:
            raise ScenarioError("incentive", "contract", "needs prepare() before offer()")
        t = min(max(t, 1), self.params.rounds)
        alpha = server_value_alpha(
            self.params, clients=self.num_clients, data_sizes=self.sizes, t=t
        )
        cap = math.inf if self.config.cap is None else float(self.config.cap)
        return screening_menu(self.theta, self.prob, alpha=alpha, cost=self.config.cost, cap=cap)

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        menu = self.design(info.round)
        left = np.zeros(self.num_clients)
        left[ids_of(market.clients)] = rho_left(market.clients)
        expected = self.num_clients * float(np.sum(menu.prob * menu.reward))
        plan = {"phi": self.config.phi, "quadratic": float(self.config.cost == "quadratic")}
        terms = ContractTerms(menu, left)
        return Offer(reward=expected, plan=plan, menu=menu.items(), terms=terms)

    def settle(self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo) -> Settlement:
        ids = ids_of(delivered)
        rho = column_of(delivered, "rho")
        items = np.array([item for item, _ in offer.menu])
        rewards = np.array([r for _, r in offer.menu])
        k = match_items(rho, items)
        pay = np.where(k >= 0, rewards[np.maximum(k, 0)] if rewards.size else 0.0, 0.0)
        units = np.where(np.isfinite(rho) & (rho > 0), rho, 0.0)
        true_cost = self.config.phi * self.nu[ids] * cost_of(units, self.config.cost)
        outcome = RoundOutcome(ids, units, pay, true_cost, None)
        metrics = {
            "menu_items": float(items.size),
            "menu_rho_low": float(items.min()) if items.size else math.nan,
            "menu_rho_high": float(items.max()) if items.size else math.nan,
            "menu_pay_low": float(rewards.min()) if rewards.size else math.nan,
            "menu_pay_high": float(rewards.max()) if rewards.size else math.nan,
            "sum_rho": float(units.sum()),
            "payments_total": float(pay.sum()),
        }
        # the outcome: the round's deliveries, units ρ_i, payments r_k, true costs φ·ν_i·c(ρ_i)
        payments = dict(zip(ids.tolist(), pay.tolist(), strict=True))
        return Settlement(payments, offer, outcome, metrics)

    def deviation_gains(
        self,
        ids: np.ndarray,
        *,
        settlement: Settlement,
        faults: FaultDraw | None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Ex-post regret: max(0, best affordable item's r_k − θ_i·c(ρ_k)) − what i got.

        What client i got is r_k − θ_i·c(ρ_k) for the item it delivered, 0 otherwise (a
        decliner is neither paid nor charged). A client that could not reach the server or
        straggled this round has gain 0: no item or refusal changes what it gets. A client
        that did not deliver is credited the best item as if its update would have been
        delivered (selection ``all`` takes every willing client). Affordable: ρ_k ≤ its
        remaining budget at the offer. Self-selecting clients have gain 0 up to rounding.
        Reads the settled offer's menu and budgets, the settlement's outcome and the round's
        ``faults`` (None: nobody was cut off).
        """
        ids = np.asarray(ids, dtype=np.int64)
        gains = np.zeros(ids.size)
        if ids.size == 0:
            return gains
        terms = contract_terms(settlement.offer)
        items = terms.menu.items()
        rho = np.array([i for i, _ in items])
        reward = np.array([r for _, r in items])
        theta = self.config.phi * self.nu[ids]
        u = item_utilities(theta, rho, reward, cost=self.config.cost)
        u = np.where(rho[None, :] <= terms.left[ids, None] * (1 + 1e-12), u, -np.inf)
        best = np.maximum(u.max(axis=1), 0.0)
        got = np.zeros(ids.size)
        o = settlement.outcome
        if o is not None and o.ids.size:
            where = {int(c): j for j, c in enumerate(o.ids.tolist())}
            for n, cid in enumerate(ids.tolist()):
                j = where.get(cid)
                if j is not None:
                    got[n] = o.payments[j] - o.true_cost[j]
        gains = np.maximum(best - got, 0.0)
        if faults is not None:
            cut = ~np.asarray(faults.link_up, dtype=bool)[ids]
            cut |= np.asarray(faults.straggler, dtype=bool)[ids]
            gains[cut] = 0.0
        return gains
