"""Contribution payments: the round's reward R split by each delivered client's Shapley value.

The leader announces R; after the uploads it values every coalition S of the delivered
(noised) updates by v(S), the accuracy (or −loss) of the global model plus S's aggregate
(:mod:`fedgame.learning.coalitions`), estimates each client's Shapley value φ_i in that game
(:mod:`fedgame.game.shapley`: exact, truncated Monte-Carlo or GTG-Shapley) and pays
R·φ_i⁺/Σ_j φ_j⁺ (Shapley values clipped at 0; nothing is paid when none is positive).
The clients' privacy level is their policy's (e.g. ``fixed_rho``), whose ρ sets the noise.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.game.contracts import cost_of
from fedgame.game.economics import RoundOutcome
from fedgame.game.shapley import (
    EXACT_MAX,
    ShapleyEstimate,
    exact_shapley,
    gtg_shapley,
    shapley_shares,
    tmc_shapley,
)
from fedgame.mechanisms.base import FaultDraw, Settlement, Valuation
from fedgame.registry import Example, register
from fedgame.views import (
    ClientValues,
    MarketView,
    Offer,
    Response,
    RoundInfo,
    SetupContext,
    column_of,
    ids_of,
)

if TYPE_CHECKING:
    from fedgame.learning.coalitions import CoalitionEvaluator


class ShapleyConfig(BaseModel):
    """The contribution-payment leader's knobs."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    reward: PositiveFloat = Field(1.0, description="total reward R paid per round (> 0)")
    estimator: Literal["auto", "exact", "tmc", "gtg"] = Field(
        "auto", description="Shapley estimator; auto: exact up to exact_max clients, else gtg"
    )
    exact_max: int = Field(
        8, ge=1, le=EXACT_MAX, description="auto: most delivered clients valued exactly"
    )
    permutations: PositiveInt = Field(20, description="tmc: random permutations per round (>= 1)")
    max_blocks: PositiveInt = Field(
        4, description="gtg: most guided blocks of K permutations per round (>= 1)"
    )
    tol: float = Field(
        0.0, ge=0, description="within-round truncation: |v(N) - v(prefix)| <= tol*|v(N)|"
    )
    tol_round: float = Field(
        0.0, ge=0, description="gtg: all values 0 when |v(N) - v(empty)| <= tol_round"
    )
    conv: float = Field(0.05, gt=0, description="gtg: stop when the mean moved <= conv (rel.)")
    value: Literal["accuracy", "loss"] = Field(
        "accuracy", description="v(S): test accuracy or minus test loss of the coalition model"
    )
    samples: PositiveInt | None = Field(
        512, description="test examples in the valuation set (the first ones; none: all)"
    )
    chunk: PositiveInt = Field(128, description="coalition models per batched evaluation")
    phi: PositiveFloat = Field(
        1.0, description="privacy-cost weight phi of the true cost phi*nu*c(rho) (economics)"
    )
    cost: Literal["linear", "quadratic"] = Field(
        "linear", description="c(rho) of the true cost: rho or rho^2/2 (economics)"
    )


@register("incentive", "shapley", reads=(reads.PRIVACY_VALUE,))
class ShapleyPayments:
    """Pays R·φ_i⁺/Σ_j φ_j⁺ to the delivered clients, φ their estimated Shapley values.

    Declares ``ValuesContributions`` (the model hands it the round's coalition evaluator in
    phase 8; the estimate is kept as ``RoundState.contributions`` and reaches ``settle`` as
    its ``valuation``), ``ReportsOutcome``
    (units: the delivered ρ_i, 0 without one; true cost φ·ν_i·c(ρ_i)) and
    ``MeasuresDeviation`` (only the deviation to declining is searched: a lower bound on
    the regret, see :meth:`deviation_gains`).

    Rounds table: ``shapley_sum`` (Σφ_i = v(N) − v(∅) for the exact estimator),
    ``shapley_evals`` (coalitions evaluated), ``shapley_s`` (seconds of the estimate),
    ``payments_total`` (Σ payments), ``sum_rho``. Clients table: ``shapley`` (φ_i of each delivered
    client).
    """

    Config = ShapleyConfig
    example = Example(
        {"reward": 1.0, "samples": 64}, needs={"policy": {"kind": "fixed", "rho": 1.0}}
    )
    round_columns = ("shapley_sum", "shapley_evals", "shapley_s", "payments_total", "sum_rho")
    client_columns = ("shapley",)
    reports_outcome = True

    def __init__(self, config: ShapleyConfig) -> None:
        self.config = config
        self.nu = np.zeros(0)  # set in prepare; no cross-round memory

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        """Once before round 1: ν by client id (the true costs of the economics columns)."""
        self.nu = np.zeros(ctx.num_clients)
        self.nu[ids_of(ctx.clients)] = column_of(ctx.clients, "privacy_value")

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        return Offer(reward=self.config.reward, plan={"reward": self.config.reward})

    def estimate(
        self, evaluator: CoalitionEvaluator, *, rng: np.random.Generator
    ) -> ShapleyEstimate:
        """φ of the evaluator's K players by the configured estimator."""
        c = self.config
        k = evaluator.players
        kind = c.estimator
        if kind == "auto":
            kind = "exact" if k <= c.exact_max else "gtg"
        if kind == "exact":
            return exact_shapley(evaluator, k)
        if kind == "tmc":
            return tmc_shapley(evaluator, k, permutations=c.permutations, rng=rng, tol=c.tol)
        return gtg_shapley(
            evaluator,
            k,
            rng=rng,
            max_blocks=c.max_blocks,
            tol=c.tol,
            tol_round=c.tol_round,
            conv=c.conv,
        )

    def value_contributions(
        self,
        evaluator: CoalitionEvaluator,
        ids: np.ndarray,
        *,
        info: RoundInfo,
        rng: np.random.Generator,
    ) -> Valuation:
        """φ_i of each delivered client (phase 8, before the aggregate is applied), with the
        estimate's ``shapley_evals`` (coalitions evaluated) and ``shapley_s`` (seconds)."""
        c = self.config
        started = time.perf_counter()
        found = self.estimate(
            evaluator.using(metric=c.value, samples=c.samples, chunk=c.chunk), rng=rng
        )
        seconds = time.perf_counter() - started
        phi = dict(zip(np.asarray(ids).tolist(), found.phi.tolist(), strict=True))
        metrics = {"shapley_evals": float(found.evaluations), "shapley_s": seconds}
        return Valuation(phi, metrics)

    def settle(
        self,
        offer: Offer,
        delivered: Sequence[Response],
        *,
        info: RoundInfo,
        valuation: Valuation | None = None,
    ) -> Settlement:
        """Pays R·φ_i⁺/Σ_j φ_j⁺ by the round's ``valuation`` (nothing without one)."""
        values = {} if valuation is None else valuation.contributions
        ids = ids_of(delivered)
        phi = np.array([values.get(i, 0.0) for i in ids.tolist()])
        pay = shapley_shares(phi, reward=self.config.reward) if values else np.zeros(ids.size)
        rho = column_of(delivered, "rho")
        units = np.where(np.isfinite(rho) & (rho > 0), rho, 0.0)
        true_cost = self.config.phi * self.nu[ids] * cost_of(units, self.config.cost)
        # the outcome: the round's deliveries, units ρ_i, Shapley payments, true costs
        outcome = RoundOutcome(ids, units, pay, true_cost, None)
        found = valuation.metrics if valuation is not None else {}
        metrics = {
            "shapley_sum": float(phi.sum()) if values else math.nan,
            "shapley_evals": float(found.get("shapley_evals", 0.0)),
            "shapley_s": float(found.get("shapley_s", math.nan)),
            "payments_total": float(pay.sum()),
            "sum_rho": float(units.sum()),
        }
        shapley = dict(ClientValues(ids, phi)) if values else {}
        payments = dict(zip(ids.tolist(), pay.tolist(), strict=True))
        return Settlement(payments, offer, outcome, metrics, {"shapley": shapley})

    def deviation_gains(
        self,
        ids: np.ndarray,
        *,
        settlement: Settlement,
        faults: FaultDraw | None = None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Gain of declining: max(0, true cost − payment) of each delivered client, 0 else.

        A lower bound on the ex-post regret: the other deviation the family allows, another
        ρ, changes the client's noised update and so every coalition value; measuring it
        needs the update re-noised at that ρ (the privacy mechanism's noise, which the
        incentive does not see) and a new Shapley estimate per grid point. It is not searched.
        Reads the settlement's outcome.
        """
        del rng, faults
        ids = np.asarray(ids, dtype=np.int64)
        gains = np.zeros(ids.size)
        o = settlement.outcome
        if o is None or o.ids.size == 0:
            return gains
        where = {int(c): j for j, c in enumerate(o.ids.tolist())}
        for n, cid in enumerate(ids.tolist()):
            j = where.get(cid)
            if j is not None:
                gains[n] = max(0.0, o.true_cost[j] - o.payments[j])
        return gains
