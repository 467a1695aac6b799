"""Numeric Stackelberg solver for follower utilities with no closed form.

The followers play a simultaneous Nash game (QI-DPFL Eq. 19, Yuan & Wang 2024); the leader
minimises its cost over the reward given their equilibrium response (Eq. 18). Here the Nash
equilibrium is found by best-response iteration, each best response by a bounded 1-D
maximisation (Brent, with the interval's ends checked), and the leader's reward by a bounded
1-D search. :func:`nash_gap` measures how far a profile is from equilibrium. With linear costs
the results match Theorems 1-2 (see :mod:`fedgame.game.stackelberg`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

import numpy as np
from numpy.typing import ArrayLike

from fedgame.errors import ScenarioError
from fedgame.game.stackelberg import follower_best_response, reward_shares

_MIN_DAMPING = 1 / 1024

Utility = Callable[[np.ndarray], np.ndarray]
"""Maps a budget profile ρ (shape N) to every client's utility (shape N)."""


@runtime_checkable
class FollowerGame(Protocol):
    """A utility declaring its strategy bounds; :func:`solve_followers` reads them once."""

    def __call__(self, rho: np.ndarray) -> np.ndarray: ...

    def bounds(self) -> tuple[np.ndarray, np.ndarray]: ...


@runtime_checkable
class AggregateWarmStart(Protocol):
    """A utility solving its own aggregative equilibrium; :func:`solve_followers` starts there."""

    def aggregate_equilibrium(self) -> np.ndarray | None: ...


@runtime_checkable
class AnalyticBestResponse(Protocol):
    """A utility with a fast best response (None: no closed form); :func:`solve_followers`
    uses it in place of the numeric search when ``analytic=True``."""

    def analytic_best_response(self, i: int, rho: np.ndarray) -> float | None: ...


@dataclass(frozen=True)
class FollowerUtility:
    """Share-of-reward revenue minus a privacy cost, the followers' utility family.

    U_i(ρ) = ρ_i/Σ_j ρ_j · R - φ·ν_i·c(ρ_i) - constant_cost_i, with c(x) = x (``"linear"``,
    QI-DPFL Eqs. 16-17) or c(x) = x² (``"quadratic"``, ours). Strategies lie in
    [0, min(cap_i, ρ̄_i)], where ρ̄_i is the budget whose cost alone exceeds R (so larger budgets
    are dominated by ρ = 0); ``caps`` are optional per-client budget caps. Revenue is 0 when
    nobody contributes.
    """

    nu: np.ndarray
    reward: float
    phi: float = 1.0
    cost: Literal["linear", "quadratic"] = "linear"
    caps: np.ndarray | None = None
    constant_cost: np.ndarray | float = 0.0
    _upper: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        nu = np.asarray(self.nu, dtype=float)
        if nu.ndim != 1 or nu.size < 1 or not np.all(np.isfinite(nu)) or np.any(nu <= 0):
            raise ScenarioError("nu", self.nu, "a non-empty 1-D array of finite numbers > 0")
        if not np.isfinite(self.reward) or self.reward <= 0:
            raise ScenarioError("reward", self.reward, "a finite number > 0")
        if not np.isfinite(self.phi) or self.phi <= 0:
            raise ScenarioError("phi", self.phi, "a finite number > 0")
        if self.cost not in ("linear", "quadratic"):
            raise ScenarioError("cost", self.cost, "one of 'linear', 'quadratic'")
        ratio = self.reward / (self.phi * nu)
        upper = ratio if self.cost == "linear" else np.sqrt(ratio)
        if self.caps is not None:
            caps = np.broadcast_to(np.asarray(self.caps, dtype=float), nu.shape)
            if np.any(~(caps > 0)):
                raise ScenarioError("caps", self.caps, "budget caps > 0, one per client")
            upper = np.minimum(upper, caps)
            object.__setattr__(self, "caps", caps.copy())
        object.__setattr__(self, "nu", nu)
        object.__setattr__(self, "_upper", upper)

    def __call__(self, rho: np.ndarray) -> np.ndarray:
        """Every client's utility at profile ``rho``."""
        rho = np.asarray(rho, dtype=float)
        c = rho if self.cost == "linear" else rho**2
        revenue = reward_shares(rho, reward=self.reward)
        return revenue - self.phi * self.nu * c - np.asarray(self.constant_cost)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Each client's strategy interval (lower, upper)."""
        return np.zeros_like(self.nu), self._upper.copy()

    def analytic_best_response(self, i: int, rho: np.ndarray) -> float | None:
        """Fast best response of client i, or None when S_-i = 0 (no maximiser exists).

        Linear cost: the closed form max(0, sqrt(R·S_-i/(φν_i)) - S_-i) (note 003 §4.1).
        Quadratic cost: the root of R·S_-i/(ρ+S_-i)² = 2φν_i·ρ (decreasing in ρ) by Brent's
        method. The utility is concave in ρ_i, so clipping the optimum to the cap is exact.
        """
        from scipy.optimize import brentq

        others = float(np.sum(rho) - rho[i])
        if others <= 0:
            return None  # at S_-i = 0 no maximiser exists: the numeric path returns a tiny ρ
        if self.cost == "linear":
            br = follower_best_response(others, reward=self.reward, nu=self.nu[i], phi=self.phi)
            return float(min(br, self._upper[i]))
        slope = 2 * self.phi * self.nu[i]

        def marginal(x: float) -> float:
            d = x + others  # R·S/d² as (R·(S/d))/d: no underflow to 0 at a subnormal S_-i
            return self.reward * (others / d) / d - slope * x

        upper = float(self._upper[i])
        if marginal(upper) >= 0:
            return upper
        return float(brentq(marginal, 0.0, upper, xtol=1e-14 * max(upper, 1.0), rtol=1e-15))

    def shares_at(self, aggregate: float) -> np.ndarray:
        """Every client's budget consistent with aggregate S = Σρ (the share function).

        Client i's first-order condition with the aggregate held at S is
        R·(S - ρ_i)/S² = φ·ν_i·c'(ρ_i): linear cost gives ρ_i = S·(1 - φν_i·S/R), quadratic
        cost ρ_i = R·S/(R + 2φν_i·S²); utilities are concave in ρ_i, so clipping to [0, upper_i]
        handles corners and caps (Cornes & Hartley 2005, share functions of aggregative games).
        """
        s = float(aggregate)
        if self.cost == "linear":
            rho = s * (1.0 - self.phi * self.nu * s / self.reward)
        else:
            rho = self.reward * s / (self.reward + 2.0 * self.phi * self.nu * s * s)
        return np.clip(rho, 0.0, self._upper)

    def aggregate_equilibrium(self, *, xtol: float = 1e-14) -> np.ndarray | None:
        """Nash equilibrium from the fixed point Σ_i ρ_i(S) = S of the share functions.

        Σ_i ρ_i(S)/S is decreasing in S, above 1 near S = 0 when two or more clients can
        contribute and below 1 at S = 2·Σ upper_i, so the root is unique and Brent's method on
        log S finds it robustly whatever the spread of ν (where best-response iteration can
        crawl). Returns None when no positive aggregate exists (fewer than two contributors).
        """
        from scipy.optimize import brentq

        def excess(log_s: float) -> float:
            s = float(np.exp(log_s))
            return float(self.shares_at(s).sum() / s - 1.0)

        hi = float(np.log(2.0 * self._upper.sum()))
        lo = hi - 80.0
        if not excess(lo) > 0.0:
            return None
        root = brentq(excess, lo, hi, xtol=xtol, rtol=4 * np.finfo(float).eps, maxiter=500)
        return self.shares_at(float(np.exp(root)))

    def deviation_gaps(self, rho: ArrayLike) -> np.ndarray:
        """Nash gap of every client in O(N) via the fast best response (cf. :func:`nash_gap`).

        Where S_-i = 0 the supremum of the deviation utility is R (ρ_i → 0+ wins everything).
        """
        rho = np.asarray(rho, dtype=float)
        current = self(rho)
        gaps = np.zeros(rho.size)
        for i in range(rho.size):
            br = self.analytic_best_response(i, rho)
            if br is None:
                best = self.reward
            else:
                trial = rho.copy()
                trial[i] = br
                best = max(
                    float(self(trial)[i]),
                    float(self(np.where(np.arange(rho.size) == i, 0.0, rho))[i]),
                )
            gaps[i] = max(0.0, best - float(current[i]))
        return gaps


@dataclass(frozen=True)
class FollowerEquilibrium:
    """Outcome of best-response iteration: ``residual`` is max |BR_i - ρ_i| of the last sweep."""

    rho: np.ndarray
    iterations: int
    residual: float
    converged: bool


@dataclass(frozen=True)
class LeaderSolution:
    """Leader's optimal reward, its cost, and whether it sits on a search bound."""

    reward: float
    cost: float
    at_bound: bool


def _deviation(utility: Utility, rho: np.ndarray, i: int) -> Callable[[float], float]:
    def value(x: float) -> float:
        trial = rho.copy()
        trial[i] = x
        return float(utility(trial)[i])

    return value


def _newton_polish(value: Callable[[float], float], x: float, lower: float, upper: float) -> float:
    """One Newton step on central differences: Brent stops at about sqrt(eps) relative.

    Near a smooth interior maximum the utility is flat to machine precision, so value
    comparisons cannot place x better than ~1e-8 relative; the derivative's zero can. The step is
    kept only where the curvature is negative and the step is shorter than the difference step.
    """
    h = 1e-5 * max(abs(x), 1e-3 * (upper - lower))
    if x - h < lower or x + h > upper:
        return x
    left, mid, right = value(x - h), value(x), value(x + h)
    curvature = (right - 2 * mid + left) / h**2
    if not curvature < 0:
        return x
    step = -(right - left) / (2 * h) / curvature
    return x + step if abs(step) < h else x


def numeric_best_response(
    utility: Utility, rho: np.ndarray, i: int, *, lower: float, upper: float, xatol: float = 1e-12
) -> float:
    """Client i's best response to the others' budgets in ``rho`` over [lower, upper].

    Bounded Brent maximisation (scipy ``minimize_scalar``), then one finite-difference Newton
    step to polish an interior maximiser; as Brent never evaluates the ends, both ends are
    compared too, which handles corner and capped best responses.
    """
    from scipy.optimize import minimize_scalar

    value = _deviation(utility, rho, i)
    if upper <= lower:
        return float(lower)
    res = minimize_scalar(
        lambda x: -value(x), bounds=(lower, upper), method="bounded", options={"xatol": xatol}
    )
    inner = _newton_polish(value, float(res.x), float(lower), float(upper))
    return max([inner, float(lower), float(upper)], key=value)


def solve_followers(
    utility: Utility,
    *,
    bounds: tuple[ArrayLike, ArrayLike] | None = None,
    rho0: ArrayLike | None = None,
    scheme: Literal["gauss_seidel", "jacobi"] = "gauss_seidel",
    tol: float = 1e-9,
    max_iter: int = 500,
    xatol: float = 1e-12,
    analytic: bool = False,
    damping: float | Literal["adaptive"] = "adaptive",
    warm_start: bool = True,
) -> FollowerEquilibrium:
    """Followers' Nash equilibrium by relaxed best-response iteration (Eq. 19; note 003 §8.15).

    Each client moves a fraction α of the way to its best response:
    ρ_i ← (1-α)·ρ_i + α·BR_i(ρ_-i). Gauss-Seidel updates clients one after another, each seeing
    the latest budgets; Jacobi updates all from the previous sweep. Plain best responses
    (α = 1) can cycle: with heterogeneous ν a client's best response to a large S_-i is 0, the
    next client then faces S_-i = 0 (no maximiser, a tiny budget) and play flips 0 ↔ large
    (e.g. ν = (1, 1/8), R = φ = 1); Jacobi in the linear Tullock contest diverges for N > 4.
    ``damping="adaptive"`` gives each client its own α, starting at 1: halved (down to 1/1024)
    when the sign of its step BR_i - ρ_i flips from one sweep to the next (a 2-cycle, the
    signature of overshooting), and grown by 1.2 (up to 1) otherwise, so clients heading
    steadily to a corner (e.g. ρ = 0 outside the active set) still get there fast. On 1,200
    random linear instances with ν spread over three orders of magnitude and N ≤ 12 this
    converged in all but 4 (≤ 500 sweeps; plain best responses failed about one in ten).
    A fixed number in (0, 1] keeps α constant (1 = undamped best responses).

    The residual is the fixed-point error max_i |BR_i - ρ_i| of a sweep (not the damped step,
    which would shrink with α); the iteration stops when it is at most ``tol·max ρ`` (relative,
    as budgets have no natural scale; an all-zero profile also stops). Best responses are
    accurate to about 1e-10 relative (see :func:`numeric_best_response`), so much smaller
    tolerances may never converge.

    Args:
        utility: profile → utilities, e.g. a :class:`FollowerUtility`.
        bounds: (lower, upper) strategy bounds, broadcast to N; default ``utility.bounds()``
            (a :class:`FollowerGame`; other utilities must pass them).
        rho0: start profile; default a quarter of each upper bound over N.
        scheme: ``"gauss_seidel"`` or ``"jacobi"``.
        tol: convergence threshold on the sweep's residual, relative to max ρ.
        max_iter: maximum number of sweeps.
        xatol: absolute tolerance of each 1-D maximisation.
        analytic: use ``utility.analytic_best_response`` when it gives one (fast path; a
            utility declaring :class:`AnalyticBestResponse`).
        damping: ``"adaptive"`` or a fixed relaxation α in (0, 1].
        warm_start: when ``rho0`` is not given and the utility declares
            :class:`AggregateWarmStart` (aggregative games such as :class:`FollowerUtility`),
            start from that share-function solution; the best-response sweeps then verify it
            is a fixed point (one or two sweeps) instead of crawling to it.
    """
    if bounds is None:
        if not isinstance(utility, FollowerGame):
            raise TypeError("solve_followers: pass bounds= for a utility without bounds()")
        bounds = utility.bounds()
    lower, upper = (np.asarray(b, dtype=float) for b in bounds)
    if scheme not in ("gauss_seidel", "jacobi"):
        raise ScenarioError("scheme", scheme, "one of 'gauss_seidel', 'jacobi'")
    if max_iter < 1:
        raise ScenarioError("max_iter", max_iter, "an integer >= 1")
    adaptive = damping == "adaptive"
    if not adaptive and not (isinstance(damping, int | float) and 0 < damping <= 1):
        raise ScenarioError("damping", damping, "'adaptive' or a number in (0, 1]")
    alpha = np.full(np.size(upper), 1.0 if adaptive else float(damping))
    guess = None
    if warm_start and rho0 is None and isinstance(utility, AggregateWarmStart):
        guess = utility.aggregate_equilibrium()
    if rho0 is None and guess is not None:
        rho = np.array(guess, dtype=float)
    elif rho0 is None:
        rho = np.asarray(upper, dtype=float) / (4 * np.size(upper))
    else:
        rho = np.array(rho0, dtype=float)
    lower, upper = np.broadcast_to(lower, rho.shape), np.broadcast_to(upper, rho.shape)
    rho = np.clip(rho, lower, upper)
    fast = None
    if analytic and isinstance(utility, AnalyticBestResponse):
        fast = utility.analytic_best_response
    residual = np.inf
    direction = np.zeros(rho.size)
    for sweep in range(1, max_iter + 1):
        before = rho.copy()
        source = rho if scheme == "gauss_seidel" else before
        step = np.zeros(rho.size)
        for i in range(rho.size):
            br = fast(i, source) if fast is not None else None
            if br is None:
                br = numeric_best_response(
                    utility, source, i, lower=lower[i], upper=upper[i], xatol=xatol
                )
            step[i] = br - (before[i] if scheme == "jacobi" else rho[i])
            rho[i] = rho[i] + alpha[i] * step[i]
        residual = float(np.max(np.abs(step)))
        if residual <= tol * float(np.max(np.abs(rho))):
            return FollowerEquilibrium(rho, sweep, residual, True)
        if adaptive:
            flips = np.sign(step) * direction < 0
            alpha = np.where(flips, np.maximum(alpha / 2, _MIN_DAMPING), np.minimum(alpha * 1.2, 1))
            direction = np.sign(step)
    return FollowerEquilibrium(rho, max_iter, residual, False)


def solve_leader(
    cost: Callable[[float], float], *, bounds: tuple[float, float], xatol: float = 1e-10
) -> LeaderSolution:
    """Leader's reward minimising ``cost`` on [R_min, R_max] (Stage I, Eq. 18).

    ``cost(R)`` should already embed the followers' equilibrium response to R. The bounded
    Brent search runs over log R (so ``xatol`` is a relative tolerance on R and wide ranges are
    cheap); both ends are compared too. For QI-DPFL the cost is convex in R (Eq. 29).
    """
    from scipy.optimize import minimize_scalar

    r_min, r_max = (float(b) for b in bounds)
    if not (0 < r_min <= r_max and np.isfinite(r_max)):
        raise ScenarioError("bounds", bounds, "0 < R_min <= R_max < inf")
    if r_min == r_max:
        return LeaderSolution(r_min, float(cost(r_min)), True)
    res = minimize_scalar(
        lambda u: cost(float(np.exp(u))),
        bounds=(np.log(r_min), np.log(r_max)),
        method="bounded",
        options={"xatol": xatol},
    )
    best = min((float(np.exp(res.x)), r_min, r_max), key=cost)
    return LeaderSolution(best, float(cost(best)), best in (r_min, r_max))


def nash_gap(
    rho: ArrayLike, utility: Utility, *, bounds: tuple[ArrayLike, ArrayLike], grid: int = 65
) -> np.ndarray:
    """Per client, the largest utility gain from deviating alone within its bounds (≥ 0).

    The deviation is found by bounded Brent maximisation over the whole interval and again
    around the best point of a ``grid``-point coarse grid (a guard against local optima); all
    zeros at a Nash equilibrium (Def. 2, Eq. 31).
    """
    rho = np.asarray(rho, dtype=float)
    lower, upper = (np.broadcast_to(np.asarray(b, dtype=float), rho.shape) for b in bounds)
    current = utility(rho)
    gaps = np.zeros(rho.size)
    for i in range(rho.size):
        value = _deviation(utility, rho, i)
        best = value(numeric_best_response(utility, rho, i, lower=lower[i], upper=upper[i]))
        xs = np.linspace(lower[i], upper[i], max(grid, 3))
        k = int(np.argmax([value(x) for x in xs]))
        lo, hi = xs[max(k - 1, 0)], xs[min(k + 1, xs.size - 1)]
        local = numeric_best_response(utility, rho, i, lower=lo, upper=hi)
        best = max(best, value(xs[k]), value(local))
        gaps[i] = max(0.0, best - float(current[i]))
    return gaps
