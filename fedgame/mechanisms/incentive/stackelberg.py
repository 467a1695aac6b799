"""Numeric Stackelberg leader for follower utilities with no closed form.

Followers: U_i = (ρ_i/Σρ)·R - φ·ν_i·c(ρ_i) with c linear (QI-DPFL Eqs. 16-17) or quadratic
(ours), optionally capped at ρ_i ≤ ``cap``. Their Nash equilibrium is found by damped
best-response iteration and the leader's reward by a bounded search over R minimising the
round's server cost (Eq. 15) at that equilibrium (:mod:`fedgame.game.equilibrium`). With the
linear uncapped family this reproduces Theorem 2. A follower solve that does not converge is
reported with a warning naming its residual; the round continues with the last iterate and
``solver_converged`` = 0 in the rounds table.
"""

from __future__ import annotations

import math
import warnings
from typing import Literal

import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt, model_validator

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.game.equilibrium import FollowerUtility, solve_followers, solve_leader
from fedgame.game.stackelberg import server_cost
from fedgame.mechanisms.incentive.game import GameConfig, GameIncentive, LeaderProblem
from fedgame.registry import register


@register("incentive", "stackelberg", reads=reads.contest)
class NumericStackelberg(GameIncentive):
    """Leader's reward by search over [r_min, r_max], followers by best-response iteration."""

    remove_infeasible = False  # the numeric equilibrium finds the active set itself

    class Config(GameConfig):
        cost: Literal["linear", "quadratic"] = Field(
            "linear", description="privacy cost phi*nu*c(rho): linear (paper) or quadratic"
        )
        cap: PositiveFloat | None = Field(
            None, description="budget cap rho_i <= cap for every follower (zCDP rho; none)"
        )
        r_min: PositiveFloat = Field(1e-6, description="smallest reward searched (> 0, < r_max)")
        r_max: PositiveFloat = Field(1e3, description="largest reward searched (> r_min)")
        tol: float = Field(1e-9, gt=0, description="follower-equilibrium tolerance (> 0)")
        max_iter: PositiveInt = Field(500, description="best-response iterations at most (>= 1)")
        warm_start: bool = Field(
            True, description="start best responses from the share-function solution"
        )

        @model_validator(mode="after")
        def _ordered(self) -> NumericStackelberg.Config:
            if self.r_min >= self.r_max:
                raise ScenarioError("r_min", self.r_min, f"must be < r_max ({self.r_max})")
            return self

    config: Config

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.quadratic = config.cost == "quadratic"
        self.cap = math.inf if config.cap is None else float(config.cap)

    def utility(self, nu: np.ndarray, reward: float) -> FollowerUtility:
        caps = None if math.isinf(self.cap) else np.full(nu.size, self.cap)
        c = self.config
        return FollowerUtility(nu, reward, c.phi, cost=c.cost, caps=caps)

    def equilibrium(self, nu: np.ndarray, reward: float):
        c = self.config
        return solve_followers(
            self.utility(nu, reward),
            analytic=True,
            tol=c.tol,
            max_iter=c.max_iter,
            warm_start=c.warm_start,
        )

    def choose_reward(self, problem: LeaderProblem, *, t: int) -> float:
        return self.priced(problem, t=t)[0]

    def priced(self, problem: LeaderProblem, *, t: int) -> tuple[float, tuple[float, float]]:
        """The searched R_t and the (converged, residual) of the followers' solve at it."""
        nu, sizes = problem.nu, problem.sizes
        params = self.params()
        t = min(t, params.rounds)

        def cost(reward: float) -> float:
            rho = self.equilibrium(nu, reward).rho
            if not np.any(rho > 0):
                return math.inf
            return server_cost(reward, rho=rho, data_sizes=sizes, t=t, params=params).total

        best = solve_leader(cost, bounds=(self.config.r_min, self.config.r_max), xatol=1e-6)
        eq = self.equilibrium(nu, best.reward)
        if not eq.converged:
            warnings.warn(
                f"incentive 'stackelberg': follower best responses did not converge in round {t} "
                f"(residual {eq.residual:.3g} after {eq.iterations} sweeps); continuing with the "
                "last iterate",
                stacklevel=2,
            )
        return best.reward, (float(eq.converged), eq.residual)
