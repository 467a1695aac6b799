"""The leader's reward when the world is not the paper's: stragglers, budgets, a chosen set.

Paper 003's leader minimises the round's server cost (Eq. 15) given the followers' response
ρ*(R) (Theorem 2). Here the cost is the *expected* one (ours): each player's update arrives
with probability p_i, independently, so the delivered set D is random, and the certainty
equivalent of Eq. 15 replaces the sums over D by their expectations,

    accuracy(R) = 2βγ/(λ²T²)·(V² + 2dC²·Σ_i p_i/(|D_i|²ρ_i) / (Σ_i p_i)²)
    payment(R)  = (1−γ)·π^(t−1)·R·(1 − Π_i (1 − p_i))     (R is paid iff anyone delivers)

over the players with ρ_i > 0; with p ≡ 1 it is Eq. 15. When the followers' budgets are
proportional to R (no binding cap: ρ = c·R, the contest is homogeneous of degree 1) the
accuracy term is scale·V² + A'/R and the optimum has Theorem 2's form
R* = sqrt(A'/((1−γ)π^(t−1)·P)), P = 1 − Π(1 − p_i). With binding budget caps ρ(R) is only
piecewise linear and the optimum is found numerically (log-grid scan, then Brent).

The leader may also choose whom to admit (:func:`optimal_active_set`) instead of removing only
the clients that Theorem 1 cannot place, and cap its reward (:func:`capped_reward`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from fedgame.errors import ScenarioError
from fedgame.game.stackelberg import (
    ServerCost,
    ServerCostParams,
    active_coefficients,
    feasible_set,
)

#: log-grid scanned for the numeric optimum: factors of the uncapped R* (down, up), points
_SCAN = (1e-3, 1e2, 121)


def _arrays(rho: ArrayLike, sizes: ArrayLike, p: ArrayLike | None) -> tuple[np.ndarray, ...]:
    rho = np.asarray(rho, dtype=float)
    sizes = np.asarray(sizes, dtype=float)
    p_arr = np.ones(rho.size) if p is None else np.asarray(p, dtype=float)
    if rho.shape != sizes.shape or p_arr.shape != rho.shape:
        raise ScenarioError("rho", rho.shape, "one budget, size and probability per player")
    return rho, sizes, p_arr


def expected_server_cost(
    reward: float,
    *,
    rho: ArrayLike,
    data_sizes: ArrayLike,
    p: ArrayLike | None = None,
    t: int,
    params: ServerCostParams,
) -> ServerCost:
    """Expected round-t server cost (module doc); Eq. 15 when p ≡ 1. Infinite accuracy term
    when nobody contributes (no update can arrive)."""
    rho, sizes, p_arr = _arrays(rho, data_sizes, p)
    live = (rho > 0) & (p_arr > 0)
    payment = (1 - params.gamma) * params.discount ** (t - 1) * reward
    if not live.any():
        return ServerCost(accuracy=float("inf"), payment=0.0)
    q = p_arr[live]
    noise = 2 * params.dim * params.clip**2 * np.sum(q / (sizes[live] ** 2 * rho[live]))
    accuracy = params.scale * (params.grad_bound**2 + noise / q.sum() ** 2)
    reached = 1.0 - float(np.prod(1.0 - q))
    return ServerCost(accuracy=float(accuracy), payment=float(payment * reached))


def proportional_reward(
    coeff: ArrayLike,
    data_sizes: ArrayLike,
    *,
    p: ArrayLike | None = None,
    t: int,
    params: ServerCostParams,
) -> float:
    """R* = sqrt(A'/((1−γ)π^(t−1)·P)) for followers playing ρ = coeff·R (module doc).

    ``coeff`` are the budgets at R = 1; with p ≡ 1 and Theorem 1's C_i this is Theorem 2.
    Raises when no player contributes.
    """
    coeff, sizes, p_arr = _arrays(coeff, data_sizes, p)
    live = (coeff > 0) & (p_arr > 0)
    if not live.any():
        raise ScenarioError("coeff", coeff.tolist(), "at least one contributing player")
    q = p_arr[live]
    a = params.scale * 2 * params.dim * params.clip**2
    a *= np.sum(q / (sizes[live] ** 2 * coeff[live])) / q.sum() ** 2
    reached = 1.0 - float(np.prod(1.0 - q))
    return float(np.sqrt(a / ((1 - params.gamma) * params.discount ** (t - 1) * reached)))


def numeric_reward(
    cost: Callable[[float], float], *, around: float, scan: tuple[float, float, int] = _SCAN
) -> float:
    """argmin of ``cost(R)`` near ``around``: a log-grid scan over [around·lo, around·hi],
    then bounded Brent on log R between the best point's neighbours (the cost need not be
    convex once budget caps bind, so the scan guards against a local minimum)."""
    from scipy.optimize import minimize_scalar

    if not (np.isfinite(around) and around > 0):
        raise ScenarioError("around", around, "a finite number > 0")
    lo, hi, count = scan
    grid = np.linspace(np.log(around * lo), np.log(around * hi), count)
    values = np.array([cost(float(np.exp(u))) for u in grid])
    k = int(np.argmin(values))
    left, right = grid[max(k - 1, 0)], grid[min(k + 1, count - 1)]
    res = minimize_scalar(
        lambda u: cost(float(np.exp(u))),
        bounds=(left, right),
        method="bounded",
        options={"xatol": 1e-10},
    )
    best = float(np.exp(res.x)) if res.fun <= values[k] else float(np.exp(grid[k]))
    return best


def capped_reward(reward: float, cap: float | None) -> float:
    """min(R, cap): a leader that never pays more than ``cap`` per round (None: no cap)."""
    return float(reward if cap is None else min(reward, cap))


def subset_accuracy_constant(
    nu: np.ndarray, sizes: np.ndarray, *, phi: float, params: ServerCostParams
) -> float:
    """Theorem 2's A for the contest of exactly these clients (Theorem 1 on their active set);
    inf when fewer than two of them are active."""
    if nu.size < 2:
        return float("inf")
    coeff = active_coefficients(nu, phi=phi)
    live = coeff > 0
    if live.sum() < 2:
        return float("inf")
    p = params
    num = 4 * p.dim * p.gamma * p.beta * p.clip**2 / (p.rounds**2 * p.lam**2)
    return float(num * np.sum(1.0 / (coeff[live] * sizes[live] ** 2)) / live.sum() ** 2)


def window_accuracy_constants(
    nu: ArrayLike, data_sizes: ArrayLike, *, phi: float, params: ServerCostParams
) -> tuple[np.ndarray, np.ndarray]:
    """(order, A[i, j]): clients sorted by ν, and A of the window of sorted clients i..j.

    A window whose top clients Theorem 1 cannot place plays the equilibrium of its feasible
    lower part, itself a window, so only feasible windows, (k−1)·ν_(j) < Σ_{i..j} ν, get a
    finite value (inf elsewhere and for single clients). O(N³) time, O(N²) memory.
    """
    nu = np.asarray(nu, dtype=float)
    sizes = np.asarray(data_sizes, dtype=float)
    order = np.argsort(nu, kind="stable")
    nu_s, w = nu[order], 1.0 / sizes[order] ** 2
    n = nu.size
    p = params
    num = 4 * p.dim * p.gamma * p.beta * p.clip**2 / (p.rounds**2 * p.lam**2)
    out = np.full((n, n), np.inf)
    for i in range(n - 1):
        members = nu_s[i:]
        k = np.arange(1, members.size + 1, dtype=float)[:, None]  # row: window i..i+k-1
        tot = np.cumsum(members)[:, None]
        c = (k - 1) * (tot - (k - 1) * members[None, :]) / (phi * tot**2)
        inside = np.arange(members.size)[None, :] < k
        feasible = ((k[:, 0] - 1) * members < tot[:, 0]) & (k[:, 0] >= 2)
        safe = np.where(inside & (c > 0), c, 1.0)
        terms = np.where(inside, w[i:][None, :] / safe, 0.0).sum(axis=1)
        out[i, i:] = np.where(feasible, num * terms / k[:, 0] ** 2, np.inf)
    return order, out


def optimal_active_set(
    nu: ArrayLike,
    data_sizes: ArrayLike,
    *,
    phi: float,
    params: ServerCostParams,
    enumerate_up_to: int = 12,
) -> np.ndarray:
    """The admitted set that minimises the leader's optimal cost (full delivery, no caps).

    At R_t* the round cost is scale·V² + 2·sqrt(A_S(1−γ)π^(t−1)) (note 003 §4.2), increasing
    in A_S, so the leader admits the set S with the smallest A_S instead of the largest set
    Theorem 1 can place (paper) — a client barely inside that set has C_i near 0 and makes A
    (and R_t*) jump. Candidates (ours): every window of the ν-sorted clients (a run of
    consecutive privacy values), which found the optimum over all subsets in every random
    instance with equal dataset sizes we enumerated (N ≤ 11); with unequal sizes all subsets
    are enumerated up to ``enumerate_up_to`` clients, and above that the best window is
    improved by single admissions/removals while A falls (a local optimum). Returns the
    admitted mask (all False when no contest is possible).
    """
    nu = np.asarray(nu, dtype=float)
    sizes = np.asarray(data_sizes, dtype=float)
    n = nu.size
    mask = np.zeros(n, dtype=bool)
    if n < 2:
        return mask
    equal = bool(np.all(sizes == sizes[0]))
    if not equal and n <= enumerate_up_to:
        best, chosen = float("inf"), mask
        for bits in range(3, 1 << n):
            trial = ((bits >> np.arange(n)) & 1).astype(bool)
            if trial.sum() < 2:
                continue
            value = subset_accuracy_constant(nu[trial], sizes[trial], phi=phi, params=params)
            if value < best:
                best, chosen = value, trial
        return _active_part(nu, chosen) if np.isfinite(best) else mask
    order, table = window_accuracy_constants(nu, sizes, phi=phi, params=params)
    i, j = np.unravel_index(int(np.argmin(table)), table.shape)
    if not np.isfinite(table[i, j]):
        return mask
    mask[order[i : j + 1]] = True
    if not equal:
        mask = _improve(nu, sizes, mask, phi=phi, params=params)
    return _active_part(nu, mask)


def _active_part(nu: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = np.zeros(nu.size, dtype=bool)
    out[np.flatnonzero(mask)[feasible_set(nu[mask])]] = True
    return out


def _improve(
    nu: np.ndarray, sizes: np.ndarray, mask: np.ndarray, *, phi: float, params: ServerCostParams
) -> np.ndarray:
    """Single admissions or removals while A falls (best move first)."""
    current = subset_accuracy_constant(nu[mask], sizes[mask], phi=phi, params=params)
    while True:
        best, move = current, -1
        for i in range(nu.size):
            trial = mask.copy()
            trial[i] = not trial[i]
            value = subset_accuracy_constant(nu[trial], sizes[trial], phi=phi, params=params)
            if value < best * (1 - 1e-12):
                best, move = value, i
        if move < 0:
            return mask
        mask = mask.copy()
        mask[move] = not mask[move]
        current = best
