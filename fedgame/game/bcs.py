"""DPFL-BCS participation allocation: how often each client should be selected.

Paper 000 (DPFL-BCS, "budget-aware client selection"). Client n, selected T_n times out of
M = K T selections, adds noise E||Z_n||^2 = Lambda eta_t^2 T_n^z Phi_n per participation
(Gaussian: z = 1, Phi_n = ln(1/delta_n)/(D_n eps_n)^2; Laplace: z = 2, Phi_n = 1/(D_n eps_n)^2).
Problem P1 minimises Omega_A sum T_n^(z+1) Phi_n + Omega_B sum T_n Gamma_n s.t. sum T_n = M.
With Gamma = 0 the answer is Prop. 1, T_n proportional to Phi_n^(-1/z). A client is picked at
most once per round, so fedgame adds the cap T_n <= T_max (note 000 §4.5) and water-fills.
All functions are pure; selection sampling lives in the selection mechanism. The stage-1
estimators (Eq. 8-9) and the P2 fit (Eq. 10) live in :mod:`fedgame.game.bcs_estimate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from fedgame.errors import ScenarioError
from fedgame.game.bcs_estimate import P2Fit, estimate_noniid, estimate_rho_min, fit_p2

__all__ = [
    "P2Fit",
    "capped_allocation",
    "estimate_noniid",
    "estimate_rho_min",
    "fit_p2",
    "greedy_allocation",
    "noise_constant",
    "noise_exponent",
    "noise_factor",
    "p1_allocation",
    "p1_objective",
    "p1_weights",
    "prop1_allocation",
    "round_allocation",
]

Mechanism = Literal["gaussian", "laplace"]


def _vector(key: str, values: Sequence[float] | np.ndarray, *, positive: bool) -> np.ndarray:
    arr = np.asarray(values, dtype=float)
    bad = ~np.isfinite(arr) | ((arr <= 0) if positive else (arr < 0))
    if arr.ndim != 1 or arr.size == 0 or np.any(bad):
        allowed = "finite values > 0" if positive else "finite values >= 0"
        raise ScenarioError(key, arr.tolist(), f"a non-empty vector of {allowed}")
    return arr


def noise_exponent(mechanism: Mechanism) -> int:
    """z in E||Z_n||^2 ∝ T_n^z (paper 000 Lemmas 1-2): 1 for Gaussian, 2 for Laplace."""
    if mechanism == "gaussian":
        return 1
    if mechanism == "laplace":
        return 2
    raise ScenarioError("mechanism", mechanism, "one of 'gaussian', 'laplace'")


def noise_factor(
    *,
    mechanism: Mechanism,
    epsilons: Sequence[float] | np.ndarray,
    samples: Sequence[float] | np.ndarray,
    deltas: Sequence[float] | np.ndarray | None = None,
) -> np.ndarray:
    """Phi_n of paper 000 Eq. 7: ln(1/delta_n)/(D_n eps_n)^2 (Gaussian) or 1/(D_n eps_n)^2."""
    eps = _vector("epsilons", epsilons, positive=True)
    d_n = _vector("samples", samples, positive=True)
    if d_n.shape != eps.shape:
        raise ScenarioError("samples", d_n.size, f"one per client ({eps.size})")
    base = 1.0 / (d_n * eps) ** 2
    if noise_exponent(mechanism) == 2:
        return base
    if deltas is None:
        raise ScenarioError("deltas", None, "required for the Gaussian mechanism")
    dl = np.asarray(deltas, dtype=float)
    if dl.shape != eps.shape or np.any((dl <= 0) | (dl >= 1)):
        raise ScenarioError("deltas", dl.tolist(), f"{eps.size} values in (0, 1)")
    return np.log(1.0 / dl) * base


def _check_total(total: float, n: int, cap: float | None) -> None:
    if not (np.isfinite(total) and total > 0):
        raise ScenarioError("total", total, "a finite number > 0")
    if cap is not None and not (np.isfinite(cap) and cap > 0 and total <= n * cap):
        raise ScenarioError("cap", cap, f"> 0 with N * cap >= total={total} (N={n})")


def prop1_allocation(*, phi: Sequence[float], z: int, total: float) -> np.ndarray:
    """T_n = M Phi_n^(-1/z) / sum_n' Phi_n'^(-1/z) (paper 000 Prop. 1, App. D), uncapped.

    Equalises the per-participation noise T_n^z Phi_n across clients.
    """
    w = _vector("phi", phi, positive=True) ** (-1.0 / z)
    _check_total(total, w.size, None)
    return total * w / w.sum()


def capped_allocation(*, phi: Sequence[float], z: int, total: float, cap: float) -> np.ndarray:
    """Prop. 1 water-filled to 0 <= T_n <= cap with sum T_n = total (note 000 §4.5, Gamma = 0).

    Clients whose Prop.-1 share exceeds the cap get the cap; the rest share what is left in
    proportion to Phi_n^(-1/z), so their per-participation noise stays equal.
    """
    w = _vector("phi", phi, positive=True) ** (-1.0 / z)
    _check_total(total, w.size, cap)
    capped = np.zeros(w.size, dtype=bool)
    while True:
        if capped.all():
            return np.full(w.size, float(cap))
        scale = (total - cap * capped.sum()) / w[~capped].sum()
        over = ~capped & (scale * w > cap)
        if not over.any():
            return np.where(capped, cap, np.minimum(scale * w, cap))
        capped |= over


def p1_allocation(
    *,
    phi: Sequence[float],
    gamma_n: Sequence[float],
    omega_a: float,
    omega_b: float,
    z: int,
    total: float,
    cap: float,
) -> np.ndarray:
    """Relaxed KKT solution of paper 000 problem P1 with the cap (note 000 §4.5).

    T_n(lambda) = min(cap, ((lambda - Omega_B Gamma_n)_+ / ((z+1) Omega_A Phi_n))^(1/z)), with
    lambda found by bisection so that sum T_n = total. Gamma = 0 gives :func:`capped_allocation`.
    """
    ph = _vector("phi", phi, positive=True)
    gam = _vector("gamma_n", gamma_n, positive=False)
    if gam.shape != ph.shape:
        raise ScenarioError("gamma_n", gam.size, f"one per client ({ph.size})")
    for key, val in (("omega_a", omega_a), ("omega_b", omega_b)):
        if not (np.isfinite(val) and val > 0):
            raise ScenarioError(key, val, "a finite number > 0")
    _check_total(total, ph.size, cap)

    def alloc(lam: float) -> np.ndarray:
        base = np.maximum(lam - omega_b * gam, 0.0) / ((z + 1) * omega_a * ph)
        return np.minimum(base ** (1.0 / z), cap)

    lo, hi = 0.0, 1.0
    while alloc(hi).sum() < total:
        hi *= 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if alloc(mid).sum() < total else (lo, mid)
    return alloc(hi)


def round_allocation(*, allocation: Sequence[float], total: int, cap: int) -> np.ndarray:
    """Integer T_n by largest remainder, keeping sum = total and T_n <= cap (note 000 §8.7)."""
    t = _vector("allocation", allocation, positive=False)
    if not np.isclose(t.sum(), total) or np.any(t > cap + 1e-9):
        raise ScenarioError("allocation", t.tolist(), f"sum {total}, each <= cap={cap}")
    out = np.floor(t + 1e-9).astype(int)
    order = np.argsort(-(t - out), kind="stable")
    for i in order[: total - int(out.sum())]:
        out[i] += 1
    return out


def noise_constant(*, mechanism: Mechanism, clip: float, dim: int, c2: float = 1.0) -> float:
    """Lambda of paper 000 §1.4: 4 B^2 d c2^2 (Gaussian, Lemma 1) or 8 d B^2 (Laplace, Lemma 2)."""
    for key, val in (("clip", clip), ("dim", dim), ("c2", c2)):
        if not (np.isfinite(val) and val > 0):
            raise ScenarioError(key, val, "a finite number > 0")
    if noise_exponent(mechanism) == 1:
        return 4.0 * clip**2 * dim * c2**2
    return 8.0 * dim * clip**2


def p1_weights(
    *, smoothness: float, strong_convexity: float, gamma: float, k: int, rounds: int, lam: float
) -> tuple[float, float]:
    """(Omega_A, Omega_B) of paper 000 problem P1 (Sec. IV-A).

    Omega_A = 4 L Lambda / ((gamma+T) T K^2 mu^2); Omega_B = 4 L^2 / ((gamma+T) T K mu^2)
    + 3 L / (2 K mu T). Stage 2 passes ``rounds = T - T_0`` (note 000 §8.12).
    """
    for key, val in (("smoothness", smoothness), ("strong_convexity", strong_convexity)):
        if not (np.isfinite(val) and val > 0):
            raise ScenarioError(key, val, "a finite number > 0")
    if not (np.isfinite(gamma) and gamma >= 0) or k < 1 or rounds < 1 or not lam > 0:
        raise ScenarioError("gamma", gamma, "gamma >= 0, k >= 1, rounds >= 1, Lambda > 0")
    el, mu, tt = smoothness, strong_convexity, float(rounds)
    omega_a = 4 * el * lam / ((gamma + tt) * tt * k**2 * mu**2)
    omega_b = 4 * el**2 / ((gamma + tt) * tt * k * mu**2) + 3 * el / (2 * k * mu * tt)
    return omega_a, omega_b


def p1_objective(
    allocation: Sequence[float],
    *,
    phi: Sequence[float],
    gamma_n: Sequence[float],
    omega_a: float,
    omega_b: float,
    z: int,
) -> float:
    """J = Omega_A sum T_n^(z+1) Phi_n + Omega_B sum T_n Gamma_n (paper 000 problem P1)."""
    t = np.asarray(allocation, dtype=float)
    ph, gam = np.asarray(phi, dtype=float), np.asarray(gamma_n, dtype=float)
    return float(omega_a * np.sum(t ** (z + 1) * ph) + omega_b * np.sum(t * gam))


def greedy_allocation(
    *,
    phi: Sequence[float] | np.ndarray,
    gamma_n: Sequence[float] | np.ndarray,
    omega_a: float,
    omega_b: float,
    z: int,
    total: int,
    cap: int,
) -> np.ndarray:
    """Exact integer solution of P1 with 0 <= T_n <= cap, sum T_n = total (note 000 §4.5).

    J is separable and convex in each T_n, so adding the M units one by one, each to the
    client with the smallest marginal J_n(T_n + 1) - J_n(T_n), is optimal. Vectorised form of
    the heap: the marginals of all clients are increasing, so the greedy picks the ``total``
    smallest marginals over the grid T_n = 0..cap-1 (ties by client index).
    """
    ph = _vector("phi", phi, positive=True)
    gam = _vector("gamma_n", gamma_n, positive=False)
    if gam.shape != ph.shape:
        raise ScenarioError("gamma_n", gam.size, f"one per client ({ph.size})")
    if int(total) != total or total < 0 or int(cap) != cap or cap < 0:
        raise ScenarioError("total", total, "integers total >= 0 and cap >= 0")
    if total > ph.size * cap:
        raise ScenarioError(
            "total", total, f"<= N * cap = {ph.size * cap}: the caps cannot hold every selection"
        )
    steps = np.arange(int(cap), dtype=float)
    marg = omega_a * ph[:, None] * ((steps + 1) ** (z + 1) - steps ** (z + 1))
    marg = marg + omega_b * gam[:, None]
    flat = marg.ravel()
    if cap == 0:
        return np.zeros(ph.size, dtype=int)
    chosen = np.argsort(flat, kind="stable")[: int(total)]
    return np.bincount(chosen // int(cap), minlength=ph.size).astype(int)
