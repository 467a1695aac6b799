"""The followers' contest on the clients that can actually play, in columns.

The QI-DPFL stage game (paper 003 Eqs. 16-17): each player i picks ρ_i ≥ 0, is paid the share
ρ_i/Σρ of the reward R and pays the privacy cost φ·ν_i·ρ_i. This module solves it for the
players of a round (the reachable, willing clients with budget, not excluded), as one vector
operation per player set, with three extensions of ours:

* **Expected delivery** (the game has complete information about straggling): player i's
  update arrives with probability p_i, independently; a straggler is neither paid nor charged
  (fedgame's settlement). Its expected utility p_i·(R·E[ρ_i/(ρ_i + S_-i)] − φν_iρ_i), with S_-i
  the *delivered* others' total, is replaced by its certainty equivalent
  p_i·(R·ρ_i/(ρ_i + s_i) − φν_iρ_i), s_i = Σ_{j≠i} p_jρ_j (the expected delivered rivals; exact
  when p ≡ 1, and the error vanishes as the number of players grows; ρ/(ρ+S) is convex in S,
  so the exact expected share is a little larger). p_i factors out of i's problem, so its best
  response is Theorem 1's to s_i (note 003 §4.1). :func:`exact_expected_share` gives the exact
  expectation on small instances, to measure the difference.
* **Budget caps**: ρ_i ≤ cap_i (what is left of the client's budget). Utilities are concave in
  ρ_i, so a capped best response is the uncapped one clipped to [0, cap_i].
* **A cartel** (``cartel`` mask): its members maximise their joint utility
  R·X/(X + S_out) − φ·Σ_{i∈K} ν_iρ_i, X = Σ_{i∈K} ρ_i, against the leader's R and the other
  followers' budgets (transferable utility inside the cartel). For a total X the cheapest
  way is to fill members in increasing ν up to their caps, so the cartel is one player with
  the convex, piecewise linear cost φ·c_K(X); its equilibrium with the outsiders is solved
  like theirs. Uncapped, the cheapest member supplies all of X.

Equilibria come from the aggregate fixed point of the share functions (Cornes & Hartley 2005):
for an expected delivered total T, every player's consistent budget ρ_i(T) solves
ρ_i = BR_i(T − p_iρ_i), and the equilibrium is the T with Σ_i p_iρ_i(T) = T, found by Brent's
method on log T. With p ≡ 1, no binding cap and no cartel this is Theorem 1 on the active set,
which is used directly (O(N log N)).
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike

from fedgame.errors import ScenarioError
from fedgame.game.stackelberg import active_coefficients

#: log-T width of the bracket searched below the largest possible aggregate
_BRACKET = 80.0


def _vector(key: str, value: ArrayLike | None, n: int, default: float) -> np.ndarray:
    """``value`` as a length-``n`` float array (read only: a float array of that shape is
    returned as it is, without a copy), ``default`` everywhere when None; NaN is refused."""
    if value is None:
        return np.full(n, default)
    if isinstance(value, np.ndarray) and value.dtype == np.float64 and value.shape == (n,):
        arr = value
    else:
        arr = np.broadcast_to(np.asarray(value, dtype=float), (n,)).astype(float)
    if np.any(np.isnan(arr)):
        raise ScenarioError(key, arr.tolist(), "numbers, not NaN")
    return arr


def _check_nu(nu: ArrayLike) -> np.ndarray:
    arr = np.asarray(nu, dtype=float)
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ScenarioError("nu", arr.tolist(), "a 1-D array of finite numbers > 0")
    return arr


def delivery_probabilities(p: ArrayLike | None, n: int) -> np.ndarray:
    """Delivery probabilities p_i in (0, 1] as a length-n array (None: all 1)."""
    arr = _vector("p", p, n, 1.0)
    if np.any((arr <= 0) | (arr > 1)):
        raise ScenarioError("p", arr.tolist(), "delivery probabilities in (0, 1]")
    return arr


def consistent_budgets(
    total: float, nu: np.ndarray, *, reward: float, phi: float, p: np.ndarray, caps: np.ndarray
) -> np.ndarray:
    """ρ_i(T): each player's budget consistent with an expected delivered total T.

    With k_i = sqrt(R/(φν_i)) and u = sqrt(s_i), s_i = T − p_iρ_i, the best response
    ρ_i = k_i·u − u² gives (1 − p_i)u² + p_ik_i·u − T = 0, whose positive root is
    u = 2T/(p_ik_i + sqrt(p_i²k_i² + 4(1 − p_i)T)) (stable for p_i → 1, where u = T/k_i), and
    ρ_i = (T − u²)/p_i. T ↦ ρ_i − BR_i(T − p_iρ_i) is decreasing, so clipping this root to
    [0, cap_i] gives the consistent budget under the cap (ours).
    """
    k = np.sqrt(reward / (phi * nu))
    pk = p * k
    u = 2.0 * total / (pk + np.sqrt(pk * pk + 4.0 * (1.0 - p) * total))
    return np.clip((total - u * u) / p, 0.0, caps)


def cartel_budgets(
    total: float, nu: np.ndarray, *, reward: float, phi: float, caps: np.ndarray
) -> np.ndarray:
    """The cartel members' budgets consistent with aggregate S = ``total`` (full delivery).

    The cartel's first-order condition R·(S − X)/S² = φ·c_K'(X) with c_K' the ν of the member
    being filled (members sorted by ν, filled up to their caps): member j of the sorted order
    gets clip(r_j − B_{j−1}, 0, cap_j), where r_j = S − φν_jS²/R is the interior solution on
    its segment and B_{j−1} the caps of the cheaper members (r_j decreases and B_j increases,
    so exactly the segments below the solution are filled). Among equal ν the member with the
    lower client id is filled first (uncapped: it supplies all of X).
    """
    order = np.argsort(nu, kind="stable")
    caps_s = caps[order]
    r = total - phi * nu[order] * total * total / reward
    before = np.concatenate(([0.0], np.cumsum(caps_s)[:-1]))
    out = np.zeros(nu.size)
    out[order] = np.clip(r - before, 0.0, caps_s)
    return out


def contest_equilibrium(
    nu: ArrayLike,
    *,
    reward: float,
    phi: float = 1.0,
    p: ArrayLike | None = None,
    caps: ArrayLike | None = None,
    cartel: ArrayLike | None = None,
    xtol: float = 1e-14,
) -> np.ndarray:
    """Every player's equilibrium budget ρ_i* (0 outside the active set); see the module doc.

    Player i chooses ρ_i ≥ 0 (zCDP budget, at most ``caps[i]``) to maximise
    p_i·(R·ρ_i/(ρ_i + s_i) − φ·ν_i·ρ_i), s_i = Σ_{j≠i} p_jρ_j: its share of the reward R
    (reward units) less its privacy cost. Uncapped, with every update delivered and no
    cartel, this is Theorem 1 on the active set: ρ_i* = C_i·R with
    C_i = (k−1)·(Σ_j ν_j − (k−1)·ν_i)/(φ·(Σ_j ν_j)²) over the k active players (paper 003
    Eq. 20); otherwise the aggregate fixed point of the module doc. E.g. two players with
    ν = (1, 1), R = 1, φ = 1 play ρ* = (0.25, 0.25).

    Args:
        nu: privacy values ν_i > 0 of the players.
        reward: R_t ≥ 0 (0 gives all zeros).
        phi: privacy-cost weight φ_1 > 0.
        p: delivery probabilities in (0, 1] (None: every update arrives).
        caps: budget caps ρ_i ≤ cap_i (None or inf: none).
        cartel: boolean mask of the cartel's members (full delivery only).
    """
    nu = _check_nu(nu)
    n = nu.size
    if not np.isfinite(reward) or reward < 0:
        raise ScenarioError("reward", reward, "a finite number >= 0")
    if not np.isfinite(phi) or phi <= 0:
        raise ScenarioError("phi", phi, "a finite number > 0")
    p_arr = delivery_probabilities(p, n)
    cap = _vector("caps", caps, n, np.inf)
    if np.any(cap < 0):
        raise ScenarioError("caps", cap.tolist(), "budget caps >= 0")
    members = None if cartel is None else np.asarray(cartel, dtype=bool).reshape(n)
    if members is not None and members.any() and np.any(p_arr[members] < 1.0):
        raise ScenarioError("p", p_arr.tolist(), "a cartel is modelled with full delivery only")
    if reward == 0 or n < 2:
        return np.zeros(n)
    return solve_contest(nu, reward=reward, phi=phi, p=p_arr, caps=cap, cartel=members, xtol=xtol)


def solve_contest(
    nu: np.ndarray,
    *,
    reward: float,
    phi: float,
    p: np.ndarray | None,
    caps: np.ndarray | None,
    cartel: np.ndarray | None,
    xtol: float = 1e-14,
) -> np.ndarray:
    """:func:`contest_equilibrium` of checked inputs: ν a float array of at least 2 finite
    values > 0, R > 0 and φ > 0 finite, ``p`` in (0, 1] (None: every update arrives),
    ``caps`` >= 0 (None: none), ``cartel`` a bool mask (None: no cartel; full delivery for
    its members). The same budgets, bit for bit, as with arrays of ones and infinities.

    Returns each player's equilibrium zCDP budget ρ_i* (0 outside the active set) of the
    contest in which i is paid ρ_i/Σρ·R and pays φ·ν_i·ρ_i (reward units). It checks
    nothing, so it is quicker; a caller whose inputs may be out of range (a non-finite
    reward, ν ≤ 0) calls :func:`contest_equilibrium`, which says what is wrong."""
    if (p is None or bool(np.all(p == 1.0))) and (cartel is None or not cartel.any()):
        rho = active_coefficients(nu, phi=phi) * reward
        if caps is None or np.all(rho <= caps):
            return rho
    n = nu.size
    p_arr = np.ones(n) if p is None else p
    cap = np.full(n, np.inf) if caps is None else caps
    return _aggregate_solution(nu, reward, phi, p_arr, cap, cartel, xtol)


def _aggregate_solution(
    nu: np.ndarray,
    reward: float,
    phi: float,
    p: np.ndarray,
    caps: np.ndarray,
    cartel: np.ndarray | None,
    xtol: float,
) -> np.ndarray:
    from scipy.optimize import brentq

    outsiders = np.ones(nu.size, dtype=bool) if cartel is None else ~cartel
    inside = ~outsiders
    upper = np.minimum(caps, reward / (phi * nu))  # a larger ρ costs more than R

    def budgets(total: float) -> np.ndarray:
        rho = np.zeros(nu.size)
        rho[outsiders] = consistent_budgets(
            total, nu[outsiders], reward=reward, phi=phi, p=p[outsiders], caps=caps[outsiders]
        )
        if inside.any():
            rho[inside] = cartel_budgets(
                total, nu[inside], reward=reward, phi=phi, caps=caps[inside]
            )
        return rho

    def excess(log_total: float) -> float:
        total = float(np.exp(log_total))
        return float((p * budgets(total)).sum() / total - 1.0)

    top = float((p * upper).sum())
    if not top > 0:
        return np.zeros(nu.size)
    hi = float(np.log(2.0 * top))
    lo = hi - _BRACKET
    if not excess(lo) > 0.0:
        return np.zeros(nu.size)  # fewer than two contributors: no contest
    root = brentq(excess, lo, hi, xtol=xtol, rtol=4 * np.finfo(float).eps, maxiter=500)
    return budgets(float(np.exp(root)))


def rivals(rho: np.ndarray, p: np.ndarray) -> np.ndarray:
    """s_i = Σ_{j≠i} p_jρ_j, the expected delivered budget of each player's rivals."""
    weighted = p * rho
    return weighted.sum() - weighted


def best_responses(
    rho: ArrayLike,
    nu: ArrayLike,
    *,
    reward: float,
    phi: float = 1.0,
    p: ArrayLike | None = None,
    caps: ArrayLike | None = None,
    quadratic: bool = False,
) -> np.ndarray:
    """Each player's best response to the others' budgets in ``rho`` (certainty equivalent).

    Linear cost: clip(sqrt(R·s_i/(φν_i)) − s_i, 0, cap_i) (note 003 §4.1, [OURS]); quadratic
    cost φν_iρ² (ours): the root of R·s_i/(x + s_i)² = 2φν_i·x, by vectorised bisection, then
    clipped. Where s_i = 0 no maximiser exists (ρ → 0+ wins R): 0 is returned.
    """
    rho = np.asarray(rho, dtype=float)
    nu = np.asarray(nu, dtype=float)
    n = rho.size
    s = rivals(rho, delivery_probabilities(p, n))
    return responses_to(s, nu, reward=reward, phi=phi, caps=caps, quadratic=quadratic)


def responses_to(
    s: np.ndarray,
    nu: np.ndarray,
    *,
    reward: float,
    phi: float,
    caps: ArrayLike | None,
    quadratic: bool,
) -> np.ndarray:
    """Each player's best response to its rivals' expected delivered total ``s``
    (:func:`best_responses` once ``s`` is known)."""
    n = s.size
    cap = _vector("caps", caps, n, np.inf)
    if not quadratic:
        return np.clip(np.sqrt(reward * s / (phi * nu)) - s, 0.0, cap)
    lo, hi = np.zeros(n), np.minimum(np.sqrt(reward / (phi * nu)), cap)
    for _ in range(60):  # the marginal utility is decreasing in x: bisection is safe
        mid = 0.5 * (lo + hi)
        up = reward * s / np.maximum(mid + s, 1e-300) ** 2 - 2.0 * phi * nu * mid > 0
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    out = 0.5 * (lo + hi)
    return np.where(s > 0, out, 0.0)


def expected_utilities(
    rho: ArrayLike,
    nu: ArrayLike,
    *,
    reward: float,
    phi: float = 1.0,
    p: ArrayLike | None = None,
    quadratic: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(utility, payment) of each player: p_i·(R·ρ_i/(ρ_i + s_i) − φν_i·c(ρ_i)) and p_i·R·share.

    Certainty-equivalent expected utilities (the module doc); with p ≡ 1 these are Eq. 16's.
    """
    rho = np.asarray(rho, dtype=float)
    nu = np.asarray(nu, dtype=float)
    p_arr = delivery_probabilities(p, rho.size)
    return utilities_at(
        rho, rivals(rho, p_arr), nu, reward=reward, phi=phi, p=p_arr, quadratic=quadratic
    )


def utilities_at(
    rho: np.ndarray,
    s: np.ndarray,
    nu: np.ndarray,
    *,
    reward: float,
    phi: float,
    p: np.ndarray,
    quadratic: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`expected_utilities` once the rivals' totals ``s`` and the delivery
    probabilities ``p`` (an array) are known."""
    p_arr = p
    total = rho + s
    share = np.divide(rho, total, out=np.zeros(rho.size), where=total > 0)
    payment = p_arr * reward * share
    cost = phi * nu * (rho * rho if quadratic else rho)
    return payment - p_arr * cost, payment


def exact_expected_share(rho: ArrayLike, p: ArrayLike) -> np.ndarray:
    """E[ρ_i/(ρ_i + S_-i)] with S_-i the delivered others' total, by enumeration (N ≤ 16).

    Each j ≠ i delivers independently with probability p_j; 0/0 counts as 0. Used to measure
    how far the certainty equivalent s_i = E[S_-i] is from the exact expected utility.
    """
    rho = np.asarray(rho, dtype=float)
    p = np.asarray(p, dtype=float)
    n = rho.size
    if n > 16:
        raise ScenarioError("rho", f"{n} players", "at most 16 players (2^(N-1) outcomes)")
    out = np.zeros(n)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        masks = np.array(list(itertools.product((0, 1), repeat=len(others))), dtype=float)
        masks = masks.reshape(-1, len(others))
        prob = np.prod(np.where(masks == 1, p[others], 1 - p[others]), axis=1)
        total = rho[i] + masks @ rho[others]
        share = np.divide(rho[i], total, out=np.zeros(total.size), where=total > 0)
        out[i] = float(prob @ share)
    return out
