"""How far a round's play is from equilibrium: Nash gaps and distance, for any policy.

All functions are vectorised over the players of one contest (QI-DPFL Eq. 16 with the
extensions of :mod:`fedgame.game.contest`).

* **Nash gap** of player i (Def. 2, Eq. 31): U_i(BR_i, ρ_-i) − U_i(ρ) ≥ 0, the utility it
  forgoes by not deviating alone. Where its rivals contribute nothing (s_i = 0) no maximiser
  exists; the supremum p_i·R (ρ → 0+ wins the whole reward) is used.
* **Normalised gap** (ours): the gap divided by the larger of the payments at the best
  response and at the current play, p_i·R·share. It is 0 at an equilibrium, compares clients
  and rounds whatever the reward's scale, and is below 1 whenever the client's current play
  earns no less than it costs. A positive gap always comes with a positive payment at one of
  the two points, so the ratio is defined.
* **Ex ante**: the contest as offered, before faults: the players' responses, utilities in
  expectation over independent delivery with p_i = 1 − straggle_prob_i.
* **Ex post**: the contest as it happened: only the delivered players, each delivered for
  sure (p ≡ 1); the non-delivered are out.
* **Distance** to an equilibrium ρ*: Σ|ρ − ρ*| / Σρ* over the players (0 at ρ*).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from fedgame.game.contest import _vector, delivery_probabilities, responses_to


@dataclass(frozen=True)
class Gaps:
    """Per-player Nash gaps: absolute (utility units) and normalised (by a payment)."""

    absolute: np.ndarray
    normalised: np.ndarray

    @property
    def max(self) -> float:
        return float(self.absolute.max()) if self.absolute.size else float("nan")

    @property
    def mean(self) -> float:
        return float(self.absolute.mean()) if self.absolute.size else float("nan")

    @property
    def normalised_max(self) -> float:
        return float(self.normalised.max()) if self.normalised.size else float("nan")


def nash_gaps(
    rho: ArrayLike,
    nu: ArrayLike,
    *,
    reward: float,
    phi: float = 1.0,
    p: ArrayLike | None = None,
    caps: ArrayLike | None = None,
    quadratic: bool = False,
) -> Gaps:
    """Every player's absolute and normalised Nash gap at profile ``rho`` (module doc)."""
    rho = np.asarray(rho, dtype=float)
    nu = np.asarray(nu, dtype=float)
    n = rho.size
    if n == 0 or reward <= 0:
        return Gaps(np.zeros(n), np.zeros(n))
    p_arr = delivery_probabilities(np.ones(n) if p is None else np.asarray(p, dtype=float), n)
    cap = _vector("caps", caps, n, np.inf)
    return gaps_of(rho, nu, reward=reward, phi=phi, p=p_arr, caps=cap, quadratic=quadratic)


def gaps_of(
    rho: np.ndarray,
    nu: np.ndarray,
    *,
    reward: float,
    phi: float,
    p: np.ndarray | None,
    caps: np.ndarray | None,
    quadratic: bool,
) -> Gaps:
    """:func:`nash_gaps` of checked float arrays (p in (0, 1], caps >= 0, reward > 0, at
    least one player); ``p`` None is full delivery and ``caps`` None no cap, computed as
    :func:`nash_gaps` computes them with arrays of ones and of infinities (bit for bit: a
    product with 1.0 and a clip at +inf change no value). For the model's per-round check,
    whose columns are valid by construction."""
    n = rho.size
    weighted = rho if p is None else p * rho
    s = weighted.sum() - weighted  # rivals' expected delivered total (contest.rivals)
    pr = reward if p is None else p * reward
    cost_weight = phi * nu
    total = rho + s
    paid_now = pr * np.divide(rho, total, out=np.zeros(n), where=total > 0)
    cost_now = cost_weight * (rho * rho if quadratic else rho)
    now = paid_now - (cost_now if p is None else p * cost_now)
    if quadratic:
        br = responses_to(s, nu, reward=reward, phi=phi, caps=caps, quadratic=True)
    else:
        br = np.sqrt(reward * s / cost_weight) - s
        br = np.clip(br, 0.0, np.inf if caps is None else caps)
    cost_br = cost_weight * (br * br if quadratic else br)
    rivals_play = s > 0
    total_br = br + s
    share_br = np.divide(br, total_br, out=np.zeros(n), where=total_br > 0)
    paid_br = np.where(rivals_play, pr * share_br, pr)
    best = np.where(rivals_play, paid_br - (cost_br if p is None else p * cost_br), pr)
    gap = np.maximum(best - now, 0.0)
    scale = np.maximum(paid_br, paid_now)
    norm = np.divide(gap, scale, out=np.zeros(n), where=(gap > 0) & (scale > 0))
    return Gaps(gap, norm)


def equilibrium_distance(rho: ArrayLike, reference: ArrayLike) -> float:
    """Σ|ρ − ρ*| / Σρ* over the players (NaN when the reference is all zero)."""
    rho = np.asarray(rho, dtype=float)
    reference = np.asarray(reference, dtype=float)
    total = float(reference.sum())
    if not total > 0:
        return float("nan")
    return float(np.abs(rho - reference).sum() / total)
