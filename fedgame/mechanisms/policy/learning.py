"""Boundedly rational followers: learn the zCDP budget from the leader's broadcast, batched.

The learning rules and what they converge to are in :mod:`fedgame.game.learning`: a
log-gradient step on the realised utility (``rule: log_gradient``; a decreasing step
``decay`` > 1/2 makes it a stochastic approximation that settles under stragglers) and
exponential weights over a budget grid (``rule: hedge``, AdaHedge's adaptive rate by
default). Under independent stragglers both settle at the equilibrium of the exact
expected-delivery game (:func:`fedgame.game.learning.expected_delivery_equilibrium`).
The feedback is the delivered total Σρ the game incentives broadcast as
``Offer.plan["sum_rho_prev"]``; a client knows only its own ν, its own last budget and
whether it delivered (its ``participations`` count grew). Every client's state is a row of
arrays indexed by client id, updated for all clients of the behaviour at once. The distance
of the play to the complete-information (certainty-equivalent) equilibrium is measured for
every policy by the model's round check (``eq_distance``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.game.learning import (
    adaptive_rate,
    hedge_grid,
    hedge_payoffs,
    hedge_rate,
    hedge_weights,
    log_gradient_step,
    mixability_gap,
    step_size,
)
from fedgame.mechanisms.policy.market import contest_of, rho_left
from fedgame.registry import register
from fedgame.views import ClientView, MarketView, Offer, Response, Responses, column_of, ids_of

__all__ = ["Learning", "log_gradient_step"]


class _State:
    """Per-client learning state, as arrays indexed by client id (grown on demand)."""

    def __init__(self, grid_size: int) -> None:
        self.size = 0
        self.grid_size = grid_size
        self.started = np.zeros(0, dtype=bool)
        self.x = np.zeros(0)
        self.rho = np.zeros(0)
        self.reward = np.zeros(0)
        self.participations = np.zeros(0, dtype=np.int64)
        self.updates = np.zeros(0, dtype=np.int64)
        self.payoffs = np.zeros((0, grid_size))
        self.gap = np.zeros(0)

    def ensure(self, top: int) -> None:
        if top < self.size:
            return
        new = max(top + 1, 2 * self.size)
        extra = new - self.size
        self.started = np.concatenate([self.started, np.zeros(extra, dtype=bool)])
        self.x = np.concatenate([self.x, np.zeros(extra)])
        self.rho = np.concatenate([self.rho, np.zeros(extra)])
        self.reward = np.concatenate([self.reward, np.zeros(extra)])
        self.participations = np.concatenate([self.participations, np.zeros(extra, dtype=np.int64)])
        self.updates = np.concatenate([self.updates, np.zeros(extra, dtype=np.int64)])
        self.payoffs = np.concatenate([self.payoffs, np.zeros((extra, self.grid_size))])
        self.gap = np.concatenate([self.gap, np.zeros(extra)])
        self.size = new


@register("policy", "learning", reads=(reads.PRIVACY_VALUE, *reads.BUDGET))
class Learning:
    """Learn ρ/R from the broadcast Σρ: ``log_gradient`` or ``hedge`` (bounded information).

    Config: ``rule``; ``eta`` the step (log-gradient) or the scale of the anytime Hedge rate;
    ``decay`` κ of the log-gradient step η·t^(−κ) (0: constant); ``rate`` of Hedge
    (``adaptive``: AdaHedge's ln K/Δ, no tuning; ``anytime``: η·sqrt(ln K/t)); ``init`` the
    first budget as a multiple of the homogeneous-ν equilibrium share (n−1)/(n²φν)
    (log-gradient; Hedge starts from uniform weights); ``grid`` the number of Hedge budgets;
    ``rho_min`` the smallest budget played.
    """

    chooses = "rho"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        rule: Literal["log_gradient", "hedge"] = Field(
            "log_gradient", description="learning rule: log_gradient step or hedge over a grid"
        )
        eta: float = Field(
            0.5,
            gt=0,
            le=2,
            description="step (log_gradient) or anytime rate scale (hedge), in (0, 2]",
        )
        decay: float = Field(
            0.6, ge=0, le=1, description="kappa in [0, 1] of the step eta*t^-kappa (0: constant)"
        )
        rate: Literal["adaptive", "anytime"] = Field(
            "adaptive", description="hedge rate: adaptive (AdaHedge) or anytime eta*sqrt(lnK/t)"
        )
        init: PositiveFloat = Field(
            0.5, description="first budget as a multiple of the homogeneous equilibrium share"
        )
        grid: PositiveInt = Field(
            256, ge=2, le=1024, description="number of hedge budgets on the log grid, 2-1024"
        )
        rho_min: PositiveFloat = Field(1e-12, description="smallest zCDP budget played (> 0)")

    def __init__(self, config: Config) -> None:
        self.config = config
        self.state = _State(config.grid)
        self.grid = hedge_grid(config.grid)

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        """One client's move (``respond_all`` for it alone)."""
        return self.respond_all(offer, clients=(me,), market=market)[0]

    def respond_all(
        self, offer: Offer, *, clients: Sequence[ClientView], market: MarketView
    ) -> Responses:
        """Update every client's learned x = ρ/R from last round, then play ρ = x·R."""
        ids = ids_of(clients)
        reward = float(offer.reward)
        if reward <= 0 or not ids.size:
            return Responses(ids, np.zeros(ids.size, dtype=bool), why="no_reward")
        cfg, st = self.config, self.state
        st.ensure(int(ids.max()))
        phi = float(offer.plan.get("phi", 1.0))
        nu = column_of(clients, "privacy_value")
        done = column_of(clients, "participations", np.int64)
        fresh = ~st.started[ids]
        if fresh.any():
            self._start(ids[fresh], nu[fresh], phi, offer, market)
        total = float(offer.plan.get("sum_rho_prev", math.nan))
        learn = ~fresh & (st.reward[ids] > 0)
        if math.isfinite(total) and learn.any():
            self._update(ids[learn], nu[learn], done[learn], phi, total)
        x = np.clip(st.x[ids], cfg.rho_min / reward, 1.0 / (phi * nu))
        rho = x * reward
        st.x[ids], st.rho[ids] = x, rho
        st.reward[ids], st.participations[ids] = reward, done
        ok = rho <= rho_left(clients)
        return Responses(ids, ok, rho=np.where(ok, rho, math.nan), why="budget")

    def _start(
        self, ids: np.ndarray, nu: np.ndarray, phi: float, offer: Offer, market: MarketView
    ) -> None:
        st = self.state
        if self.config.rule == "hedge":
            weights = np.full(self.grid.size, 1.0 / self.grid.size)
            st.x[ids] = float(weights @ self.grid) / (phi * nu)
        else:  # init × the homogeneous-ν equilibrium share, from own ν and the player count
            n = max(int(contest_of(offer, market).players.sum()), 2)
            st.x[ids] = self.config.init * (n - 1) / (n * n * phi * nu)
        st.started[ids] = True

    def _update(
        self, ids: np.ndarray, nu: np.ndarray, done: np.ndarray, phi: float, total: float
    ) -> None:
        """One learning step from last round's (R, ρ) and the broadcast delivered total."""
        st, cfg = self.state, self.config
        delivered = done > st.participations[ids]
        own = st.rho[ids]
        others = np.maximum(np.where(delivered, total - own, total), 0.0)
        st.updates[ids] += 1
        t = st.updates[ids]
        if cfg.rule == "hedge":
            payoffs = hedge_payoffs(self.grid, phi * nu * others / st.reward[ids])
            cumulative = st.payoffs[ids]
            if cfg.rate == "adaptive":  # Δ += this round's mixability gap, at the old weights
                eta = adaptive_rate(st.gap[ids], self.grid.size)
                played = hedge_weights(cumulative, eta)
                st.gap[ids] += mixability_gap(played, payoffs, eta)
                eta = adaptive_rate(st.gap[ids], self.grid.size)
            else:
                eta = hedge_rate(cfg.eta, t, self.grid.size)
            cumulative += payoffs
            st.payoffs[ids] = cumulative
            weights = hedge_weights(cumulative, eta)
            # a row-wise sum, not a matrix product: the same bits for one client or many
            st.x[ids] = (weights * self.grid).sum(axis=-1) / (phi * nu)
            return
        st.x[ids] = log_gradient_step(
            st.x[ids],
            reward=st.reward[ids],
            rho=own,
            others=others,
            nu=nu,
            phi=phi,
            eta=step_size(cfg.eta, t, cfg.decay),
        )
