"""DPFL-BCS stage-1 estimators: non-IID degree (Eq. 8), selection skew (Eq. 9), P2 fit (Eq. 10).

Paper 000 Sec. IV-B2. After T_0 stage-1 rounds the server holds, for every selected client,
two noisy losses per participation: F_n(w^{t-1}) (global model on local data) and F_n(w_n^t)
(after its one local step). Losses are clipped to [0, Theta] before noise (note 000 §8.5: DP
validity needs a bounded loss). The fitted constants only enter P1 through Omega_B/Omega_A
(note 000 §4.1); P2 is underdetermined (one equation, five unknowns, note 000 §8.15), so the
fit starts from the paper-style point and any extra restarts come from a seeded generator.
All functions are pure (randomness only through an explicit ``rng``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedgame.errors import ScenarioError

__all__ = ["P2Fit", "estimate_noniid", "estimate_rho_min", "fit_p2", "p2_model"]


def estimate_noniid(
    reports: Mapping[int, Sequence[tuple[float, float]]],
    *,
    num_clients: int,
    loss_bound: float,
) -> np.ndarray:
    """Gamma_hat_n = min_t |F_hat_n(w^{t-1}) - F_hat_n(w_n^t)| (paper 000 Eq. 8).

    ``reports[n]`` lists the (before, after) noisy losses of client n's stage-1
    participations; each loss is clipped to [0, loss_bound] first. Clients never selected get
    the mean of the others' estimates; with no report at all every estimate is 0.
    """
    if not loss_bound > 0:
        raise ScenarioError("loss_bound", loss_bound, "a number > 0 (Theta)")
    out = np.full(num_clients, np.nan)
    for n, pairs in reports.items():
        if not 0 <= n < num_clients:
            raise ScenarioError("reports", n, f"client ids in [0, {num_clients})")
        arr = np.clip(np.asarray(pairs, dtype=float).reshape(-1, 2), 0.0, loss_bound)
        if arr.size:
            out[n] = float(np.min(np.abs(arr[:, 0] - arr[:, 1])))
    seen = ~np.isnan(out)
    out[~seen] = float(out[seen].mean()) if seen.any() else 0.0
    return out


def estimate_rho_min(
    *,
    counts: Sequence[int] | np.ndarray,
    last_losses: Mapping[int, float],
    k: int,
    loss_bound: float,
) -> float:
    """rho_hat_min of paper 000 Eq. 9 (with F_n* = 0).

    ``counts`` are the selections C_n in the first T_0 - 1 rounds (sum K (T_0 - 1));
    ``last_losses`` the noisy F_hat_n(w^{T_0-1}) of the clients selected in round T_0.
    F_hat = their mean; clients not selected at T_0 are assigned F_hat. Losses are clipped to
    [0, loss_bound]; a zero F_hat (no information) gives rho = 1.
    """
    c = np.asarray(counts, dtype=float)
    if c.ndim != 1 or np.any(c < 0) or c.sum() <= 0 or k < 1:
        raise ScenarioError("counts", c.tolist(), "non-negative counts with a positive sum")
    if not last_losses:
        return 1.0
    vals = {n: float(np.clip(v, 0.0, loss_bound)) for n, v in last_losses.items()}
    f_bar = float(np.mean(list(vals.values())))
    if f_bar <= 0:
        return 1.0
    f_n = np.full(c.size, f_bar)
    for n, v in vals.items():
        f_n[n] = v
    return float(np.sum(c * f_n) / (c.sum() * f_bar))


@dataclass(frozen=True)
class P2Fit:
    """Fitted constants of paper 000 problem P2 and the absolute residual |F_hat - F_tilde|.

    ``at_bound``: some constant ran to the optimiser's bound (within a factor e of e^±20,
    i.e. beyond 1.8e8 or below 5.6e-9): the one observed loss
    did not determine the five constants (P2 is underdetermined, note 000 §8), so a plan
    built on them rests on the optimiser's limits, not on the data.
    """

    initial_distance_sq: float
    gamma: float
    sigma_sq: float
    smoothness: float
    strong_convexity: float
    residual: float
    at_bound: bool = False


def p2_model(
    x: Sequence[float] | np.ndarray,
    *,
    t0: int,
    k: int,
    counts: Sequence[int] | np.ndarray,
    phi: Sequence[float] | np.ndarray,
    gamma_hat: Sequence[float] | np.ndarray,
    rho_min: float,
    lam: float,
    z: int,
) -> float:
    """F_tilde(w^{T_0-1}) of paper 000 Eq. 10 at x = (||w0-w*||^2, gamma, sigma^2, L, mu)."""
    w0, g, s2, el, mu = (float(v) for v in x)
    c = np.asarray(counts, dtype=float)
    ph, gh = np.asarray(phi, dtype=float), np.asarray(gamma_hat, dtype=float)
    t = t0 - 1
    n = c.size
    den = g + t
    return float(
        w0 / den * el * g / 2
        - 3 * el * rho_min / (2 * mu * n) * gh.sum()
        + 4 * el * s2 / (den * mu**2 * k)
        + np.sum(c ** (z + 1) * ph) / (den * t) * 4 * el * lam / (k**2 * mu**2)
        + np.sum(c * gh) / t * (4 * el**2 / (den * k * mu**2) + 3 * el / (2 * k * mu))
    )


def fit_p2(
    *,
    observed_loss: float,
    t0: int,
    k: int,
    counts: Sequence[int] | np.ndarray,
    phi: Sequence[float] | np.ndarray,
    gamma_hat: Sequence[float] | np.ndarray,
    rho_min: float,
    lam: float,
    z: int,
    restarts: int = 0,
    rng: np.random.Generator | None = None,
) -> P2Fit:
    """Solve paper 000 problem P2: min |F_hat - F_tilde| over (||w0-w*||^2, gamma, sigma^2, L, mu).

    Constraints all >= 0 and L > mu are enforced by the parametrisation exp(.) and
    L = mu + exp(s). L-BFGS-B on the squared residual from the note's start point (L = 1,
    mu = 0.5, gamma = 8 L/mu, sigma^2 = 1, ||w0-w*||^2 = 1), plus ``restarts`` log-normal
    perturbations of it drawn from ``rng``; the best fit is returned (note 000 §4.4).
    """
    from scipy.optimize import minimize

    if t0 < 2:
        raise ScenarioError("t0", t0, ">= 2 (Eq. 10 uses T_0 - 1 >= 1 rounds)")
    if not (np.isfinite(observed_loss) and lam > 0):
        raise ScenarioError("observed_loss", observed_loss, "a finite loss and Lambda > 0")
    kw: dict[str, Any] = {"t0": t0, "k": k, "counts": counts, "phi": phi, "gamma_hat": gamma_hat}
    kw |= {"rho_min": rho_min, "lam": lam, "z": z}

    def unpack(u: np.ndarray) -> np.ndarray:
        w0, g, s2, mu, s = np.exp(np.clip(u, -30, 30))
        return np.array([w0, g, s2, mu + s, mu])

    def loss(u: np.ndarray) -> float:
        r = observed_loss - p2_model(unpack(u), **kw)
        return r * r

    start = np.log([1.0, 16.0, 1.0, 0.5, 0.5])
    starts = [start]
    if restarts and rng is None:
        raise ScenarioError("rng", None, "a generator when restarts > 0")
    for _ in range(restarts):
        starts.append(start + rng.normal(0.0, 1.0, size=5))  # type: ignore[union-attr]
    best = None
    for u0 in starts:
        res = minimize(loss, u0, method="L-BFGS-B", bounds=[(-_LOG_BOUND, _LOG_BOUND)] * 5)
        if best is None or res.fun < best.fun:
            best = res
    assert best is not None  # at least the note's start point
    w0, g, s2, el, mu = unpack(best.x)
    at_bound = bool(np.any(np.abs(best.x) >= _LOG_BOUND - 1.0))  # within a factor e of it
    return P2Fit(w0, g, s2, el, mu, float(np.sqrt(best.fun)), at_bound)


#: the optimiser's box for the logs of P2's constants (each constant in [e^-20, e^20])
_LOG_BOUND = 20.0
