"""Noise calibration: pure closed forms from the papers, and accountant-based search.

Every function maps a privacy target (and a sensitivity) to a noise scale; none holds state
or draws randomness. The closed forms reproduce the papers' own calibrations, including the
loose ones, so that a scenario can be faithful to a paper; the analytic Gaussian mechanism
(Balle & Wang 2018) is the exact calibration of one Gaussian release, valid for every ε.
Calibration over many releases under an accountant is each accountant's ``calibrate``
(:mod:`fedgame.privacy.accountants`).

Conventions: ``sigma`` is a per-coordinate standard deviation in the units of the released
vector; a *noise multiplier* is ``sigma / sensitivity`` (L2). Neighbouring datasets follow
each paper (replace-one: sensitivity ``2C/D`` of a mean of ``D`` clipped terms).
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np

from fedgame.errors import ScenarioError


def _positive(name: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ScenarioError(name, value, "must be a finite number > 0")


def _probability(name: str, value: float, *, closed: bool = False) -> None:
    ok = 0 < value <= 1 if closed else 0 < value < 1
    if not ok:
        raise ScenarioError(name, value, f"must lie in (0, 1{']' if closed else ')'}")


def gaussian_tail_constant(delta: np.ndarray | float, *, shift: float = 1.25) -> np.ndarray:
    """``c = sqrt(2 ln(shift/delta))`` with ``sigma = c Delta / epsilon`` (written only here).

    ``shift=1.25``: the classic Gaussian mechanism (Dwork & Roth 2014, Thm A.1; paper 001
    Eq. 2; paper 000 Thm 1 with ``c^2 = 2 ln(1.25/d)``); ``shift=2``: paper 004's tail bound
    (Prop. 1 / Appendix A). Both are theorems only for ``epsilon < 1``. Vectorised.
    """
    return np.sqrt(2.0 * np.log(shift / np.asarray(delta, dtype=float)))


def classic_gaussian_sigma(*, sensitivity: float, epsilon: float, delta: float) -> float:
    """Classic Gaussian mechanism: ``sigma = Delta * sqrt(2 ln(1.25/delta)) / epsilon``.

    Dwork & Roth (2014), Thm A.1; paper 001 Eq. 2; paper 000 Thm 1 (with ``c^2 = 2 ln(1.25/d)``).
    The theorem only holds for ``epsilon < 1``; for ``epsilon >= 1`` the value is returned
    anyway (it is then not a proven guarantee) and the caller is expected to warn.
    """
    _positive("sensitivity", sensitivity)
    _positive("epsilon", epsilon)
    _probability("delta", delta)
    return float(sensitivity * gaussian_tail_constant(delta) / epsilon)


def bcs_sensitivity(
    *, clip: float, lr: float, dataset_size: float, loss_bound: float = 0.0
) -> float:
    """Sensitivity ``2 eta (B + Theta) / D_n`` of DPFL-BCS's released update.

    Paper 000, Lemma 1 (L2, ``Xi_G = B``) and Lemma 2 (L1, ``Xi_L = B``); stage-1 rounds that
    also release two losses add ``2 eta Theta / D_n`` (Eq. 13). ``loss_bound=0`` otherwise.
    """
    _positive("clip", clip)
    _positive("lr", lr)
    _positive("dataset_size", dataset_size)
    if loss_bound < 0:
        raise ScenarioError("loss_bound", loss_bound, "must be >= 0")
    return 2.0 * lr * (clip + loss_bound) / dataset_size


def dpfl_bcs_gaussian_sigma(
    *,
    sensitivity: float,
    epsilon: float,
    delta: float,
    participations: float,
    c2: float = 1.0,
    calibration: Literal["analysis", "per_round"] = "analysis",
) -> float:
    """Per-coordinate Gaussian std of DPFL-BCS for one participation of client ``n``.

    Paper 000, Lemma 1 / note 000 §5. ``epsilon``, ``delta`` are the client's (remaining) total
    budget, spread over ``participations`` = ``T_n`` releases.

    * ``"analysis"`` (default, the paper's analysis, ``z = 1``):
      ``sigma = c2 * Delta * sqrt(T_n ln(1/delta)) / epsilon`` (Thm 2, Abadi et al.; ``c2`` is
      never given by the paper: ``sqrt(2)`` matches the small-epsilon zCDP bound, 1 is common).
    * ``"per_round"`` (Alg. 2's linear split, effectively ``z = 2``): Thm 1 per round with
      ``epsilon/T_n`` and ``delta/T_n``, i.e.
      ``sigma = sqrt(2 ln(1.25 T_n/delta)) * Delta * T_n / epsilon``.
    """
    _positive("sensitivity", sensitivity)
    _positive("epsilon", epsilon)
    _probability("delta", delta)
    _positive("participations", participations)
    _positive("c2", c2)
    if calibration == "analysis":
        return c2 * sensitivity * math.sqrt(participations * math.log(1.0 / delta)) / epsilon
    if calibration == "per_round":
        return classic_gaussian_sigma(
            sensitivity=sensitivity,
            epsilon=epsilon / participations,
            delta=delta / participations,
        )
    raise ScenarioError("calibration", calibration, "allowed: analysis, per_round")


def laplace_scale(*, sensitivity: float, epsilon: float, participations: float = 1.0) -> float:
    """Per-coordinate Laplace scale ``b = participations * Delta_1 / epsilon``.

    Paper 000, Lemma 2 / Thm 4 (``b = 2 eta B T_n / (D_n eps_n)``) and paper 002, Thm 1
    (``s_i = (2 xi_1 / d_i) (bT/N) / eps_i``): basic composition gives each of the
    ``participations`` releases ``epsilon / participations``; with ``participations=1``,
    ``epsilon`` is the budget of this one release. Variance is ``2 b^2`` per coordinate.
    """
    _positive("sensitivity", sensitivity)
    _positive("epsilon", epsilon)
    _positive("participations", participations)
    return participations * sensitivity / epsilon


def zcdp_gaussian_sigma(*, clip: float, rho: float, dataset_size: float) -> float:
    """Gaussian std for ``rho``-zCDP: ``sigma^2 = 2 C^2 / (rho |D_i|^2)``.

    Sensitivity ``2C/|D_i|``. Paper 003, Corollary 1 (Eq. 9) and Eq. 10; the note checks
    ``Delta^2 / (2 rho) = (2C/|D|)^2 / (2 rho)``. No correction needed.
    """
    _positive("clip", clip)
    _positive("rho", rho)
    _positive("dataset_size", dataset_size)
    return math.sqrt(2.0 * clip**2 / (rho * dataset_size**2))


def zcdp_to_epsilon(rho: float, *, delta: float) -> float:
    """``rho``-zCDP implies ``(rho + 2 sqrt(rho ln(1/delta)), delta)``-DP.

    Bun & Steinke (2016), Prop. 1.3; used by note 003 §2 to report a per-client epsilon.
    """
    if rho < 0:
        raise ScenarioError("rho", rho, "must be >= 0")
    _probability("delta", delta)
    return rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta))


def epsilon_to_zcdp(epsilon: float, *, delta: float) -> float:
    """Largest ``rho`` with ``zcdp_to_epsilon(rho, delta) <= epsilon``: the inverse of it.

    Solving ``s^2 + 2 s sqrt(L) = epsilon`` for ``s = sqrt(rho)``, ``L = ln(1/delta)``:
    ``rho = (sqrt(L + epsilon) - sqrt(L))^2`` (Bun & Steinke 2016, Prop. 1.3 inverted).
    """
    if epsilon < 0:
        raise ScenarioError("epsilon", epsilon, "must be >= 0")
    _probability("delta", delta)
    log_term = math.log(1.0 / delta)
    return (epsilon / (math.sqrt(log_term + epsilon) + math.sqrt(log_term))) ** 2


def privacy_aware_noise_factor(
    *, epsilon: float, delta: float, sample_rate: float, dataset_size: float
) -> float:
    """``V_k`` of paper 001, Eq. 7.

    ``V_k = 8 log(e + r eps'/delta) / (|M_k|^2 r^2 eps'^2)`` with
    ``eps' = log(1 + (e^eps - 1)/r)`` (inverse subsampling, Lemma 1, then Lemma 2).
    """
    _positive("epsilon", epsilon)
    _probability("delta", delta)
    _probability("sample_rate", sample_rate, closed=True)
    _positive("dataset_size", dataset_size)
    eps_prime = math.log1p(math.expm1(epsilon) / sample_rate)
    numerator = 8.0 * math.log(math.e + sample_rate * eps_prime / delta)
    return numerator / (dataset_size**2 * sample_rate**2 * eps_prime**2)


def privacy_aware_sigma(
    *,
    clip: float,
    epsilon: float,
    delta: float,
    sample_rate: float,
    dataset_size: float,
    participations: int,
    local_steps: int,
) -> float:
    """Per-coordinate DP-SGD noise std of paper 001, Eq. 6: ``sigma_k = C sqrt(V_k T_k T^l)``.

    Added to the *mean* clipped gradient of each local step; fixed for the whole run from the
    realised selection count ``T_k`` (``participations``) and ``T^l`` local steps. The noise
    multiplier is ``sigma_k * B_k / C`` with ``B_k = sample_rate * dataset_size``.
    Implemented exactly as written (note 001 §8.4: the constants are not a proven guarantee).
    """
    _positive("clip", clip)
    _positive("participations", participations)
    _positive("local_steps", local_steps)
    v_k = privacy_aware_noise_factor(
        epsilon=epsilon, delta=delta, sample_rate=sample_rate, dataset_size=dataset_size
    )
    return clip * math.sqrt(v_k * participations * local_steps)


def paper001_epsilon(
    *,
    sigma: float,
    clip: float,
    delta: float,
    sample_rate: float,
    dataset_size: float,
    steps: int,
) -> float:
    """ε that paper 001's closed form (Eq. 6-7) claims for ``steps`` noisy steps at std σ.

    Solves ``C sqrt(V_k(ε) steps) = σ`` for ε (``V_k`` decreases in ε), i.e. inverts
    :func:`privacy_aware_sigma` with ``participations * local_steps = steps``.
    """
    from scipy.optimize import brentq

    if steps == 0:
        return 0.0

    def gap(log_eps: float) -> float:
        eps = math.exp(log_eps)
        target = privacy_aware_sigma(
            clip=clip,
            epsilon=eps,
            delta=delta,
            sample_rate=sample_rate,
            dataset_size=dataset_size,
            participations=steps,
            local_steps=1,
        )
        return math.log(target) - math.log(sigma)

    lo, hi = math.log(1e-8), math.log(600.0)  # e^ε must stay finite
    if gap(hi) > 0:
        return math.exp(hi)
    return math.exp(brentq(gap, lo, hi, xtol=1e-10))


# ---------------------------------------------------------------- analytic Gaussian mechanism
def analytic_gaussian_delta(
    *, epsilon: np.ndarray | float, noise_multiplier: np.ndarray | float
) -> np.ndarray:
    """Smallest δ for which one Gaussian release of multiplier z = σ/Δ is (ε, δ)-DP.

    Balle & Wang (2018), Theorem 8 (the exact privacy profile of the Gaussian mechanism):
    ``δ(ε) = Φ(1/(2z) − εz) − e^ε Φ(−1/(2z) − εz)``. The second term is evaluated in log space
    (``log_ndtr``) so large ε does not overflow. Vectorised over both arguments.
    """
    from scipy.special import log_ndtr, ndtr

    eps = np.asarray(epsilon, dtype=float)
    z = np.asarray(noise_multiplier, dtype=float)
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        first = ndtr(0.5 / z - eps * z)
        second = np.exp(eps + log_ndtr(-0.5 / z - eps * z))
        out = np.maximum(first - second, 0.0)
    return np.where(z == np.inf, 0.0, np.where(z <= 0, 1.0, out))


def analytic_gaussian_epsilon(
    *, noise_multiplier: np.ndarray | float, delta: np.ndarray | float, iterations: int = 80
) -> np.ndarray:
    """Smallest ε with ``analytic_gaussian_delta(ε, z) <= δ``: the exact ε of one release.

    Vectorised bisection on ε (δ(ε) decreases in ε); the upper end of the final bracket is
    returned, so the result is never below the true ε (rounded up by at most 2^-80 of the
    bracket). z = ∞ costs 0; z = 0 or δ = 0 costs ∞.
    """
    z, delta = np.broadcast_arrays(
        np.asarray(noise_multiplier, dtype=float), np.asarray(delta, dtype=float)
    )
    shape = z.shape
    z, delta = z.ravel(), delta.ravel()
    out = np.full(z.shape, math.inf)
    free = (z == np.inf) | (analytic_gaussian_delta(epsilon=0.0, noise_multiplier=z) <= delta)
    out[free] = 0.0
    todo = ~free & (z > 0) & (delta > 0)
    if todo.any():
        zt, dt = z[todo], delta[todo]
        hi = np.ones_like(zt)
        for _ in range(200):  # ε(δ) grows like 1/(2z²) + sqrt(2 ln(1/δ))/z
            short = analytic_gaussian_delta(epsilon=hi, noise_multiplier=zt) > dt
            if not short.any():
                break
            hi = np.where(short, hi * 2.0, hi)
        lo = np.zeros_like(zt)
        for _ in range(iterations):
            mid = 0.5 * (lo + hi)
            ok = analytic_gaussian_delta(epsilon=mid, noise_multiplier=zt) <= dt
            hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
        out[todo] = hi
    return out.reshape(shape)


def analytic_gaussian_sigma(
    *, sensitivity: float = 1.0, epsilon: float, delta: float, iterations: int = 100
) -> float:
    """Smallest σ for which one Gaussian release of L2 sensitivity Δ is (ε, δ)-DP, any ε > 0.

    Balle & Wang (2018), Algorithm 1 / Theorem 8, solved by bisection on z = σ/Δ (δ(ε; z)
    decreases in z); the upper end of the final bracket is returned, so the σ always meets
    (ε, δ). Example: ε = 1, δ = 1e-5 gives z ≈ 3.73 (the classic bound gives 4.84).
    """
    _positive("sensitivity", sensitivity)
    _positive("epsilon", epsilon)
    _probability("delta", delta)
    z = _solve_multipliers(np.array([epsilon]), np.array([delta]), iterations=iterations)
    return sensitivity * float(z[0])


class PairMemo:
    """A bounded memo of a vectorised function ``fn(a, b)`` of two float arrays, per element.

    Rounds of a run ask for the same (ε, δ) or (z, δ) pairs again and again, and ``b`` takes
    few distinct values (one δ share per budget law): per distinct ``b`` the known ``a`` are
    kept sorted, so a lookup is one ``searchsorted`` and only new pairs are computed (in one
    vectorised call). Holds at most ``size`` pairs (cleared when full).
    """

    def __init__(self, size: int = 1 << 18) -> None:
        self.size = size
        self.count = 0
        self.tables: dict[float, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, fn, a: np.ndarray, b: np.ndarray) -> np.ndarray:  # type: ignore[no-untyped-def]
        a, b = np.broadcast_arrays(np.asarray(a, float), np.asarray(b, float))
        shape, a, b = a.shape, a.ravel(), b.ravel()
        out = np.empty(a.size)
        first = b[0] if b.size else 0.0
        groups = [(first, slice(None))] if np.all(b == first) else None
        if groups is None:
            groups = [(float(v), b == v) for v in np.unique(b)]
        for value, rows in groups:
            out[rows] = self._lookup(fn, a[rows], float(value))
        return out.reshape(shape)

    def _lookup(self, fn, a: np.ndarray, b: float) -> np.ndarray:  # type: ignore[no-untyped-def]
        keys, values = self.tables.get(b, (np.zeros(0), np.zeros(0)))
        at = np.minimum(np.searchsorted(keys, a), max(keys.size - 1, 0))
        hit = keys[at] == a if keys.size else np.zeros(a.size, dtype=bool)
        if hit.all():
            return values[at]
        new = np.unique(a[~hit])
        if self.count + new.size > self.size:
            self.tables, self.count = {}, 0
            keys, values = np.zeros(0), np.zeros(0)
        fresh = np.asarray(fn(new, np.full(new.size, b)), dtype=float)
        keys, values = np.concatenate([keys, new]), np.concatenate([values, fresh])
        order = np.argsort(keys, kind="stable")
        keys, values = keys[order], values[order]
        self.tables[b] = (keys, values)
        self.count += new.size
        return values[np.searchsorted(keys, a)]


_MULTIPLIERS = PairMemo()
_EPSILONS = PairMemo()


def analytic_gaussian_multipliers(epsilon: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``analytic_gaussian_sigma`` with Δ = 1 for arrays of (ε, δ) (ε > 0, 0 < δ < 1).

    Memoised per pair; new pairs are solved in one vectorised bisection.
    """
    return _MULTIPLIERS(_solve_multipliers, epsilon, delta)


def analytic_gaussian_epsilons(noise_multiplier: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``analytic_gaussian_epsilon`` for arrays, memoised per (z, δ) pair."""
    return _EPSILONS(
        lambda z, d: analytic_gaussian_epsilon(noise_multiplier=z, delta=d), noise_multiplier, delta
    )


def _solve_multipliers(
    epsilon: np.ndarray, delta: np.ndarray, *, iterations: int = 100
) -> np.ndarray:
    """Vectorised bisection for the smallest z with δ(ε; z) <= δ, per (ε, δ) pair."""
    eps, dlt = np.broadcast_arrays(np.asarray(epsilon, float), np.asarray(delta, float))
    keys = np.stack([eps.ravel(), dlt.ravel()], axis=1)
    if keys.size and not (np.all(keys[:, 0] > 0) and np.all((keys[:, 1] > 0) & (keys[:, 1] < 1))):
        bad = keys[~((keys[:, 0] > 0) & (keys[:, 1] > 0) & (keys[:, 1] < 1))][0]
        raise ScenarioError(
            "epsilon, delta", tuple(bad.tolist()), "need epsilon > 0, delta in (0, 1)"
        )
    uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
    e, d = uniq[:, 0], uniq[:, 1]
    lo, hi = np.zeros_like(e), np.ones_like(e)
    for _ in range(200):
        short = analytic_gaussian_delta(epsilon=e, noise_multiplier=hi) > d
        if not short.any():
            break
        lo, hi = np.where(short, hi, lo), np.where(short, hi * 2.0, hi)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        ok = analytic_gaussian_delta(epsilon=e, noise_multiplier=mid) <= d
        hi, lo = np.where(ok, mid, hi), np.where(ok, lo, mid)
    return hi[inverse.ravel()].reshape(eps.shape)
