"""Screening contracts for privacy: the optimal menu {(ρ_k, r_k)} for a discrete type law.

The leader buys a zCDP budget ρ from a client whose type θ = φ·ν (privacy value ν, weight
φ) it does not know; it knows the law of θ: types θ_1 < … < θ_n (the most efficient first)
with probabilities p_1..p_n. A client of type θ taking item (ρ, r) gets r − θ·c(ρ), with
c(ρ) = ρ (linear, the cost of the QI-DPFL contest, paper 003 Eq. 17) or ρ²/2 (quadratic).
The leader values ρ through the noise term of the contest's server cost (paper 003 Eq. 15):
buying ρ from one of N clients lowers the accuracy-loss bound by a term ∝ 1/ρ, so in money
units V(ρ) = −α/ρ, concave and increasing (:func:`server_value_alpha`).

The leader maximises E[V(ρ_k) − r_k] subject to IR (r_k ≥ θ_k·c(ρ_k)) and IC (no type
prefers another's item). The standard solution (Laffont & Martimort 2002, ch. 2-3, §3.1-3.3;
Bolton & Dewatripont 2005, §2.3), in the variable x = c(ρ) in which the cost is linear:

* **virtual costs** θ̃_k = θ_k + (F_(k−1)/p_k)·(θ_k − θ_(k−1)), F_(k−1) = Σ_(j<k) p_j (the
  information rent the efficient types must be left);
* **ironing**: when θ̃ is not nondecreasing, adjacent types are pooled and given their
  p-weighted mean virtual cost (pool-adjacent-violators; L&M §2.14 and §3.3), which makes the
  allocation monotone;
* **allocation**: ρ_k maximises V(ρ) − θ̃_k·c(ρ): V'(ρ) = θ̃_k·c'(ρ) gives ρ_k = √(α/θ̃_k)
  (linear) or (α/θ̃_k)^(1/3) (quadratic), then min(·, cap); the most efficient type gets
  its first-best (θ̃_1 = θ_1, "no distortion at the top");
* **transfers**: IR binds for the highest-cost type, r_n = θ_n·c(ρ_n); downward IC binds,
  r_k = r_(k+1) + θ_k·(c(ρ_k) − c(ρ_(k+1))): type k is indifferent between its item and
  type k+1's.

Clients self-select (:func:`self_select`): the affordable item with the largest
r_k − θ_i·c(ρ_k), or decline when every affordable item gives less than 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from fedgame.errors import ScenarioError
from fedgame.game.stackelberg import ServerCostParams

Cost = Literal["linear", "quadratic"]
#: utilities within this (relative) slack of the best count as ties (floating-point rounding
#: of the binding IC constraints): a tie goes to the item with the larger ρ
TIE = 1e-9


def cost_of(rho: ArrayLike, cost: Cost) -> np.ndarray:
    """c(ρ): ρ (linear) or ρ²/2 (quadratic); the client's privacy cost is θ·c(ρ)."""
    rho = np.asarray(rho, dtype=float)
    return rho if cost == "linear" else rho * rho / 2.0


def _check_types(theta: ArrayLike, prob: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    theta = np.asarray(theta, dtype=float)
    prob = np.asarray(prob, dtype=float)
    if theta.ndim != 1 or theta.size == 0 or not np.all(np.isfinite(theta)) or np.any(theta <= 0):
        raise ScenarioError("types", theta.tolist(), "a non-empty list of finite costs > 0")
    if np.any(np.diff(theta) <= 0):
        raise ScenarioError("types", theta.tolist(), "strictly increasing type costs")
    if prob.shape != theta.shape or np.any(prob <= 0) or not np.all(np.isfinite(prob)):
        raise ScenarioError("probabilities", prob.tolist(), f"{theta.size} probabilities > 0")
    if abs(prob.sum() - 1.0) > 1e-9:
        raise ScenarioError("probabilities", prob.tolist(), "probabilities summing to 1")
    return theta, prob


def virtual_costs(theta: ArrayLike, prob: ArrayLike) -> np.ndarray:
    """θ̃_k = θ_k + (F_(k−1)/p_k)·(θ_k − θ_(k−1)) (L&M 2002 §3.1, Eq. 3.5 for n types).

    ``theta`` strictly increasing (most efficient first), ``prob`` their probabilities.

    >>> virtual_costs([1.0, 2.0], [0.5, 0.5]).tolist()
    [1.0, 3.0]
    """
    theta, prob = _check_types(theta, prob)
    below = np.concatenate(([0.0], np.cumsum(prob)[:-1]))
    step = np.diff(theta, prepend=theta[0])
    return theta + below / prob * step


def iron(values: ArrayLike, weights: ArrayLike) -> np.ndarray:
    """The weighted isotonic (nondecreasing) regression of ``values`` (pool adjacent violators).

    Each pooled run of adjacent entries takes its ``weights``-weighted mean: the ironed
    virtual costs of L&M §2.14. Values already nondecreasing are returned unchanged.

    >>> iron([1.0, 6.5, 3.0 + 0.55 / 0.45], [0.45, 0.1, 0.45]).round(6).tolist()
    [1.0, 4.636364, 4.636364]
    """
    values = np.asarray(values, dtype=float)
    weights = np.asarray(weights, dtype=float)
    means: list[float] = []
    mass: list[float] = []
    count: list[int] = []
    for v, w in zip(values.tolist(), weights.tolist(), strict=True):
        means.append(v)
        mass.append(w)
        count.append(1)
        while len(means) > 1 and means[-2] > means[-1]:
            w2 = mass[-2] + mass[-1]
            means[-2] = (means[-2] * mass[-2] + means[-1] * mass[-1]) / w2
            mass[-2] = w2
            count[-2] += count[-1]
            del means[-1], mass[-1], count[-1]
    return np.repeat(np.asarray(means), np.asarray(count, dtype=np.int64))


def best_rho(alpha: float, theta: ArrayLike, cost: Cost, cap: float = np.inf) -> np.ndarray:
    """argmax_ρ −α/ρ − θ·c(ρ) on (0, cap]: √(α/θ) (linear), (α/θ)^(1/3) (quadratic), capped.

    From V'(ρ) = α/ρ² = θ·c'(ρ); the objective is strictly concave in ρ > 0, so the capped
    maximiser is the unconstrained one clipped at ``cap``.
    """
    ratio = alpha / np.asarray(theta, dtype=float)
    rho = np.sqrt(ratio) if cost == "linear" else np.cbrt(ratio)
    return np.minimum(rho, cap)


@dataclass(frozen=True)
class Menu:
    """A screening menu, one item per type (pooled types share their item).

    ``theta``/``prob``: the designed types (increasing) and their law; ``virtual``: the ironed
    virtual costs; ``rho``/``reward``: item k = (ρ_k, r_k), ρ nonincreasing in k.
    """

    theta: np.ndarray
    prob: np.ndarray
    virtual: np.ndarray
    rho: np.ndarray
    reward: np.ndarray
    cost: Cost = "linear"

    def items(self) -> tuple[tuple[float, float], ...]:
        """The distinct items (ρ_k, r_k), the largest ρ first (what the ``Offer`` carries)."""
        seen: list[tuple[float, float]] = []
        for rho, r in zip(self.rho.tolist(), self.reward.tolist(), strict=True):
            if not seen or seen[-1] != (rho, r):
                seen.append((rho, r))
        return tuple(seen)

    def expected_profit(self, alpha: float) -> float:
        """E[V(ρ_k) − r_k] = Σ_k p_k·(−α/ρ_k − r_k), the leader's objective (money units)."""
        return float(np.sum(self.prob * (-alpha / self.rho - self.reward)))


def screening_menu(
    theta: ArrayLike, prob: ArrayLike, *, alpha: float, cost: Cost = "linear", cap: float = np.inf
) -> Menu:
    """The leader's optimal menu for types ``theta`` with law ``prob`` (module doc).

    Args:
        theta: type costs θ_k = φ·ν_k > 0, strictly increasing.
        prob: their probabilities (> 0, summing to 1).
        alpha: the value weight α > 0 of V(ρ) = −α/ρ (money units × ρ).
        cost: the client's cost c(ρ), ``linear`` or ``quadratic``.
        cap: the largest ρ the leader buys from one client (> 0).
    """
    theta, prob = _check_types(theta, prob)
    if not np.isfinite(alpha) or alpha <= 0:
        raise ScenarioError("alpha", alpha, "a finite number > 0")
    if not cap > 0:
        raise ScenarioError("cap", cap, "a number > 0")
    virtual = iron(virtual_costs(theta, prob), prob)
    rho = best_rho(alpha, virtual, cost, cap)
    x = cost_of(rho, cost)
    reward = np.empty_like(x)
    reward[-1] = theta[-1] * x[-1]  # IR binds for the highest-cost type
    for k in range(theta.size - 2, -1, -1):  # downward IC binds (n types: n steps)
        reward[k] = reward[k + 1] + theta[k] * (x[k] - x[k + 1])
    return Menu(theta, prob, virtual, rho, reward, cost)


def first_best(theta: ArrayLike, *, alpha: float, cost: Cost = "linear") -> np.ndarray:
    """ρ under complete information: V'(ρ) = θ_k·c'(ρ), paid r_k = θ_k·c(ρ_k) (no rent)."""
    return best_rho(alpha, theta, cost)


def server_value_alpha(
    params: ServerCostParams, *, clients: int, data_sizes: ArrayLike, t: int = 1
) -> float:
    """α of V(ρ) = −α/ρ: one client's share of paper 003 Eq. 15's noise term, in money units.

    Eq. 15's round-t cost is scale·2dC²/N²·Σ_i 1/(|D_i|²ρ_i) + (1−γ)·π^(t−1)·Σ payments, with
    scale = 2βγ/(λ²T²). Dividing by the payment weight, a client of a random size adds
    α/ρ_i with α = scale·2dC²/N²·E[1/|D|²] / ((1−γ)·π^(t−1)) (N = ``clients``, E over
    ``data_sizes``); the V² constant does not depend on ρ and is left out.
    """
    sizes = np.asarray(data_sizes, dtype=float)
    if sizes.size == 0 or np.any(sizes <= 0):
        raise ScenarioError("data_sizes", sizes.tolist(), "at least one size > 0")
    if clients < 1:
        raise ScenarioError("clients", clients, "an integer >= 1")
    p = params
    noise = p.scale * 2 * p.dim * p.clip**2 / clients**2 * float(np.mean(1.0 / sizes**2))
    weight = (1 - p.gamma) * p.discount ** (max(t, 1) - 1)
    return noise / weight


def item_utilities(
    theta: ArrayLike, rho: ArrayLike, reward: ArrayLike, *, cost: Cost = "linear"
) -> np.ndarray:
    """u_(i,k) = r_k − θ_i·c(ρ_k), ``[clients, items]``."""
    theta = np.asarray(theta, dtype=float)
    x = cost_of(rho, cost)
    return np.asarray(reward, dtype=float)[None, :] - theta[:, None] * x[None, :]


def self_select(
    theta: ArrayLike,
    rho: ArrayLike,
    reward: ArrayLike,
    *,
    left: ArrayLike | None = None,
    cost: Cost = "linear",
) -> tuple[np.ndarray, np.ndarray]:
    """Each client's item: (index, utility); index −1 when it declines (utility 0).

    Client i may take item k when ρ_k ≤ ``left``_i (what is left of its budget; no limit when
    None). It takes the affordable item of largest r_k − θ_i·c(ρ_k), ties (within ``TIE``
    relative) going to the larger ρ, and declines when that utility is below 0 (IR) or no
    item is affordable. ``rho`` need not be sorted.
    """
    theta = np.asarray(theta, dtype=float)
    rho = np.asarray(rho, dtype=float)
    reward = np.asarray(reward, dtype=float)
    n = theta.size
    if rho.size == 0:
        return np.full(n, -1, dtype=np.int64), np.zeros(n)
    u = item_utilities(theta, rho, reward, cost=cost)
    if left is not None:
        can = rho[None, :] <= np.asarray(left, dtype=float)[:, None] * (1 + 1e-12)
        u = np.where(can, u, -np.inf)
    best = u.max(axis=1)
    slack = TIE * np.maximum(1.0, np.abs(reward).max())
    near = u >= best[:, None] - slack
    # among the near-best, the largest ρ (the item the leader meant for the more efficient type)
    pick = np.argmax(np.where(near, rho[None, :], -np.inf), axis=1)
    take = np.isfinite(best) & (best >= -slack)
    index = np.where(take, pick, -1).astype(np.int64)
    utility = np.where(take, u[np.arange(n), pick], 0.0)
    return index, utility


def population_types(
    nu: ArrayLike, *, bins: int, phi: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Discrete types from a population's privacy values: ``bins`` equal-count groups of the
    sorted ν, each typed by its largest ν (θ = φ·max ν, so every member's cost is at most its
    type's and the type's item leaves it a surplus ≥ 0), with probability its share of the
    population. Groups with the same largest ν merge.

    >>> population_types([0.5, 1.0, 2.0, 3.0], bins=2)[0].tolist()
    [1.0, 3.0]
    """
    nu = np.sort(np.asarray(nu, dtype=float))
    if nu.size == 0 or not np.all(np.isfinite(nu)) or np.any(nu <= 0):
        raise ScenarioError("privacy_value", nu.tolist(), "at least one finite value > 0")
    if bins < 1:
        raise ScenarioError("bins", bins, "an integer >= 1")
    groups = [g for g in np.array_split(nu, min(bins, nu.size)) if g.size]
    top = np.array([g[-1] for g in groups])
    share = np.array([g.size for g in groups], dtype=float) / nu.size
    theta, where = np.unique(top, return_inverse=True)
    prob = np.bincount(where, weights=share)
    return phi * theta, prob / prob.sum()
