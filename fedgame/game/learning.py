"""Learning rules of boundedly rational followers, vectorised over the clients of a behaviour.

A learning client does not know the others' privacy values (note 003 §8 item 15). After each
round the leader broadcasts the delivered total Σρ; a client that delivered infers its rivals'
total S_-i = Σρ − ρ_i, one that did not (declined or straggled) takes S_-i = Σρ. Budgets are
learned relative to the reward, x = ρ/R: Theorem 1's budgets are proportional to R, so the
target x* stays put while R_t grows (note 003 §4.2). Two rules (both ours):

* **log-gradient**: x ← x·exp(η_t·clip(m, −1, 1)) with m = R·S_-i/(S²·φν_i) − 1 the relative
  marginal utility of the realised round (Eq. 21: m = 0 at the first-order condition), and a
  step η_t = η·t^(−κ). With κ = 0 this is the constant-step rule; κ ∈ (1/2, 1] makes it a
  Robbins-Monro stochastic approximation: under independent stragglers S_-i is random, the
  mean step is the expected marginal utility, and the iterates settle at its zero, the
  equilibrium of the exact expected-delivery game (:func:`fedgame.game.contest.
  exact_expected_share`), not at the full-delivery one, and without the random walk a
  constant step keeps up.
* **Hedge** (exponential weights) over a grid of budgets x_k = g_k/(φν_i), g on a log scale in
  (0, 1] (a budget with φν_i·x ≥ 1 costs more than the whole reward). Full information: after
  a round every grid point's utility per unit reward, u_k = x_k/(x_k + S_-i/R) − g_k ∈ [−1, 1],
  is computed from the broadcast; weights are w_k ∝ exp(η_t·Σ_τ u_k,τ) with η_t = η·sqrt(ln K/t)
  (anytime Hedge: external regret O(sqrt(t ln K)) against every grid point). The client plays
  the mean budget of its weights; its utility is concave in ρ, so the mean does at least as
  well as the mixture and the regret bound carries over. The Tullock contest is socially
  concave (the sum of utilities is linear in the budgets on Σρ > 0 and each utility is convex
  in the others' budgets), so the running average of no-regret play converges to a Nash
  equilibrium (Even-Dar, Mansour & Nadav, STOC 2009, Thm 3.5), up to the grid's resolution;
  under stragglers the utilities are those of the realised delivered totals, so the average
  converges to the equilibrium of the exact expected-delivery game.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def step_size(eta: float, t: ArrayLike, decay: float) -> np.ndarray:
    """η_t = η·t^(−κ) for the log-gradient rule (t ≥ 1 counts the client's updates)."""
    return eta * np.maximum(np.asarray(t, dtype=float), 1.0) ** (-decay)


def log_gradient_step(
    x: ArrayLike,
    *,
    reward: ArrayLike,
    rho: ArrayLike,
    others: ArrayLike,
    nu: ArrayLike,
    phi: float,
    eta: ArrayLike,
) -> np.ndarray:
    """One log-gradient step on x = ρ/R from last round's (R, ρ, S_-i), elementwise.

    A client whose rivals delivered nothing (S_-i = 0) raises x by e^η: any positive budget
    would have won the whole reward.
    """
    x = np.asarray(x, dtype=float)
    others = np.asarray(others, dtype=float)
    total = np.asarray(rho, dtype=float) + others
    safe = np.where(total > 0, total, 1.0)
    m = np.asarray(reward, dtype=float) * others / (safe**2 * phi * np.asarray(nu, dtype=float))
    step = np.where((others > 0) & (total > 0), np.clip(m - 1.0, -1.0, 1.0), 1.0)
    return x * np.exp(np.asarray(eta, dtype=float) * step)


def hedge_grid(size: int, *, low: float = 1e-6) -> np.ndarray:
    """The cost grid g_k = φν·x_k: ``size`` points log-spaced in [low, 1)."""
    return np.geomspace(low, 1.0, size + 1)[:-1]


def hedge_payoffs(grid: np.ndarray, rivals_per_reward: ArrayLike) -> np.ndarray:
    """u_k = x_k/(x_k + s) − g_k per unit reward, [clients, K], with x_k = g_k/(φν) and
    s = S_-i/R, written in g: x_k/(x_k + s) = g_k/(g_k + φν·s). ``rivals_per_reward`` is
    φν·S_-i/R per client; where it is 0 any budget wins everything (u_k = 1 − g_k)."""
    s = np.asarray(rivals_per_reward, dtype=float)[:, None]
    g = grid[None, :]
    return g / (g + s) - g


def hedge_weights(cumulative: np.ndarray, eta: ArrayLike) -> np.ndarray:
    """exp(η·U_k) normalised per row (numerically stable), U the cumulative payoffs."""
    scaled = np.asarray(eta, dtype=float).reshape(-1, 1) * cumulative
    scaled -= scaled.max(axis=1, keepdims=True)
    w = np.exp(scaled)
    return w / w.sum(axis=1, keepdims=True)


def hedge_rate(eta: float, t: ArrayLike, size: int) -> np.ndarray:
    """Anytime Hedge rate η·sqrt(ln K / t)."""
    return eta * np.sqrt(np.log(size) / np.maximum(np.asarray(t, dtype=float), 1.0))
