"""Shapley values of a round's delivered clients, exact and estimated, over a batched oracle.

The game: K players (the clients whose updates arrived) and a value v(S) of each coalition S
(the accuracy, or minus the loss, of the global model plus the aggregate of S's updates).
The Shapley value (Shapley 1953) of player i is

    φ_i = Σ_(S ⊆ N∖{i}) |S|!(K−|S|−1)!/K! · (v(S ∪ {i}) − v(S)),

the mean of i's marginal contribution over the K! orders of arrival. Every estimator here
asks the oracle for many coalitions at once: ``value(masks)`` takes a boolean ``[C, K]``
array (row c = coalition c) and returns ``[C]`` values, so the oracle can evaluate them as
one batched computation (:class:`fedgame.learning.coalitions.CoalitionEvaluator`).

* :func:`exact_shapley`: all 2^K coalitions in one call (K ≤ :data:`EXACT_MAX`).
* :func:`tmc_shapley`: truncated Monte-Carlo (Ghorbani & Zou 2019, Data Shapley, Alg. 1):
  random permutations; a permutation's marginals past the point where the prefix's value is
  within ``tol``·|v(N)| of v(N) are taken as 0 (not evaluated).
* :func:`gtg_shapley`: GTG-Shapley (Liu et al. 2022, ACM TIST 13(4), Alg. 1): between-round
  truncation (φ = 0 when |v(N) − v(∅)| ≤ ``tol_round``), within-round truncation as TMC,
  guided sampling (in each block of K permutations every player is first once) and a
  convergence test on the running mean (stop when it moved by less than ``conv`` relative).

The permutation estimators walk the positions j = 1..K of a block of permutations and ask
the oracle for the still-untruncated prefixes of length j in one call: the Python loop is
over positions, not coalitions.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

#: the oracle: a boolean [C, K] mask of coalitions -> their values [C]
Oracle = Callable[[np.ndarray], np.ndarray]
#: most players the exact estimator enumerates (2^K coalitions)
EXACT_MAX = 16


@dataclass(frozen=True)
class ShapleyEstimate:
    """Estimated values ``phi`` [K], the number of coalitions evaluated and of permutations."""

    phi: np.ndarray
    evaluations: int
    permutations: int = 0


def all_coalitions(k: int) -> np.ndarray:
    """Every subset of K players as a boolean ``[2^K, K]`` mask; row s is the bits of s."""
    s = np.arange(2**k, dtype=np.int64)[:, None]
    return ((s >> np.arange(k, dtype=np.int64)[None, :]) & 1).astype(bool)


def exact_shapley(value: Oracle, k: int) -> ShapleyEstimate:
    """φ_i by the definition over all 2^K coalitions (one oracle call).

    Weights w(|S|) = |S|!(K−|S|−1)!/K! of the marginal v(S ∪ {i}) − v(S), S ∌ i.
    """
    if k == 0:
        return ShapleyEstimate(np.zeros(0), 0)
    if k > EXACT_MAX:
        raise ValueError(f"exact Shapley enumerates 2^K coalitions: K = {k} > {EXACT_MAX}")
    masks = all_coalitions(k)
    v = np.asarray(value(masks), dtype=float)
    size = masks.sum(axis=1)
    weight = np.array(
        [math.factorial(s) * math.factorial(k - s - 1) / math.factorial(k) for s in range(k)]
    )
    phi = np.zeros(k)
    index = np.arange(2**k)
    for i in range(k):  # K vector operations over the 2^(K-1) pairs (S, S ∪ {i})
        without = index[~masks[:, i]]
        phi[i] = np.sum(weight[size[without]] * (v[without | (1 << i)] - v[without]))
    return ShapleyEstimate(phi, int(masks.shape[0]))


def _walk(
    value: Oracle,
    orders: np.ndarray,
    *,
    v_empty: float,
    v_full: float,
    tol: float,
) -> tuple[np.ndarray, int]:
    """Marginal contributions ``[M, K]`` (by player) of M permutations ``orders`` [M, K].

    Position by position, the prefixes of the permutations not yet truncated are evaluated
    in one oracle call; a permutation whose last prefix value is within ``tol``·|v(N)| of
    v(N) is truncated (its remaining marginals are 0). The full coalition is never asked
    again (its value is ``v_full``).
    """
    m, k = orders.shape
    marg = np.zeros((m, k))
    masks = np.zeros((m, k), dtype=bool)
    previous = np.full(m, v_empty)
    live = np.ones(m, dtype=bool)
    evaluations = 0
    rows = np.arange(m)
    scale = tol * max(abs(v_full), 1e-12)
    for j in range(k):
        if tol > 0:  # tol = 0: no truncation (equal values are no reason to stop)
            live &= np.abs(v_full - previous) > scale
        if not live.any():
            break
        at = rows[live]
        players = orders[at, j]
        masks[at, players] = True
        if j == k - 1:
            now = np.full(at.size, v_full)
        else:
            now = np.asarray(value(masks[at]), dtype=float)
            evaluations += at.size
        marg[at, players] = now - previous[at]
        previous[at] = now
    return marg, evaluations


def tmc_shapley(
    value: Oracle,
    k: int,
    *,
    permutations: int,
    rng: np.random.Generator,
    tol: float = 0.0,
    v_empty: float | None = None,
    v_full: float | None = None,
) -> ShapleyEstimate:
    """Truncated Monte-Carlo Shapley: the mean marginal over ``permutations`` random orders.

    ``tol`` = 0 is plain permutation sampling (unbiased); ``tol`` > 0 truncates (Ghorbani &
    Zou 2019 §3: "performance tolerance").
    """
    if k == 0:
        return ShapleyEstimate(np.zeros(0), 0)
    ends = _ends(value, k, v_empty, v_full)
    orders = np.argsort(rng.random((permutations, k)), axis=1)
    marg, used = _walk(value, orders, v_empty=ends[0], v_full=ends[1], tol=tol)
    return ShapleyEstimate(marg.mean(axis=0), used + ends[2], permutations)


def _ends(
    value: Oracle, k: int, v_empty: float | None, v_full: float | None
) -> tuple[float, float, int]:
    """v(∅), v(N) (asked of the oracle in one call when not given) and the calls made."""
    if v_empty is not None and v_full is not None:
        return v_empty, v_full, 0
    both = np.zeros((2, k), dtype=bool)
    both[1] = True
    v = np.asarray(value(both), dtype=float)
    return float(v[0]), float(v[1]), 2


def gtg_shapley(
    value: Oracle,
    k: int,
    *,
    rng: np.random.Generator,
    max_blocks: int = 10,
    tol: float = 0.01,
    tol_round: float = 1e-4,
    conv: float = 0.05,
    v_empty: float | None = None,
    v_full: float | None = None,
) -> ShapleyEstimate:
    """GTG-Shapley (Liu et al. 2022, Alg. 1) with guided permutation blocks.

    Block b holds K permutations; permutation i of a block starts with player i, the rest in
    random order. After each block (from the second) the running mean φ̂ is compared with
    the previous one: stop when ‖φ̂_b − φ̂_(b−1)‖₁ ≤ ``conv``·‖φ̂_b‖₁ or after
    ``max_blocks``. Between-round truncation: all zero when |v(N) − v(∅)| ≤ ``tol_round``.
    """
    if k == 0:
        return ShapleyEstimate(np.zeros(0), 0)
    v0, vn, used = _ends(value, k, v_empty, v_full)
    if abs(vn - v0) <= tol_round:
        return ShapleyEstimate(np.zeros(k), used)
    total = np.zeros(k)
    count = 0
    mean = np.zeros(k)
    for block in range(max_blocks):
        rest = np.argsort(rng.random((k, k)), axis=1)
        orders = np.empty((k, k), dtype=np.int64)
        for i in range(k):  # player i first, then the others in a random order
            tail = rest[i][rest[i] != i]
            orders[i, 0], orders[i, 1:] = i, tail
        marg, n = _walk(value, orders, v_empty=v0, v_full=vn, tol=tol)
        used += n
        total += marg.sum(axis=0)
        count += k
        new = total / count
        moved = np.abs(new - mean).sum()
        mean = new
        if block > 0 and moved <= conv * max(np.abs(new).sum(), 1e-12):
            break
    return ShapleyEstimate(mean, used, count)


def shapley_shares(phi: np.ndarray, *, reward: float) -> np.ndarray:
    """Payments R·φ_i⁺/Σ_j φ_j⁺ (clipped at 0; all 0 when no φ_j is positive)."""
    clipped = np.maximum(np.asarray(phi, dtype=float), 0.0)
    total = clipped.sum()
    return reward * clipped / total if total > 0 else np.zeros_like(clipped)
