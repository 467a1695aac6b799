"""The leaders' competition within a round: iterated best response on rewards (pure maths).

Each leader s chooses its reward R_s to minimise its own expected server cost (paper 003
Eq. 15 in the expected form of :func:`fedgame.game.leader.expected_server_cost`) given the
rivals' rewards R_-s, with the clients' joint equilibrium
(:func:`fedgame.market.followers.joint_contests`) inside: cost_s(R_s; R_-s). Leaders answer in
turn (Gauss-Seidel) from their monopoly rewards until no reward moves by more than ``tol``
relatively; that fixed point is a Nash equilibrium of the leaders' game (each reward a best
response to the others', as found by the scan-then-Brent search of
:func:`fedgame.game.leader.numeric_reward`), reported as ``converged``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class LeadersPlay:
    """The leaders' rewards, whether their best responses converged, and the sweeps done."""

    rewards: np.ndarray
    converged: bool
    iterations: int


def leaders_equilibrium(
    best_response: Callable[[int, np.ndarray], float],
    start: np.ndarray,
    *,
    tol: float = 1e-4,
    max_iter: int = 20,
) -> LeadersPlay:
    """Iterated best response from ``start`` (module doc).

    ``best_response(s, rewards)`` is leader s's reward answering ``rewards`` (its own entry
    ignored). Converged when a whole sweep moves no reward by more than ``tol``·max(1, R).
    """
    rewards = np.asarray(start, dtype=float).copy()
    for sweep in range(1, max_iter + 1):
        moved = 0.0
        for s in range(rewards.size):
            new = float(best_response(s, rewards.copy()))
            moved = max(moved, abs(new - rewards[s]) / max(1.0, abs(rewards[s])))
            rewards[s] = new
        if moved <= tol:
            return LeadersPlay(rewards, True, sweep)
    return LeadersPlay(rewards, False, max_iter)
