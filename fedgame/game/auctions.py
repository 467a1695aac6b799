"""Procurement (reverse) auctions for k units of privacy, and what a bid earns (ours).

The leader buys k units: k clients each sell one fixed zCDP budget ρ (the unit). Client i
bids a per-unit cost b_i (reward units per unit ρ); its true per-unit cost is
κ_i = φ·ν_i·c(ρ)/ρ (the contest's cost φν_i·c(ρ), c(ρ) = ρ or ρ², per unit bought: φν_i, or
φν_iρ). The k lowest bids at or below the reserve r win (ties: the lower client id first) and
each winner sells ρ and is paid ρ times its per-unit price:

* **threshold** (the k-unit Vickrey auction, the VCG mechanism for unit-supply sellers:
  Vickrey 1961; Nisan, Roughgarden, Tardos & Vazirani, *Algorithmic Game Theory* 2007, §9.3):
  every winner is paid its critical value, the largest bid with which it would still have won,
  min(r, b_(k+1)), the (k+1)-th lowest bid (r when fewer than k+1 clients bid). The allocation
  is monotone and the payment is the threshold, so bidding b_i = κ_i is a dominant strategy
  (Myerson 1981's characterisation; AGT Thm 9.36) and no winner is paid below its bid
  (individually rational for truthful bidders).
* **first price** (pay as bid): every winner is paid its own bid b_i. Truthful bidding earns
  nothing, so bidders shade (bid above cost) towards the price that still wins.

A **budget-feasible** auction (Singer 2010, "Budget feasible mechanisms", FOCS, §4: the
proportional-share mechanism; here every unit is worth the same to the leader) spends at most
a budget B per round instead of buying a fixed k: with the bids sorted, b_(1) ≤ b_(2) ≤ ...,
the winners are the k* lowest for the largest k* with b_(k*) ≤ B/k* (each would accept its
proportional share of B), and each winner is paid its threshold, the largest bid with which
it still wins against the others' bids o_(1) ≤ ... ≤ o_(n−1) (:func:`budget_thresholds`):
θ_i = max over k with o_(k−1) ≤ B/k of min(o_(k), B/k) (o_(0) = −∞, o_(n) = ∞), which is
min(B/k*, b_(k*+1)) for every winner. The allocation is monotone and winners are paid their
thresholds, so truthful bidding is dominant (Myerson 1981); k*·θ_i ≤ k*·B/k* = B, so the
payments never exceed the budget.

:func:`bid_utilities` is what a bid would have earned against the others' bids held fixed: the
learning bidders' full-information feedback and the deviation search of the ex-post regret
(:func:`deviation_gains`) both use it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike

from fedgame.errors import ScenarioError

RULES = ("threshold", "first_price")
#: the budget-feasible rule's name (its winners and prices come from the budget, not k)
BUDGET_FEASIBLE = "budget_feasible"


def true_unit_cost(nu: ArrayLike, *, phi: float, unit: float, quadratic: bool) -> np.ndarray:
    """κ_i = φ·ν_i·c(ρ)/ρ, the per-unit cost of selling one unit of ``unit`` ρ."""
    nu = np.asarray(nu, dtype=float)
    return phi * nu * (unit if quadratic else 1.0)


def winners(bids: ArrayLike, *, k: int, reserve: float) -> np.ndarray:
    """Mask of the k lowest finite bids at or below ``reserve`` (ties: lower position first).

    >>> winners([0.3, 0.1, np.nan, 0.2, 0.9], k=2, reserve=0.5).tolist()
    [False, True, False, True, False]
    """
    bids = np.asarray(bids, dtype=float)
    if k < 1:
        raise ScenarioError("k", k, "an integer >= 1")
    ok = np.isfinite(bids) & (bids <= reserve)
    order = np.flatnonzero(ok)[np.argsort(bids[ok], kind="stable")]
    out = np.zeros(bids.size, dtype=bool)
    out[order[:k]] = True
    return out


def unit_prices(
    bids: ArrayLike, won: np.ndarray, *, k: int, reserve: float, rule: str
) -> np.ndarray:
    """Each winner's price per unit ρ (0 for the losers): min(r, b_(k+1)) (threshold) or its
    bid (first price), see the module doc.

    >>> b = [0.3, 0.1, np.nan, 0.2, 0.9]
    >>> w = winners(b, k=2, reserve=1.0)
    >>> unit_prices(b, w, k=2, reserve=1.0, rule="threshold").tolist()
    [0.0, 0.3, 0.0, 0.3, 0.0]
    >>> unit_prices(b, w, k=2, reserve=1.0, rule="first_price").tolist()
    [0.0, 0.1, 0.0, 0.2, 0.0]
    """
    bids = np.asarray(bids, dtype=float)
    if rule not in RULES:
        raise ScenarioError("rule", rule, ", ".join(RULES))
    if rule == "first_price":
        return np.where(won, bids, 0.0)
    valid = np.sort(bids[np.isfinite(bids)])
    critical = float(valid[k]) if valid.size > k else math.inf
    return np.where(won, min(reserve, critical), 0.0)


def kth_lowest_of_others(bids: ArrayLike, *, k: int) -> np.ndarray:
    """c_i: the k-th lowest finite bid among the others of each client (inf when fewer than k
    others bid). A bid b wins against them iff b < c_i (and b ≤ r); under the threshold rule
    min(r, c_i) is then its price.

    >>> kth_lowest_of_others([0.3, 0.1, np.nan, 0.2], k=2).tolist()
    [0.2, 0.3, 0.2, 0.3]
    """
    bids = np.asarray(bids, dtype=float)
    finite = np.isfinite(bids)
    valid = np.sort(bids[finite])
    pos = np.searchsorted(valid, bids, side="left")  # own rank among the valid bids
    among_first = finite & (pos < k)  # removing its own bid shifts the k-th lowest up by one
    index = np.where(among_first, k, k - 1)
    padded = np.append(valid, [math.inf, math.inf])
    return padded[np.minimum(index, valid.size)]


def bid_utilities(
    candidates: np.ndarray,
    cost: ArrayLike,
    critical: ArrayLike,
    *,
    reserve: float,
    rule: str,
    unit: float,
) -> np.ndarray:
    """[clients, bids]: what each candidate bid would have earned, others' bids fixed:
    unit·(price − κ_i) when it wins (b < c_i and b ≤ r; a bid at c_i is a loss), 0
    otherwise; the price is min(r, c_i) (threshold) or b (first price). ``candidates``
    [clients, bids] in reward units per unit ρ, ``cost`` κ_i and ``critical`` c_i per
    client."""
    if rule not in RULES:
        raise ScenarioError("rule", rule, ", ".join(RULES))
    cost = np.asarray(cost, dtype=float)[:, None]
    critical = np.asarray(critical, dtype=float)[:, None]
    win = (candidates < critical) & (candidates <= reserve)
    if rule == "threshold":
        price = np.broadcast_to(np.minimum(critical, reserve), candidates.shape)
    else:
        price = candidates
    return np.where(win, unit * (price - cost), 0.0)


def deviation_gains(
    bids: ArrayLike,
    cost: ArrayLike,
    positions: np.ndarray,
    *,
    k: int,
    reserve: float,
    rule: str,
    unit: float,
    grid: np.ndarray,
    budget: float = math.inf,
) -> np.ndarray:
    """Ex-post regret of the clients at ``positions``: the best utility over a bid grid (its
    cost times ``grid``, the truthful bid, the reserve, and just below each other bid) minus
    what its actual bid earned, the others' bids held fixed; ≥ 0, money units.

    Under the threshold rule a truthful bidder's gain is 0 (dominant strategy); under first
    price it is about unit·(c_i − κ_i) for a truthful winner (it could have bid just below c_i).
    ``rule`` may also be ``budget_feasible`` (with ``budget``; ``k`` and ``reserve`` unused).
    """
    bids = np.asarray(bids, dtype=float)
    cost = np.asarray(cost, dtype=float)
    critical, rule, reserve = others_threshold(bids, rule=rule, k=k, reserve=reserve, budget=budget)
    critical = critical[positions]
    own = cost[positions]
    others = np.sort(bids[np.isfinite(bids)])
    below = np.concatenate([others * (1 - 1e-9), [reserve]])
    candidates = np.concatenate(
        [
            own[:, None] * grid[None, :],
            own[:, None],
            np.broadcast_to(below, (own.size, below.size)),
        ],
        axis=1,
    )
    best = bid_utilities(candidates, own, critical, reserve=reserve, rule=rule, unit=unit)
    actual = bid_utilities(
        bids[positions][:, None], own, critical, reserve=reserve, rule=rule, unit=unit
    )[:, 0]
    actual = np.where(np.isfinite(bids[positions]), actual, 0.0)
    return np.maximum(np.maximum(best.max(axis=1), 0.0) - actual, 0.0)


def shading_prior(grid: np.ndarray, sd: float) -> np.ndarray:
    """log π_k of a log-normal prior over bid multipliers m_k centred on truthful bidding
    (m = 1): log π_k = −(ln m_k)²/(2·sd²), normalised (a learning bidder starts truthful and
    moves only where other bids have paid more)."""
    log_prior = -(np.log(grid) ** 2) / (2.0 * sd * sd)
    top = log_prior.max()
    return log_prior - (top + np.log(np.exp(log_prior - top).sum()))


def prior_weights(cumulative: np.ndarray, eta: ArrayLike, log_prior: np.ndarray) -> np.ndarray:
    """Exponential weights with a prior: w_k ∝ π_k·exp(η·U_k) per row (U the cumulative
    payoffs; Cesa-Bianchi & Lugosi, *Prediction, Learning, and Games* 2006, §2.1, with
    non-uniform initial weights); a row with η = inf puts the prior's mass on its leaders
    (the largest U_k)."""
    eta = np.broadcast_to(np.asarray(eta, dtype=float), (cumulative.shape[0],))
    top = cumulative.max(axis=1, keepdims=True)
    finite = np.isfinite(eta)
    rate = np.where(finite, eta, 0.0)[:, None]
    z = (cumulative - top) * rate + log_prior[None, :]
    leaders = cumulative >= top
    z = np.where(finite[:, None] | leaders, z, -np.inf)
    z -= z.max(axis=1, keepdims=True)
    w = np.exp(z)
    w /= w.sum(axis=1, keepdims=True)
    return w


def budget_winners(bids: ArrayLike, *, budget: float) -> np.ndarray:
    """Mask of the k* lowest finite bids, k* the largest k with b_(k) ≤ B/k (module doc;
    ties: lower position first).

    >>> budget_winners([0.3, 0.1, np.nan, 0.2, 0.9], budget=0.7).tolist()  # 0.3 > 0.7/3
    [False, True, False, True, False]
    """
    bids = np.asarray(bids, dtype=float)
    ok = np.isfinite(bids)
    order = np.flatnonzero(ok)[np.argsort(bids[ok], kind="stable")]
    k = np.arange(1, order.size + 1)
    fits = np.flatnonzero(bids[order] <= budget / k)
    out = np.zeros(bids.size, dtype=bool)
    if fits.size:
        out[order[: int(fits[-1]) + 1]] = True
    return out


def budget_thresholds(bids: ArrayLike, *, budget: float) -> np.ndarray:
    """θ_i, the largest bid with which client i wins the budget-feasible auction against the
    others' finite bids (module doc); −inf where no bid wins (never: k = 1 gives min(o_(1), B)
    ≥ 0 for bids ≥ 0). Ties count as wins. O(n²) over the bidders.

    >>> budget_thresholds([0.3, 0.1, 0.2, 0.9], budget=0.7).round(4).tolist()
    [0.2333, 0.3, 0.3, 0.2333]
    """
    bids = np.asarray(bids, dtype=float)
    n = bids.size
    out = np.full(n, -math.inf)
    for i in range(n):
        others = np.sort(np.delete(bids, i)[np.isfinite(np.delete(bids, i))])
        m = others.size
        k = np.arange(1, m + 2)
        below = np.concatenate(([-math.inf], others))  # o_(k-1), k = 1..m+1
        above = np.concatenate((others, [math.inf]))  # o_(k)
        share = budget / k
        fits = below <= share
        if fits.any():
            out[i] = float(np.max(np.minimum(above, share)[fits]))
    return out


def others_threshold(
    bids: np.ndarray, *, rule: str, k: int, reserve: float, budget: float
) -> tuple[np.ndarray, str, float]:
    """(c_i, rule, reserve) for :func:`bid_utilities`: a k-unit rule's k-th lowest other bid,
    or the budget-feasible threshold θ_i, which is priced as a threshold rule with no reserve
    (a bid wins iff it is below θ_i and is paid θ_i)."""
    if rule == BUDGET_FEASIBLE:
        return budget_thresholds(bids, budget=budget), "threshold", math.inf
    return kth_lowest_of_others(bids, k=k), rule, reserve


def clear_market(
    bids: ArrayLike, *, rule: str, k: int, reserve: float, budget: float
) -> tuple[np.ndarray, np.ndarray]:
    """(winners mask, price per unit ρ) under ``rule``: the k-unit rules of :func:`winners`
    and :func:`unit_prices`, or the budget-feasible rule (its thresholds, module doc)."""
    bids = np.asarray(bids, dtype=float)
    if rule == BUDGET_FEASIBLE:
        won = budget_winners(bids, budget=budget)
        prices = np.zeros(bids.size)
        if won.any():
            prices[won] = budget_thresholds(bids, budget=budget)[won]
        return won, prices
    won = winners(bids, k=k, reserve=reserve)
    return won, unit_prices(bids, won, k=k, reserve=reserve, rule=rule)
