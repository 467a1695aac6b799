"""Privacy-aware selection probabilities (paper 001, "Tackling Privacy Heterogeneity in DPFL").

Client k's DP-SGD noise has per-coordinate variance sigma_k^2 = V_k T_k T^l C^2 (Eq. 6-7), so
the aggregate noise grows like sum_k (p_k)^2 D V_k (Eq. 40). Problem 1 trades that against
the selection gap ||p - p^u||_1 (the bias of not sampling by data size):

    min_p  a + sqrt(a^2 + sum_k c_k p_k^2),   a = ||p - p^u||_1,  c_k = (eta D) V_k,

over the probability simplex. It is convex (paper 001 Prop. 1) and every client keeps p_k > 0
(Prop. 2). The solver is the two-sided water-filling of note 001 §4.5 / appendix: at the
optimum p_k = clip(p^u_k, (theta - kappa)/c_k, (theta + kappa)/c_k) with kappa equal to the
optimal objective value; theta is found by bisection and kappa by Brent's method. eta -> 0
gives p^u, eta -> infinity gives p proportional to 1/V_k. All functions are pure.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedgame.errors import ScenarioError
from fedgame.privacy.calibrate import privacy_aware_noise_factor

__all__ = [
    "min_variance_probabilities",
    "noise_factors",
    "problem1_objective",
    "selection_probabilities",
    "solve_problem1",
    "unbiased_probabilities",
]


def _positive_vector(key: str, values: Sequence[float] | np.ndarray) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    if arr.ndim != 1 or arr.size == 0 or not np.all(np.isfinite(arr) & (arr > 0)):
        raise ScenarioError(key, arr.tolist(), "a non-empty vector of finite values > 0")
    return arr


def noise_factors(
    *,
    epsilons: Sequence[float] | np.ndarray,
    deltas: Sequence[float] | np.ndarray,
    sample_rates: Sequence[float] | np.ndarray,
    sizes: Sequence[float] | np.ndarray,
) -> np.ndarray:
    """V_k of paper 001 Eq. 7 for every client (see ``privacy_aware_noise_factor``)."""
    eps, dl = np.asarray(epsilons, float), np.asarray(deltas, float)
    r, m = np.asarray(sample_rates, float), np.asarray(sizes, float)
    if not (eps.shape == dl.shape == r.shape == m.shape) or eps.ndim != 1:
        raise ScenarioError("epsilons", eps.size, "one epsilon, delta, rate and size per client")
    return np.array(
        [
            privacy_aware_noise_factor(epsilon=e, delta=d, sample_rate=q, dataset_size=s)
            for e, d, q, s in zip(eps, dl, r, m)
        ]
    )


def unbiased_probabilities(sizes: Sequence[float] | np.ndarray) -> np.ndarray:
    """p^u_k = |M_k| / sum_i |M_i| (paper 001 Eq. 4-5: the unbiased selection)."""
    m = _positive_vector("sizes", sizes)
    return m / m.sum()


def min_variance_probabilities(v: Sequence[float]) -> np.ndarray:
    """p_k proportional to 1/V_k: the eta -> infinity limit of Problem 1 (note 001 §4.5)."""
    inv = 1.0 / _positive_vector("v", v)
    return inv / inv.sum()


def problem1_objective(
    p: Sequence[float] | np.ndarray,
    *,
    pu: Sequence[float] | np.ndarray,
    c: Sequence[float] | np.ndarray,
) -> float:
    """||p - p^u||_1 + sqrt(||p - p^u||_1^2 + sum_k c_k p_k^2) (paper 001 Problem 1)."""
    p_, pu_, c_ = (np.asarray(x, dtype=float) for x in (p, pu, c))
    a = float(np.abs(p_ - pu_).sum())
    return a + float(np.sqrt(a * a + np.sum(c_ * p_ * p_)))


def _p_of(theta: float, kappa: float, pu: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.clip(pu, (theta - kappa) / c, (theta + kappa) / c)


def _p_given_kappa(kappa: float, pu: np.ndarray, c: np.ndarray) -> np.ndarray:
    lo, hi = -kappa, max(1.0, kappa)
    while _p_of(hi, kappa, pu, c).sum() < 1:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _p_of(mid, kappa, pu, c).sum() < 1:
            lo = mid
        else:
            hi = mid
    p = _p_of(hi, kappa, pu, c)
    return p / p.sum()


def solve_problem1(
    *, pu: Sequence[float] | np.ndarray, c: Sequence[float] | np.ndarray
) -> np.ndarray:
    """Optimal selection probabilities of paper 001 Problem 1 (note 001 §4.5 and appendix).

    Args:
        pu: unbiased probabilities p^u (positive, summing to 1).
        c: c_k = eta D V_k > 0 (the noise weight of each client).

    The fixed point kappa = Obj(p(kappa)) is a KKT point, hence optimal (the problem is
    convex); phi(kappa) = Obj(p(kappa)) - kappa is positive near 0 and negative beyond
    Obj(p^u), so Brent's method brackets it.
    """
    from scipy.optimize import brentq

    pu_ = _positive_vector("pu", pu)
    if not np.isclose(pu_.sum(), 1.0):
        raise ScenarioError("pu", pu_.tolist(), "probabilities summing to 1")
    c_ = _positive_vector("c", c)
    if c_.shape != pu_.shape:
        raise ScenarioError("c", c_.size, f"one weight per client ({pu_.size})")
    scale = float(np.max(c_))
    c_n = c_ / scale  # Obj scales: work with c / max c and kappa / sqrt(max c) internally
    root = np.sqrt(scale)

    def phi(kappa_n: float) -> float:
        p = _p_given_kappa(kappa_n * root, pu_, c_)
        return problem1_objective(p, pu=pu_, c=c_n * scale) / root - kappa_n

    upper = problem1_objective(pu_, pu=pu_, c=c_) / root + 1.0
    kappa_n = brentq(phi, 1e-15, upper, xtol=1e-15, rtol=1e-14, maxiter=500)
    return _p_given_kappa(kappa_n * root, pu_, c_)


def selection_probabilities(
    *, sizes: Sequence[float] | np.ndarray, v: Sequence[float] | np.ndarray, eta_d: float
) -> np.ndarray:
    """p^s for data sizes |M_k|, noise factors V_k and the knob eta*D (paper 001 Problem 1).

    Only c_k = eta D V_k enters (note 001 §8.2), so ``eta_d`` is the single tunable weight.
    """
    if not (np.isfinite(eta_d) and eta_d > 0):
        raise ScenarioError("eta_d", eta_d, "a finite number > 0")
    return solve_problem1(pu=unbiased_probabilities(sizes), c=eta_d * _positive_vector("v", v))
