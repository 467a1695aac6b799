"""QI-DPFL reward mechanisms: the optimal reward of Theorem 2 and the paper's baselines.

Paper 003 (Yuan & Wang 2024) §IV and §V; note 003 §4.2 and §6.4. All four remove infeasible
clients first (note 003 §4.1) and pay reward shares (see :mod:`.game`, which also describes the
options that make the leader play the real game: budgets, expected delivery, the optimal
active set and a reward cap). Clients are expected to best-respond (policy ``best_response``:
ρ_i = C_i·R_t).

* ``qi_dpfl``: R_t* = sqrt(A_t·π^(1-t)/(1-γ)) (Theorem 2) with A_t over the active players, or
  the general optimum when the leader anticipates stragglers, binding budgets or a cartel.
* ``max``: the paper's "largest possible reward", R_max. The paper's range (Eq. 33) needs
  unreported accuracy-fit constants, so R_max = ``high``·R_t* (default 3) [ours, documented].
* ``random``: R_t uniform on [``low``·R_t*, ``high``·R_t*] (default [0.5, 3]) [ours].
* ``fixed``: a constant R every round.

By convexity of the per-round cost A_t/R + (1-γ)π^(t-1)R (Eq. 29), the expected cost orders
QI-DPFL < Random < Max for these defaults; accuracy grows with R (more budget, less noise).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, PositiveFloat, model_validator

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.mechanisms.incentive.game import GameConfig, GameIncentive, LeaderProblem
from fedgame.registry import register


@register("incentive", "qi_dpfl", reads=reads.contest)
class QiDpfl(GameIncentive):
    """Theorem 2's optimal reward R_t* after feasibility removal (QI-DPFL, paper 003)."""

    class Config(GameConfig):
        pass

    def choose_reward(self, problem: LeaderProblem, *, t: int) -> float:
        return self.optimal_reward(problem, t=t)


@register("incentive", "max", reads=reads.contest)
class MaxReward(GameIncentive):
    """Paper 003's Max baseline: R_t = ``high``·R_t* every round (R_max of Eq. 33, ours)."""

    class Config(GameConfig):
        high: PositiveFloat = Field(3.0, description="R_max as a multiple of R_t* (> 0)")

    config: Config

    def choose_reward(self, problem: LeaderProblem, *, t: int) -> float:
        return self.config.high * self.optimal_reward(problem, t=t)


@register("incentive", "random", reads=reads.contest)
class RandomReward(GameIncentive):
    """Paper 003's Random baseline: R_t ~ U[``low``·R_t*, ``high``·R_t*] (range ours)."""

    class Config(GameConfig):
        low: PositiveFloat = Field(0.5, description="lowest reward as a multiple of R_t* (<= high)")
        high: PositiveFloat = Field(3.0, description="highest reward as a multiple of R_t* (> 0)")

        @model_validator(mode="after")
        def _ordered(self) -> Any:
            if self.low > self.high:
                raise ScenarioError("low", self.low, f"must be <= high ({self.high})")
            return self

    config: Config

    def choose_reward(self, problem: LeaderProblem, *, t: int) -> float:
        if self.rng is None:  # prepare() was not called (used outside a model)
            raise ScenarioError("incentive", "random", "needs prepare() before offer()")
        factor = float(self.rng.uniform(self.config.low, self.config.high))
        return factor * self.optimal_reward(problem, t=t)


@register("incentive", "fixed", reads=reads.contest)
class FixedReward(GameIncentive):
    """A constant total reward R every round (feasibility removal and shares as the others)."""

    class Config(GameConfig):
        reward: float = Field(1.0, gt=0, description="total reward R paid per round (> 0)")

    config: Config

    def choose_reward(self, problem: LeaderProblem, *, t: int) -> float:
        return float(self.config.reward)
