"""What the posted-price and auction leaders share: the cost model, Eq. 15 and the outcome.

Both buy zCDP budget ρ from clients whose privacy cost is the contest's φ·ν_i·c(ρ) (paper
003 Eq. 17; c(ρ) = ρ, or ρ² with ``cost: quadratic``) and account each round with QI-DPFL's
server cost (Eq. 15, :func:`fedgame.game.stackelberg.server_cost`) at the delivered budgets
and the total paid, with the same constants as the contest's leader (``GameConfig``), so
the families are compared on one scale. ``settle`` returns a
:class:`fedgame.mechanisms.base.Settlement` whose outcome is the round's
:class:`fedgame.game.economics.RoundOutcome`.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from fedgame.game.economics import RoundOutcome
from fedgame.game.stackelberg import ServerCostParams, server_cost
from fedgame.views import SetupContext, column_of, ids_of


class BuyerConfig(BaseModel):
    """The cost model and Eq. 15's constants (as ``GameConfig`` has them)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    phi: PositiveFloat = Field(
        1.0, description="privacy-cost weight phi_1 > 0 (utility units per unit zCDP rho)"
    )
    cost: Literal["linear", "quadratic"] = Field(
        "linear", description="privacy cost phi*nu*c(rho): linear (paper) or quadratic"
    )
    gamma: float = Field(
        0.5, gt=0, lt=1, description="weight gamma in (0, 1) of accuracy loss vs payments (Eq. 15)"
    )
    discount: float = Field(
        0.9429, gt=0, le=1, description="discount factor pi in (0, 1] (Table I: 0.9429 MNIST)"
    )
    beta: PositiveFloat = Field(1.0, description="smoothness beta > 0 (Assumption 1)")
    lam: PositiveFloat = Field(1.0, description="strong convexity lambda > 0 (Assumption 2)")
    clip: PositiveFloat = Field(1.0, description="clipping bound C > 0 in the server cost")
    dim: PositiveInt | None = Field(
        None, description="noised coordinates d in Eq. 15 (none: the model's parameter count)"
    )
    grad_bound: float = Field(0.0, ge=0, description="gradient bound V >= 0 (Eq. 15 constant)")


class Buyer:
    """Base of a leader that buys ρ: Eq. 15, true costs and the round's outcome.

    Kept on the leader: its set-up only (``prepare``: |D_i| and the true ν by id, T, d);
    the round travels in the offer's terms and the settlement.
    """

    config: BuyerConfig
    reports_outcome = True

    def __init__(self, config: BuyerConfig) -> None:
        self.config = config
        self.quadratic = config.cost == "quadratic"
        self.rounds = 1
        self.dim = config.dim or 7850
        self.sizes = np.zeros(0)  # |D_i| by client id
        self.nu = np.zeros(0)  # true ν_i by client id (to account true costs, never to decide)
        self.rng: np.random.Generator | None = None

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        self.rounds = ctx.rounds
        if self.config.dim is None and ctx.learner is not None:
            self.dim = int(ctx.learner.num_params)
        ids = ids_of(ctx.clients)
        n = int(ids.max()) + 1 if ids.size else 0
        self.sizes, self.nu = np.ones(n), np.ones(n)
        self.sizes[ids] = np.maximum(column_of(ctx.clients, "dataset_size"), 1.0)
        self.nu[ids] = column_of(ctx.clients, "privacy_value")
        self.rng = rng

    def params(self) -> ServerCostParams:
        c = self.config
        return ServerCostParams(
            gamma=c.gamma,
            discount=c.discount,
            beta=c.beta,
            lam=c.lam,
            clip=c.clip,
            dim=self.dim,
            rounds=self.rounds,
            grad_bound=c.grad_bound,
        )

    def true_cost(self, ids: np.ndarray, rho: np.ndarray) -> np.ndarray:
        """φ·ν_i·c(ρ_i) at the true ν (money units)."""
        c = rho * rho if self.quadratic else rho
        return self.config.phi * self.nu[ids] * c

    def account(
        self,
        ids: np.ndarray,
        rho: np.ndarray,
        pay: np.ndarray,
        *,
        t: int,
        reported: np.ndarray | None = None,
    ) -> tuple[RoundOutcome, dict[str, float]]:
        """The round's outcome and its Eq. 15 columns."""
        cost = self.true_cost(ids, rho)
        outcome = RoundOutcome(ids, rho, pay, cost, reported)
        live = rho > 0
        acc = paid = math.nan
        if live.any():
            found = server_cost(
                float(pay.sum()),
                rho=rho[live],
                data_sizes=self.sizes[ids[live]],
                t=min(max(t, 1), self.rounds),
                params=self.params(),
            )
            acc, paid = found.accuracy, found.payment
        return outcome, {
            "sum_rho": float(rho.sum()),
            "sellers": float(live.sum()),
            "payments_total": float(pay.sum()),
            "server_cost_accuracy": acc,
            "server_cost_payment": paid,
            "server_cost": acc + paid,
        }


#: the Eq. 15 columns every buyer reports
BUYER_COLUMNS = (
    "sum_rho",
    "sellers",
    "payments_total",
    "server_cost_accuracy",
    "server_cost_payment",
    "server_cost",
)
