"""DPFL-BCS participation allocation: how often each client should be selected.

Paper 000 (DPFL-BCS, "budget-aware client selection"). Client n, selected T_n times out of
M = K T selections, adds noise E||Z_n||^2 = Lambda eta_t^2 T_n^z Phi_n per participation
(Gaussian: z = 1, Phi_n = ln(1/delta_n)/(D_n eps_n)^2; Laplace: z = 2, Phi_n = 1/(D_n eps_n)^2).
Problem P1 minimises Omega_A sum T_n^(z+1) Phi_n + Omega_B sum T_n Gamma_n s.t. sum T_n = M.
With Gamma = 0 the answer is Prop. 1, T_n proportional to Phi_n^(-1/z). A client is picked at
most once per round, so fedgame adds the cap T_n <= T_max (note 000 §4.5) and water-fills.
All functions are pure; selection sampling lives in the selection mechanism.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from fedgame.errors import ScenarioError

__all__ = [
    "capped_allocation",
    "noise_exponent",
    "noise_factor",
    "p1_allocation",
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
    epsilons: Sequence[float],
    samples: Sequence[float],
    deltas: Sequence[float] | None = None,
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
