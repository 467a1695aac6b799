"""Noise calibration: pure closed forms from the papers, and accountant-based search.

Every function maps a privacy target (and a sensitivity) to a noise scale; none holds state
or draws randomness. The closed forms reproduce the papers' own calibrations, including the
loose ones, so that a scenario can be faithful to a paper; ``accountant_sigma`` gives the
tight noise multiplier under a maintained accountant (Google's ``dp_accounting``).

Conventions: ``sigma`` is a per-coordinate standard deviation in the units of the released
vector; a *noise multiplier* is ``sigma / sensitivity`` (L2). Neighbouring datasets follow
each paper (replace-one: sensitivity ``2C/D`` of a mean of ``D`` clipped terms).
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from functools import lru_cache
from typing import Literal

import dp_accounting as dpa

from fedgame.errors import ScenarioError
from fedgame.privacy.rdp_ledger import quiet_dp_accounting

ACCOUNTANTS = ("rdp", "pld", "zcdp", "basic")
PLD_CALIBRATION_DISCRETIZATION = 1e-3


def _positive(name: str, value: float) -> None:
    if not (value > 0 and math.isfinite(value)):
        raise ScenarioError(name, value, "must be a finite number > 0")


def _probability(name: str, value: float, *, closed: bool = False) -> None:
    ok = 0 < value <= 1 if closed else 0 < value < 1
    if not ok:
        raise ScenarioError(name, value, f"must lie in (0, 1{']' if closed else ')'}")


def classic_gaussian_sigma(*, sensitivity: float, epsilon: float, delta: float) -> float:
    """Classic Gaussian mechanism: ``sigma = Delta * sqrt(2 ln(1.25/delta)) / epsilon``.

    Dwork & Roth (2014), Thm A.1; paper 001 Eq. 2; paper 000 Thm 1 (with ``c^2 = 2 ln(1.25/d)``).
    The theorem only holds for ``epsilon < 1``; for ``epsilon >= 1`` the value is returned
    anyway (it is then not a proven guarantee) and the caller is expected to warn.
    """
    _positive("sensitivity", sensitivity)
    _positive("epsilon", epsilon)
    _probability("delta", delta)
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


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


def _round(value: float, rounding: str, digits: int = 10) -> float:
    """Round to ``digits`` significant digits towards ``rounding``, never past ``value``.

    Float noise is dropped first (12 significant digits), so ``0.7`` and ``0.7 + 1e-14`` share
    a cache key; the result is then moved one unit if needed to stay on the safe side.
    """
    exact = Decimal(f"{value:.12g}")
    quantum = Decimal(1).scaleb(exact.adjusted() - digits + 1)
    rounded = exact.quantize(quantum, rounding=rounding)
    if rounding == ROUND_FLOOR and float(rounded) > value:
        rounded -= quantum
    elif rounding == ROUND_CEILING and float(rounded) < value:
        rounded += quantum
    return float(rounded)


def accountant_sigma(
    *,
    epsilon: float,
    delta: float,
    steps: int,
    sample_rate: float = 1.0,
    accountant: str = "rdp",
) -> float:
    """Noise multiplier ``z = sigma / Delta`` so that ``steps`` releases meet ``(epsilon, delta)``.

    Each release is a Gaussian mechanism, Poisson-subsampled with ``sample_rate``.

    * ``rdp`` / ``pld``: ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism``
      (Brent search whose result never exceeds the target); PLD searches with discretisation
      ``1e-3`` (pessimistic, so the noise also suffices for the finer default accountant).
    * ``zcdp``: closed form ``z = sqrt(steps / (2 rho))``, ``rho = epsilon_to_zcdp(epsilon)``.
    * ``basic``: classic Gaussian per release at ``(epsilon/steps, delta/steps)``.

    ``zcdp`` and ``basic`` ignore subsampling (a valid, conservative noise). Results are cached
    on the arguments rounded conservatively to 10 significant digits (epsilon and delta down,
    sample rate up), so the returned noise always meets the requested target.

    Example (note 002 regime, 100 replies, ``q = 0.01``): ``epsilon=1, delta=1e-5`` gives
    ``z ~ 1.08`` under ``rdp``.
    """
    _positive("epsilon", epsilon)
    _probability("delta", delta)
    _probability("sample_rate", sample_rate, closed=True)
    if not (isinstance(steps, int) and steps >= 1):
        raise ScenarioError("steps", steps, "must be an integer >= 1")
    if accountant not in ACCOUNTANTS:
        raise ScenarioError("accountant", accountant, f"allowed: {', '.join(ACCOUNTANTS)}")
    return _accountant_sigma(
        _round(epsilon, ROUND_FLOOR),
        _round(delta, ROUND_FLOOR),
        steps,
        min(_round(sample_rate, ROUND_CEILING), 1.0),
        accountant,
    )


@lru_cache(maxsize=4096)
def _accountant_sigma(
    epsilon: float, delta: float, steps: int, sample_rate: float, accountant: str
) -> float:
    upper = math.sqrt(steps / (2.0 * epsilon_to_zcdp(epsilon, delta=delta)))
    if accountant == "zcdp":
        return upper
    if accountant == "basic":
        return steps * math.sqrt(2.0 * math.log(1.25 * steps / delta)) / epsilon

    def make_accountant() -> dpa.PrivacyAccountant:
        if accountant == "rdp":
            return dpa.rdp.RdpAccountant()
        return dpa.pld.PLDAccountant(value_discretization_interval=PLD_CALIBRATION_DISCRETIZATION)

    def make_event(z: float) -> dpa.DpEvent:
        event: dpa.DpEvent = dpa.GaussianDpEvent(z)
        if sample_rate < 1.0:
            event = dpa.PoissonSampledDpEvent(sample_rate, event)
        return dpa.SelfComposedDpEvent(event, steps)

    def gap(z: float) -> float:
        return make_accountant().compose(make_event(z)).get_epsilon(delta) - epsilon

    # zCDP's closed form upper-bounds the tight multiplier; bracket the root explicitly.
    with quiet_dp_accounting():
        high = upper * 1.01
        while gap(high) > 0:
            high *= 2.0
        low = high / 2.0
        while gap(low) <= 0:
            low /= 2.0
        interval = dpa.mechanism_calibration.ExplicitBracketInterval(low, high)
        return float(
            dpa.mechanism_calibration.calibrate_dp_mechanism(
                make_accountant, make_event, epsilon, delta, interval, tol=1e-6 * high
            )
        )
