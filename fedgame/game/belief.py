"""What a leader that does not know ν can learn from the followers' budgets (ours).

A best-responding player's budget satisfies the first-order condition of its (certainty-
equivalent) contest utility, R·s_i/(ρ_i + s_i)² = φ·ν_i with s_i = Σ_{j≠i} p_jρ_j (Eq. 21;
p ≡ 1 without stragglers), so one round's budgets reveal ν_i = R·s_i/(φ(ρ_i + s_i)²) exactly
for every interior player (quadratic cost φν_iρ_i²: ν_i = R·s_i/(2φρ_i(ρ_i + s_i)²)). A
player that stayed out (ρ_i = 0, linear cost) only reveals the lower bound ν_i ≥ R/(φ·s_i); a
player held at its cap only the upper bound ν_i ≤ R·s_i/(φ(cap_i + s_i)²).

The built-in belief (:class:`LogNormalBelief`) is log-normal: log ν_i ~ N(m_i, 1/τ_i). A point
observation log ν̂_i with noise precision τ_obs (learners and clients that are not at their
first-order condition make the inversion noisy) updates it conjugately,
τ' = τ + τ_obs, m' = (τ·m + τ_obs·log ν̂)/τ'. With exact observations the posterior mean is a
weighted average of the prior mean and the true log ν whose prior weight decays as 1/t, so the
estimate converges to the true ν on a stationary population. A bound is a probit observation
(the probability that log ν + noise lies beyond log b), folded in by matching the first two
moments of the truncated posterior (assumed-density filtering): with σ² = 1/τ,
σ_e² = σ² + 1/τ_obs, z = ±(m − log b)/σ_e and r = pdf(z)/cdf(z),
m' = m ± σ²·r/σ_e and σ'² = σ²·(1 − σ²·r(r + z)/σ_e²). A belief far inside the bound barely
moves; one on the wrong side moves past it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

#: observation kinds returned by :func:`implied_privacy_values`
NONE, EXACT, LOWER, UPPER = range(4)
#: relative slack under which a budget counts as held at its cap
_AT_CAP = 1e-9


def implied_privacy_values(
    rho: ArrayLike,
    *,
    reward: float,
    phi: float,
    p: ArrayLike | None = None,
    caps: ArrayLike | None = None,
    quadratic: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(ν̂, kind): what each player's budget reveals about its ν (module doc).

    ``kind`` is EXACT (interior player: ν̂ is ν), LOWER (ρ_i = 0: ν ≥ ν̂), UPPER (ρ_i at its
    cap: ν ≤ ν̂) or NONE (ν̂ NaN: no rivals, a NaN budget, a quadratic-cost player at 0).
    NaN budgets count as 0 in the rivals' totals.
    """
    rho = np.asarray(rho, dtype=float)
    played = np.nan_to_num(rho, nan=0.0)
    p_arr = np.ones(rho.size) if p is None else np.asarray(p, dtype=float)
    cap = np.full(rho.size, np.inf) if caps is None else np.asarray(caps, dtype=float)
    weighted = p_arr * played
    s = weighted.sum() - weighted
    total = played + s
    with np.errstate(divide="ignore", invalid="ignore"):
        if quadratic:
            nu = reward * s / (2 * phi * played * total**2)
        else:
            nu = reward * s / (phi * total**2)
    kind = np.full(rho.size, EXACT)
    kind[played <= 0] = LOWER
    kind[(played > 0) & (played >= cap * (1 - _AT_CAP))] = UPPER
    unknown = np.isnan(rho) | ~(s > 0) | (quadratic & (played <= 0)) | ~np.isfinite(nu)
    kind[unknown] = NONE
    return np.where(kind == NONE, np.nan, nu), kind


def lognormal_update(
    mean: ArrayLike, precision: ArrayLike, observed: ArrayLike, obs_precision: float
) -> tuple[np.ndarray, np.ndarray]:
    """Conjugate normal update of log ν (module doc); NaN observations leave the belief."""
    mean = np.asarray(mean, dtype=float)
    precision = np.asarray(precision, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_obs = np.log(np.asarray(observed, dtype=float))
    seen = np.isfinite(log_obs)
    new_precision = np.where(seen, precision + obs_precision, precision)
    combined = precision * mean + obs_precision * np.where(seen, log_obs, 0.0)
    new_mean = np.where(seen, combined / new_precision, mean)
    return new_mean, new_precision


def bound_update(
    mean: ArrayLike,
    precision: ArrayLike,
    bound: ArrayLike,
    obs_precision: float,
    *,
    upper: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Moment-matched update of log ν ~ N(mean, 1/precision) by ν ≥ bound (ν ≤ bound when
    ``upper``), observed with noise precision ``obs_precision`` (module doc). NaN bounds
    leave the belief."""
    from scipy.special import erfcx  # here: listing and validating stay free of scipy

    mean = np.asarray(mean, dtype=float)
    precision = np.asarray(precision, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        log_b = np.log(np.asarray(bound, dtype=float))
    seen = np.isfinite(log_b)
    var = 1.0 / precision
    sd_eff = np.sqrt(var + 1.0 / obs_precision)
    sign = -1.0 if upper else 1.0
    z = sign * (mean - np.where(seen, log_b, 0.0)) / sd_eff
    # pdf(z)/cdf(z) = sqrt(2/pi) / erfcx(-z/sqrt 2): no cancellation at any z (erfcx(x) =
    # exp(x^2)·erfc(x) overflows only for x < -26, where the ratio is 0 to double precision)
    with np.errstate(over="ignore"):
        r = np.sqrt(2.0 / np.pi) / erfcx(-z / np.sqrt(2.0))
    new_mean = mean + sign * var * r / sd_eff
    shrink = np.clip(var * r * (r + z) / sd_eff**2, 0.0, 1.0 - 1e-12)
    new_var = var * (1.0 - shrink)
    return np.where(seen, new_mean, mean), np.where(seen, 1.0 / new_var, precision)


@dataclass(frozen=True)
class ContestObservation:
    """One round's contest as the leader saw it, in arrays over the players it offered it to.

    ``rho`` holds the budgets they answered (0: stayed out; NaN: declined for another reason,
    e.g. no budget left, so nothing is revealed); ``p`` the delivery probabilities the
    followers weighed (ones when straggling is not common knowledge); ``caps`` the cap each
    player faced (inf: none); ``reward``, ``phi`` and ``quadratic`` the offer.
    """

    ids: np.ndarray
    rho: np.ndarray
    reward: float
    phi: float
    p: np.ndarray
    caps: np.ndarray
    quadratic: bool = False

    def implied(self) -> tuple[np.ndarray, np.ndarray]:
        """:func:`implied_privacy_values` of this contest."""
        return implied_privacy_values(
            self.rho,
            reward=self.reward,
            phi=self.phi,
            p=self.p,
            caps=self.caps,
            quadratic=self.quadratic,
        )


@runtime_checkable
class PrivacyValueBelief(Protocol):
    """A leader's belief about every client's privacy value ν (the declared belief hook).

    ``estimate()`` is the point estimate ν̂ by client id (finite, > 0) that the leader plays
    against; ``observe`` folds in one round's contest. An estimator is registered by name
    (:func:`fedgame.mechanisms.incentive.belief.register_estimator`) and built as
    ``cls(prior, num_clients=N, spec=...)``.
    """

    def estimate(self) -> np.ndarray: ...

    def observe(self, observation: ContestObservation) -> None: ...


@runtime_checkable
class ReportsUncertainty(Protocol):
    """Capability of a :class:`PrivacyValueBelief`: how unsure it is about each client.

    ``log_sd()`` is the standard deviation of log ν by client id (> 0; 0 only for a dogmatic
    belief). A leader that explores (``belief.explore`` > 0) needs it.
    """

    def log_sd(self) -> np.ndarray: ...


class LogNormalBelief:
    """Independent log-normal beliefs with conjugate and bound updates (module doc).

    Starts every client at the prior's log-moments (mean, variance of log ν); a prior with no
    spread (one value) is dogmatic and never moves. ν̂ is the posterior median exp(m). A bound
    is folded in only when it is tighter than every bound already seen for the client: a
    client that stays out round after round repeats one fact, not new evidence.
    """

    def __init__(self, prior: Any, *, num_clients: int, spec: Any) -> None:
        log_mean, log_var = prior.log_moments()
        self.mean = np.full(num_clients, log_mean)
        self.precision = np.full(num_clients, 1.0 / max(log_var, 1e-24))
        self.obs_precision = 1.0 / float(spec.obs_sd) ** 2
        self.lower = np.zeros(num_clients)  # tightest bounds seen: ν ≥ lower, ν ≤ upper
        self.upper = np.full(num_clients, np.inf)

    def estimate(self) -> np.ndarray:
        return np.exp(self.mean)

    def log_sd(self) -> np.ndarray:
        """Posterior sd of log ν, 1/√τ."""
        return 1.0 / np.sqrt(self.precision)

    def observe(self, observation: ContestObservation) -> None:
        ids = observation.ids
        if ids.size == 0:
            return
        nu_hat, kind = observation.implied()
        mean, precision = self.mean[ids], self.precision[ids]
        tau = self.obs_precision
        mean, precision = lognormal_update(
            mean, precision, np.where(kind == EXACT, nu_hat, np.nan), tau
        )
        lower, upper = self.lower[ids], self.upper[ids]
        tighter_low = (kind == LOWER) & (nu_hat > lower * (1 + _AT_CAP))
        tighter_up = (kind == UPPER) & (nu_hat < upper * (1 - _AT_CAP))
        mean, precision = bound_update(mean, precision, np.where(tighter_low, nu_hat, np.nan), tau)
        mean, precision = bound_update(
            mean, precision, np.where(tighter_up, nu_hat, np.nan), tau, upper=True
        )
        self.lower[ids] = np.where(tighter_low, nu_hat, lower)
        self.upper[ids] = np.where(tighter_up, nu_hat, upper)
        self.mean[ids], self.precision[ids] = mean, precision
