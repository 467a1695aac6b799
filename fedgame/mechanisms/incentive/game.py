"""Shared machinery of the Stackelberg reward mechanisms (QI-DPFL, paper 003 §III-B).

The leader announces R_t; followers pick zCDP budgets ρ_i; each delivered client is paid its
share (ρ_i / Σ_j ρ_j)·R_t, the sum running over the clients whose updates were delivered this
round (so payments add up to R_t whenever anyone delivered). Subclasses choose R_t. The
round's ``welfare`` is the clients' game utilities Σ(r_i - φν_iρ_i) minus the server cost.

Who plays: the reachable clients the selection rule deems eligible (``eligible_ids()`` of
the ``selection`` component when it has one, e.g. ``emd_threshold``; everyone otherwise).
Closed-form mechanisms then remove the most expensive clients until Theorem 1's interior
condition holds (note 003 §4.1); removed and ineligible clients are ``Offer.excluded``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from fedgame.game.equilibrium import FollowerUtility
from fedgame.game.stackelberg import ServerCostParams, feasible_set, server_cost
from fedgame.views import MarketView, Offer, Response, RoundInfo, SetupContext, column_of, ids_of

ROUND_COLUMNS = (
    "reward",
    "sum_rho",
    "server_cost_accuracy",
    "server_cost_payment",
    "server_cost",
    "payments_total",
    "welfare",
    "nash_gap_max",
    "nash_gap_mean",
    "removed_for_feasibility",
    "solver_converged",
    "solver_residual",
)
CLIENT_COLUMNS = ("rho", "payment", "privacy_cost", "game_utility", "nash_gap", "removed")


class GameConfig(BaseModel):
    """Constants of the game and of the server cost, Eq. 15 (none is given by the paper).

    ``phi`` is φ_1; ``dim`` the number d of noised coordinates (default: the model's parameter
    count, read from the learner before round 1: 7850 for logreg on 28×28 images, 650 on
    digits); ``lam`` (λ) is the knob that sets the noise level through R_t* (note 003 §4.2).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    phi: PositiveFloat = 1.0
    gamma: float = Field(0.5, gt=0, lt=1)
    discount: float = Field(0.9429, gt=0, le=1)
    beta: PositiveFloat = 1.0
    lam: PositiveFloat = 1.0
    clip: PositiveFloat = 1.0
    dim: PositiveInt | None = None
    grad_bound: float = Field(0.0, ge=0)


class GameIncentive:
    """Base leader: player set, feasibility removal, reward-share payments and diagnostics."""

    round_columns = ROUND_COLUMNS
    client_columns = CLIENT_COLUMNS
    remove_infeasible = True
    quadratic = False
    cap = math.inf

    def __init__(self, config: GameConfig) -> None:
        self.config = config
        self.rounds = 1
        self.dim = config.dim or 7850
        self.selection: Any = None
        self.rng: np.random.Generator | None = None
        self.nu: dict[int, float] = {}
        self.sizes: dict[int, int] = {}
        self.removed: frozenset[int] = frozenset()
        self.players: tuple[int, ...] = ()
        self.solver = (1.0, 0.0)  # (converged, residual) of the round's numeric solve
        self.last_sum_rho = math.nan
        self._round: dict[str, float] = {}
        self._clients: dict[str, dict[int, float]] = {}

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        self.rounds = ctx.rounds
        learner = ctx.components.get("learner")
        if self.config.dim is None and learner is not None:
            self.dim = int(learner.num_params)
        self.selection = ctx.components.get("selection")
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

    def choose_reward(self, nu: np.ndarray, sizes: np.ndarray, *, t: int) -> float:
        """R_t for the active players (ν, |D|); subclasses implement it."""
        raise NotImplementedError

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        eligible = getattr(self.selection, "eligible_ids", None)
        allowed = eligible() if callable(eligible) else None
        players = [
            c for c in market.clients if c.reachable and (allowed is None or c.client_id in allowed)
        ]
        self.nu = {c.client_id: c.privacy_value for c in players}
        self.sizes = {c.client_id: c.dataset_size for c in players}
        nu = np.array([c.privacy_value for c in players], dtype=float)
        active = np.ones(len(players), dtype=bool)
        if self.remove_infeasible:
            active = feasible_set(nu) if len(players) else active
        self.removed = frozenset(c.client_id for c, a in zip(players, active) if not a)
        self.players = tuple(c.client_id for c, a in zip(players, active) if a)
        self.solver = (1.0, 0.0)
        reward = 0.0
        if len(self.players) >= 2:
            sizes = np.array([self.sizes[i] for i in self.players], dtype=float)
            reward = self.choose_reward(nu[active], sizes, t=max(info.round, 1))
        outsiders = {c.client_id for c in market.clients} - set(self.players)
        plan = {
            "phi": self.config.phi,
            "quadratic": float(self.quadratic),
            "cap": self.cap,
            "sum_rho_prev": self.last_sum_rho,
        }
        return Offer(reward=reward, plan=plan, excluded=frozenset(outsiders))

    def settle(
        self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo
    ) -> dict[int, float]:
        ids = ids_of(delivered).tolist()
        rho = np.nan_to_num(column_of(delivered, "rho"), nan=0.0, posinf=0.0, neginf=0.0)
        total = float(rho.sum())
        pay = rho / total * offer.reward if total > 0 else np.zeros(rho.size)
        nu = np.array([self.nu.get(i, 1.0) for i in ids], dtype=float)
        phi = self.config.phi
        cost = phi * nu * (rho**2 if self.quadratic else rho)
        gaps = np.full(rho.size, math.nan)
        if rho.size and offer.reward > 0:
            caps = None if math.isinf(self.cap) else np.full(rho.size, self.cap)
            kind: Literal["linear", "quadratic"] = "quadratic" if self.quadratic else "linear"
            u = FollowerUtility(nu, offer.reward, phi, cost=kind, caps=caps)
            gaps = u.deviation_gaps(np.minimum(rho, u.bounds()[1]))
        acc = pay_term = math.nan
        if total > 0:
            sizes = np.array([self.sizes.get(i, 1) for i in ids], dtype=float)
            sc = server_cost(
                offer.reward, rho=rho, data_sizes=sizes, t=max(info.round, 1), params=self.params()
            )
            acc, pay_term = sc.accuracy, sc.payment
        self.last_sum_rho = total
        self._round = {
            "reward": offer.reward,
            "sum_rho": total,
            "server_cost_accuracy": acc,
            "server_cost_payment": pay_term,
            "server_cost": acc + pay_term,
            "payments_total": float(pay.sum()),
            "welfare": float((pay - cost).sum()) - (acc + pay_term),
            "nash_gap_max": float(np.max(gaps)) if gaps.size else math.nan,
            "nash_gap_mean": float(np.mean(gaps)) if gaps.size else math.nan,
            "removed_for_feasibility": float(len(self.removed)),
            "solver_converged": self.solver[0],
            "solver_residual": self.solver[1],
        }
        removed = {i: 1.0 for i in self.removed} | {i: 0.0 for i in self.players}
        self._clients = {
            "rho": dict(zip(ids, rho.tolist())),
            "payment": dict(zip(ids, pay.tolist())),
            "privacy_cost": dict(zip(ids, cost.tolist())),
            "game_utility": dict(zip(ids, (pay - cost).tolist())),
            "nash_gap": dict(zip(ids, gaps.tolist())),
            "removed": removed,
        }
        return dict(zip(ids, pay.tolist()))

    def round_metrics(self) -> dict[str, float]:
        return dict(self._round)

    def client_metrics(self) -> dict[str, dict[int, float]]:
        return {k: dict(v) for k, v in self._clients.items()}
