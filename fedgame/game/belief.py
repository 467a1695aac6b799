"""What a leader that does not know ν can learn from the followers' budgets (ours).

A best-responding player's budget satisfies the first-order condition of its (certainty-
equivalent) contest utility, R·s_i/(ρ_i + s_i)² = φ·ν_i with s_i = Σ_{j≠i} p_jρ_j (Eq. 21;
p ≡ 1 without stragglers), so one round's budgets reveal ν_i = R·s_i/(φ(ρ_i + s_i)²) exactly
for every interior player. A player that stayed out (ρ_i = 0) only reveals ν_i ≥ R/(φ·s_i).

The belief is log-normal: log ν_i ~ N(m_i, 1/τ_i). An observation log ν̂_i with noise
precision τ_obs (learners, capped players and clients that are not at their first-order
condition make the inversion noisy) updates it conjugately,
τ' = τ + τ_obs, m' = (τ·m + τ_obs·log ν̂)/τ'. With exact observations the posterior mean is a
weighted average of the prior mean and the true log ν whose prior weight decays as 1/t, so the
estimate converges to the true ν on a stationary population.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def implied_privacy_values(
    rho: ArrayLike,
    *,
    reward: float,
    phi: float,
    p: ArrayLike | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(ν̂, exact): ν revealed by each player's budget, and whether it is a point (interior
    player) rather than a lower bound (ρ_i = 0). NaN where nothing is revealed (no rivals)."""
    rho = np.asarray(rho, dtype=float)
    p_arr = np.ones(rho.size) if p is None else np.asarray(p, dtype=float)
    weighted = p_arr * rho
    s = weighted.sum() - weighted
    total = rho + s
    with np.errstate(divide="ignore", invalid="ignore"):
        nu = np.where(s > 0, reward * s / (phi * total**2), np.nan)
    return nu, rho > 0


def lognormal_update(
    mean: ArrayLike, precision: ArrayLike, observed: ArrayLike, obs_precision: float
) -> tuple[np.ndarray, np.ndarray]:
    """Conjugate normal update of log ν (module doc); NaN observations leave the belief."""
    mean = np.asarray(mean, dtype=float)
    precision = np.asarray(precision, dtype=float)
    log_obs = np.log(np.asarray(observed, dtype=float))
    seen = np.isfinite(log_obs)
    new_precision = np.where(seen, precision + obs_precision, precision)
    combined = precision * mean + obs_precision * np.where(seen, log_obs, 0.0)
    new_mean = np.where(seen, combined / new_precision, mean)
    return new_mean, new_precision


def censored_observation(mean: ArrayLike, bound: ArrayLike) -> np.ndarray:
    """A lower bound ν ≥ b as an observation: b where the belief's median is below b (the
    belief moves up to meet it), NaN where the belief already agrees (no update)."""
    mean = np.asarray(mean, dtype=float)
    bound = np.asarray(bound, dtype=float)
    return np.where(np.exp(mean) < bound, bound, np.nan)
