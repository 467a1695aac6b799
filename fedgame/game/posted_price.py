"""A posted price per unit of privacy: the sellers' supply and the leader's optimal price (ours).

The leader posts one price p per unit of zCDP budget ρ (reward units per unit ρ). Client i
bears the contest's privacy cost φ·ν_i·c(ρ) (paper 003 Eq. 17, φ = φ_1; c(ρ) = ρ, or ρ² as
the quadratic family of :mod:`fedgame.game.contest`) and sells at most its capacity q_i (what
is left of its budget, or a cap). Its profit p·ρ − φ·ν_i·c(ρ) on [0, q_i] is maximised by
the supply

* linear cost: s_i(p) = q_i when p ≥ φ·ν_i, else 0 (all or nothing: the profit is linear; an
  indifferent seller sells);
* quadratic cost: s_i(p) = min(p/(2φν_i), q_i) (the peak of a concave profit, clipped).

The leader chooses p to minimise the same round cost as the contest's leader, QI-DPFL's
Eq. 15 (:func:`fedgame.game.stackelberg.server_cost`) at the supplied budgets and the total
paid p·Σ_i s_i(p), so the two families are compared on one scale. With linear cost the
supplied set only changes at the thresholds φ·ν_i, and between two thresholds a higher price
buys nothing more, so the optimum is one of the thresholds: k-th cheapest seller's φ·ν_(k),
for the k that minimises (Eq. 15 with the k cheapest at their capacities)
J_k = scale·(V² + 2dC²/k²·Σ_{j≤k} 1/(|D_j|²q_j)) + (1−γ)π^(t−1)·φν_(k)·Σ_{j≤k} q_j.
With quadratic cost and no binding capacity J(p) = scale·V² + a/p + b·p² with
a = scale·4dC²φ/N²·Σ_i ν_i/|D_i|² and b = (1−γ)π^(t−1)·Σ_i 1/(2φν_i), minimised at
p* = (a/(2b))^(1/3); with capacities J is smooth between the kinks p = 2φν_iq_i and is
minimised on each piece (bounded Brent) and the best piece kept (past the last kink every
seller is capped and J grows with p).

A leader that does not know ν plays the same rule at its belief ν̂ (:mod:`fedgame.game.belief`);
the supply reveals (:func:`revealed_privacy_values`): an interior quadratic seller's ν exactly,
ν_i = p/(2φρ_i); one at its capacity the upper bound ν_i ≤ p/(2φq_i); a linear seller that
sold ν_i ≤ p/φ, one that did not ν_i ≥ p/φ.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from fedgame.errors import ScenarioError
from fedgame.game.belief import EXACT, LOWER, NONE, UPPER
from fedgame.game.stackelberg import ServerCostParams, server_cost

#: relative slack under which a supply counts as held at its capacity
_AT_CAP = 1e-9


def unit_cost(nu: ArrayLike, rho: ArrayLike, *, phi: float, quadratic: bool) -> np.ndarray:
    """φ·ν_i·c(ρ_i): the privacy cost of selling ρ_i (c(ρ) = ρ, or ρ² when ``quadratic``)."""
    nu = np.asarray(nu, dtype=float)
    rho = np.asarray(rho, dtype=float)
    return phi * nu * (rho * rho if quadratic else rho)


def supply(
    price: float, nu: ArrayLike, caps: ArrayLike, *, phi: float, quadratic: bool
) -> np.ndarray:
    """s_i(p), each seller's profit-maximising ρ on [0, q_i] at price p (module doc).

    >>> supply(1.0, [0.5, 1.0, 2.0], [0.1, 0.2, 0.3], phi=1.0, quadratic=False).tolist()
    [0.1, 0.2, 0.0]
    >>> supply(1.0, [0.5, 1.0, 2.0], [0.1, 1.0, 1.0], phi=1.0, quadratic=True).tolist()
    [0.1, 0.5, 0.25]
    """
    nu = np.asarray(nu, dtype=float)
    caps = np.broadcast_to(np.asarray(caps, dtype=float), nu.shape)
    if price <= 0:
        return np.zeros(nu.size)
    if quadratic:
        return np.minimum(price / (2.0 * phi * nu), caps)
    return np.where(price >= phi * nu, caps, 0.0)


@dataclass(frozen=True)
class PriceChoice:
    """The leader's price and what it buys at it (arrays over the offered clients)."""

    price: float
    rho: np.ndarray
    cost: float  # Eq. 15 at (price·Σρ, ρ); inf when nothing is bought


def cost_at_price(
    price: float,
    nu: ArrayLike,
    caps: ArrayLike,
    sizes: ArrayLike,
    *,
    phi: float,
    quadratic: bool,
    t: int,
    params: ServerCostParams,
) -> PriceChoice:
    """Eq. 15 of the round when the leader posts ``price``: the accuracy term at the supplied
    budgets and the discounted payment price·Σρ_i (inf when nobody sells)."""
    rho = supply(price, nu, caps, phi=phi, quadratic=quadratic)
    if not np.any(rho > 0):
        return PriceChoice(price, rho, math.inf)
    found = server_cost(price * float(rho.sum()), rho=rho, data_sizes=sizes, t=t, params=params)
    return PriceChoice(price, rho, found.total)


def optimal_price(
    nu: ArrayLike,
    caps: ArrayLike,
    sizes: ArrayLike,
    *,
    phi: float,
    quadratic: bool,
    t: int,
    params: ServerCostParams,
) -> PriceChoice:
    """The price minimising Eq. 15 over the clients offered it (module doc).

    ``nu`` are the privacy values the leader plays against (the true ones, or its belief),
    ``caps`` the capacities q_i ≥ 0 (finite under linear cost: a linear seller sells all it
    has), ``sizes`` |D_i| > 0. Clients with q_i = 0 cannot sell. Returns price 0 and no
    purchase when nobody can sell.
    """
    nu = np.asarray(nu, dtype=float)
    caps = np.broadcast_to(np.asarray(caps, dtype=float), nu.shape).copy()
    sizes = np.asarray(sizes, dtype=float)
    if nu.shape != sizes.shape or nu.ndim != 1:
        raise ScenarioError("nu", nu.shape, "one privacy value per data size (1-D)")
    if np.any(~np.isfinite(nu) | (nu <= 0)):
        raise ScenarioError("nu", nu.tolist(), "finite privacy values > 0")
    can = caps > 0
    if not can.any():
        return PriceChoice(0.0, np.zeros(nu.size), math.inf)
    if quadratic:
        return _quadratic_price(nu, caps, sizes, can, phi=phi, t=t, params=params)
    if np.any(np.isinf(caps[can])):
        raise ScenarioError(
            "caps", caps.tolist(), "finite capacities under a linear cost (set a cap)"
        )
    order = np.flatnonzero(can)[np.argsort(nu[can], kind="stable")]
    ranked = nu[order]
    k = np.arange(1, order.size + 1)
    inverse = np.cumsum(1.0 / (sizes[order] ** 2 * caps[order]))
    bought = np.cumsum(caps[order])
    p = params
    accuracy = p.scale * (p.grad_bound**2 + 2 * p.dim * p.clip**2 / k**2 * inverse)
    payment = (1 - p.gamma) * p.discount ** (t - 1) * phi * ranked * bought
    total = accuracy + payment
    last_of_tie = np.append(ranked[1:] > ranked[:-1], True)  # ties sell together
    total[~last_of_tie] = np.inf
    best = int(np.argmin(total))
    price = float(phi * ranked[best])
    return cost_at_price(price, nu, caps, sizes, phi=phi, quadratic=False, t=t, params=params)


def quadratic_uncapped_price(
    nu: ArrayLike, sizes: ArrayLike, *, phi: float, t: int, params: ServerCostParams
) -> float:
    """p* = (a/(2b))^(1/3) of the module doc: the optimum when no capacity binds."""
    nu = np.asarray(nu, dtype=float)
    sizes = np.asarray(sizes, dtype=float)
    p = params
    n = nu.size
    a = p.scale * 4 * p.dim * p.clip**2 * phi / n**2 * float(np.sum(nu / sizes**2))
    b = (1 - p.gamma) * p.discount ** (t - 1) * float(np.sum(1.0 / (2 * phi * nu)))
    return float((a / (2 * b)) ** (1.0 / 3.0))


def _quadratic_price(
    nu: np.ndarray,
    caps: np.ndarray,
    sizes: np.ndarray,
    can: np.ndarray,
    *,
    phi: float,
    t: int,
    params: ServerCostParams,
) -> PriceChoice:
    from scipy.optimize import minimize_scalar

    nu_c, caps_c, sizes_c = nu[can], caps[can], sizes[can]
    free = quadratic_uncapped_price(nu_c, sizes_c, phi=phi, t=t, params=params)

    def cost(price: float) -> float:
        return cost_at_price(
            price, nu_c, caps_c, sizes_c, phi=phi, quadratic=True, t=t, params=params
        ).cost

    kinks = np.sort(2 * phi * nu_c * caps_c)
    kinks = kinks[np.isfinite(kinks)]
    candidates = [free]
    if kinks.size:  # past the last kink every seller is capped: the cost only grows with p
        edges = np.concatenate(([min(kinks[0], free) * 1e-6], kinks))
        for lo, hi in itertools.pairwise(edges):
            if hi > lo:
                found = minimize_scalar(cost, bounds=(lo, hi), method="bounded")
                candidates.extend([float(found.x), float(hi)])
        candidates = [c for c in candidates if c <= kinks[-1]] or [float(kinks[-1])]
    best = min(candidates, key=cost)
    return cost_at_price(best, nu, caps, sizes, phi=phi, quadratic=True, t=t, params=params)


def revealed_privacy_values(
    price: float, rho: ArrayLike, caps: ArrayLike, *, phi: float, quadratic: bool
) -> tuple[np.ndarray, np.ndarray]:
    """(ν̂, kind) that each seller's supply at ``price`` reveals (module doc); ``kind`` is
    EXACT, LOWER (ν ≥ ν̂), UPPER (ν ≤ ν̂) or NONE (a NaN ρ: it declined for another reason,
    or no price was posted).

    >>> nu, kind = revealed_privacy_values(1.0, [0.25, 0.5, 0.0], [1.0, 0.5, 1.0],
    ...                                    phi=1.0, quadratic=True)
    >>> nu.tolist(), kind.tolist()
    ([2.0, 1.0, nan], [1, 3, 0])
    """
    rho = np.asarray(rho, dtype=float)
    caps = np.broadcast_to(np.asarray(caps, dtype=float), rho.shape)
    kind = np.full(rho.size, NONE)
    nu = np.full(rho.size, np.nan)
    if not price > 0:
        return nu, kind
    sold = rho > 0
    at_cap = sold & (rho >= caps * (1 - _AT_CAP))
    if quadratic:
        with np.errstate(divide="ignore"):
            exact = price / (2 * phi * rho)
        nu = np.where(sold, exact, np.nan)
        kind[sold] = EXACT
        kind[at_cap] = UPPER
    else:
        out = rho == 0
        nu = np.where(sold | out, price / phi, np.nan)
        kind[sold] = UPPER
        kind[out] = LOWER
    return nu, kind
