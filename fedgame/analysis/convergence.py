"""When a run's game has settled: convergence detection on the per-round diagnostics.

A run has **converged at round t*** when t* is the first round such that, over the stretch
[t*, T] (T the last round; at least ``min_rounds`` rounds and ``min_share`` of the run's
rounds long, so that a short tail of a slow trend does not pass for a plateau):

1. **small gap**: the normalised Nash gap stays at or below ``gap_tol`` in every round of the
   stretch (ex ante, ``nash_gap_ante_norm_max``, when the run has it, else ex post,
   ``nash_gap_norm_max``; :mod:`fedgame.game.diagnostics`). A NaN gap breaks the stretch; a
   run without any gap column is judged on stationarity alone.
2. **stationary R and ρ**: for the leader's reward ``reward`` and the followers' total budget
   (``sum_rho_played`` when present, else ``sum_rho``), with m the series' mean over the
   stretch, L its length and s the residual standard deviation of its least-squares line,
   both

   * the **drift** |b|·(L − 1)/|m| (b the fitted slope: the trend's change over the stretch,
     relative to its level) and
   * the **head offset** |mean of the first ``window`` rounds − m|/|m| (the stretch does not
     start in a transient)

   are at most ``drift_tol`` plus ``z`` standard errors of themselves (σ·(L − 1)/sqrt(Sxx)
   and σ·sqrt(1/window + 1/L), over |m|, with σ the robust noise scale of :func:`noise_sd`).
   The allowance makes noisy but stationary play count as settled. Second differences cancel
   a trend, so a smooth trend gets no allowance: a reward that grows linearly never settles.
3. **or stationary around the leader's trend** (``detrend``, on by default): a leader that
   discounts the future raises R_t on a geometric schedule (QI-DPFL's R_t* grows by
   π^(−1/2) a round, about 3 % at π = 0.9429), and best responders follow it (ρ_i = C_i·R_t).
   With g the least-squares slope of log R over the stretch, both series multiplied by
   e^(−g·t) (de-trended at the *leader's* rate) must pass condition 2, so Σρ must keep pace
   with R (followers still catching up drift against R's trend). The rate itself must be
   constant: with c the quadratic coefficient of log R over the stretch (centred rounds),
   the change of the rate across the stretch |2c|·(L − 1) is at most ``drift_tol``·|g| plus
   ``z`` standard errors (σ_r·2(L − 1)/sqrt(Σ(q − q̄)²), q the squared centred round and σ_r
   the robust noise scale of the quadratic fit's residuals), so a linear or accelerating R
   is not a trend (R = 1 + 0.2t over rounds 29-100 changes its rate from 3.4 % to 1 %).
   Both series must be positive on the stretch, and a run with only one of them is never
   de-trended (nothing to keep pace with). The rate found is the verdict's ``trend``,
   e^g − 1 per round (0 when the series were stationary as they are).

A run with neither series has no game to settle and never converges. The equilibrium values
of a converged run are the means over [t*, T] (:func:`fedgame.analysis.equilibrium.
settled_means`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: normalised Nash gap columns, in order of preference (ex ante first)
GAP_COLUMNS = ("nash_gap_ante_norm_max", "nash_gap_norm_max")
#: the followers' total budget, in order of preference (every response first)
RHO_COLUMNS = ("sum_rho_played", "sum_rho")


@dataclass(frozen=True)
class Criteria:
    """Tolerances of convergence detection (module doc).

    Attributes:
        gap_tol: largest normalised Nash gap in the stretch.
        drift_tol: largest relative drift and head offset of R and Σρ.
        window: rounds in the head of the stretch.
        min_rounds: shortest stretch that can show convergence (at least 3).
        min_share: shortest stretch as a share of the run's rounds, in (0, 1].
        z: standard errors allowed for noise.
        detrend: accept play that is stationary around the leader's geometric trend
            (condition 3).
    """

    gap_tol: float = 0.05
    drift_tol: float = 0.1
    window: int = 5
    min_rounds: int = 10
    min_share: float = 0.25
    z: float = 2.0
    detrend: bool = True

    def __post_init__(self) -> None:
        if self.min_rounds < 3 or not 1 <= self.window <= self.min_rounds:
            raise ValueError(
                f"convergence criteria: need min_rounds >= 3 and 1 <= window <= min_rounds "
                f"(got min_rounds={self.min_rounds}, window={self.window})"
            )
        if not 0 < self.min_share <= 1:
            raise ValueError(f"convergence criteria: min_share in (0, 1], got {self.min_share}")


@dataclass(frozen=True)
class Convergence:
    """One run's verdict: whether and from which round (NaN if never) it converged, and
    from which round R and Σρ alone were stationary (conditions 2-3 without the gap: play that
    settled away from equilibrium, e.g. best responses that ignore stragglers); ``trend`` the
    leader's growth per round on the converged stretch (0: none; NaN: not converged)."""

    converged: bool
    round: float
    stationary_round: float = math.nan
    trend: float = math.nan


def noise_sd(values: np.ndarray) -> float:
    """Robust noise scale of a series: median |Δ²y| / (0.6745·sqrt(6)).

    For white noise of standard deviation σ, Δ²y is normal with variance 6σ², whose median
    absolute value is 0.6745·sqrt(6)·σ. Second differences cancel a linear trend, and the
    median ignores the few large differences a transient or a jump makes, so neither a trend
    nor a transient passes for noise.
    """
    second = np.diff(np.asarray(values, dtype=float), n=2)
    return float(np.median(np.abs(second))) / (0.6745 * math.sqrt(6.0)) if second.size else 0.0


def settled(values: np.ndarray, criteria: Criteria) -> bool:
    """Whether a stretch of one series is stationary (module doc, condition 2)."""
    y = np.asarray(values, dtype=float)
    if not np.all(np.isfinite(y)):
        return False
    length, w = y.size, criteria.window
    mean = float(y.mean())
    if np.all(y == y[0]):
        return True
    scale = abs(mean) if mean != 0 else 1.0
    x = np.arange(length) - (length - 1) / 2.0
    sxx = float(x @ x)
    slope = float(x @ (y - mean)) / sxx
    s = noise_sd(y)
    drift = abs(slope) * (length - 1) / scale
    drift_se = s * (length - 1) / math.sqrt(sxx) / scale
    head = abs(float(y[:w].mean()) - mean) / scale
    head_se = s * math.sqrt(1.0 / w + 1.0 / length) / scale
    tol, z = criteria.drift_tol, criteria.z
    return drift <= tol + z * drift_se and head <= tol + z * head_se


def growth_rate(values: np.ndarray) -> float:
    """Least-squares slope g of log y on the round index (NaN unless every y > 0).

    >>> round(float(growth_rate(2.0 * 1.03 ** np.arange(10))), 9)
    0.029558802
    """
    y = np.asarray(values, dtype=float)
    if y.size < 2 or not np.all(y > 0) or not np.all(np.isfinite(y)):
        return math.nan
    x = np.arange(y.size) - (y.size - 1) / 2.0
    logs = np.log(y)
    return float(x @ (logs - logs.mean()) / (x @ x))


def _settles(values: list[np.ndarray], criteria: Criteria) -> float:
    """NaN when the stretch does not settle, else the trend it settles around (0: none)."""
    if all(settled(v, criteria) for v in values):
        return 0.0
    if not criteria.detrend or len(values) < 2:
        return math.nan
    rate = growth_rate(values[0])  # the leader's reward sets the trend
    if math.isnan(rate) or not all(np.all(v > 0) for v in values[1:]):
        return math.nan
    if not _constant_rate(np.log(values[0]), rate, criteria):
        return math.nan
    shift = np.exp(-rate * (np.arange(values[0].size) - (values[0].size - 1) / 2.0))
    if all(settled(v * shift, criteria) for v in values):
        return float(math.expm1(rate))
    return math.nan


def _constant_rate(logs: np.ndarray, rate: float, criteria: Criteria) -> bool:
    """Whether the growth rate of ``exp(logs)`` is constant over the stretch (module doc)."""
    length = logs.size
    x = np.arange(length) - (length - 1) / 2.0
    q = x * x - float((x * x).mean())
    sqq = float(q @ q)
    if sqq == 0:
        return True
    curve = float(q @ logs) / sqq
    fit = logs.mean() + rate * x + curve * q
    change = abs(2.0 * curve) * (length - 1)
    se = noise_sd(logs - fit) * 2.0 * (length - 1) / math.sqrt(sqq)
    return change <= criteria.drift_tol * abs(rate) + criteria.z * se


def _first_column(frame: pd.DataFrame, names: tuple[str, ...]) -> str | None:
    return next((c for c in names if c in frame and frame[c].notna().any()), None)


def detect(run: pd.DataFrame, criteria: Criteria | None = None) -> Convergence:
    """Convergence of one run's rounds (module doc); rows need not be sorted."""
    crit = criteria or Criteria()
    frame = run.sort_values("round")
    series = [c for c in ("reward", _first_column(frame, RHO_COLUMNS)) if c and c in frame]
    never = Convergence(False, math.nan)
    if not series:
        return never
    frame = frame[frame[series].notna().any(axis=1)]  # round 0 (before play) has no game
    n = len(frame)
    shortest = max(crit.min_rounds, math.ceil(crit.min_share * n))
    if n < shortest:
        return never
    gap_col = _first_column(frame, GAP_COLUMNS)
    first = 0
    if gap_col is not None:
        ok = (frame[gap_col].to_numpy(float) <= crit.gap_tol)[::-1]
        stays = np.logical_and.accumulate(ok)[::-1]  # gap small from here to the end
        first = int(np.argmax(stays)) if stays.any() else n
    values = [frame[c].to_numpy(float) for c in series]
    rounds = frame["round"].to_numpy(float)
    trends = {}
    for i in range(n - shortest + 1):
        trend = _settles([v[i:] for v in values], crit)
        if not math.isnan(trend):
            trends[i] = trend
    stationary = rounds[min(trends)] if trends else math.nan
    start = next((i for i in sorted(trends) if i >= first), None)
    if start is None:
        return Convergence(False, math.nan, stationary)
    return Convergence(True, float(rounds[start]), stationary, trends[start])
