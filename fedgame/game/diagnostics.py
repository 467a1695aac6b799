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
* **A cartel is one player** (:func:`cartel_gap`, linear cost, full delivery for its members):
  its budget is X = Σ_{i∈K} ρ_i, its utility the joint R·X/(X + s_K) − φ·Σ_{i∈K} ν_iρ_i
  (s_K the outsiders' expected delivered total), and its best response fills the members in
  increasing ν (:mod:`fedgame.game.contest`). Its gap is what the cartel as a whole forgoes;
  each member's unilateral defection gain (the ordinary gap of that member alone) is reported
  apart: at the cartel's equilibrium the members hold back on purpose, so their own gains are
  positive while the game's gap is 0.
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


def cartel_gap(
    rho: np.ndarray,
    nu: np.ndarray,
    *,
    reward: float,
    phi: float,
    p: np.ndarray | None,
    caps: np.ndarray | None,
    cartel: np.ndarray,
) -> tuple[float, float]:
    """(absolute, normalised) Nash gap of the cartel ``cartel`` (a mask) as one player
    (module doc), linear cost; members deliver for sure, outsiders with ``p`` (None: 1).

    With s_K the outsiders' expected delivered total and members sorted by ν, member j of the
    best response gets clip(sqrt(R·s_K/(φν_j)) − s_K − B_(j−1), 0, cap_j), B_(j−1) the caps of
    the cheaper members: the joint marginal payment R·s_K/(X + s_K)² meets the marginal cost
    φν_j of the member being filled. With s_K = 0 the supremum R (X → 0+) is used.

    >>> rho = np.array([0.25, 0.25, 0.0]); nu = np.ones(3); k = np.array([False, True, True])
    >>> cartel_gap(rho, nu, reward=1.0, phi=1.0, p=None, caps=None, cartel=k)
    (0.0, 0.0)
    """
    members = np.asarray(cartel, dtype=bool)
    outsiders = ~members
    weighted = rho if p is None else p * rho
    s = float(weighted[outsiders].sum())
    x_now = float(rho[members].sum())
    cost_now = phi * float(nu[members] @ rho[members])
    paid_now = reward * x_now / (x_now + s) if x_now + s > 0 else 0.0
    if s > 0:
        order = np.argsort(nu[members], kind="stable")
        nu_sorted = nu[members][order]
        cap = np.full(nu_sorted.size, np.inf) if caps is None else caps[members][order]
        before = np.concatenate(([0.0], np.cumsum(cap)[:-1]))
        fill = np.clip(np.sqrt(reward * s / (phi * nu_sorted)) - s - before, 0.0, cap)
        x_br = float(fill.sum())
        paid_br = reward * x_br / (x_br + s)
        best = paid_br - phi * float(nu_sorted @ fill)
    else:
        paid_br = best = reward
    gap = max(best - (paid_now - cost_now), 0.0)
    scale = max(paid_br, paid_now)
    return gap, (gap / scale if gap > 0 and scale > 0 else 0.0)


def as_one_player(gaps: Gaps, cartel: np.ndarray, gap: tuple[float, float]) -> Gaps:
    """``gaps`` with the members of ``cartel`` replaced by one player, the cartel's ``gap``."""
    keep = ~np.asarray(cartel, dtype=bool)
    return Gaps(np.append(gaps.absolute[keep], gap[0]), np.append(gaps.normalised[keep], gap[1]))
