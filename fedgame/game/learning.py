"""Learning rules of boundedly rational followers, vectorised over the clients of a behaviour.

A learning client does not know the others' privacy values (note 003 §8 item 15). After each
round the leader broadcasts the delivered total Σρ; a client that delivered infers its rivals'
total S_-i = Σρ − ρ_i, one that did not (declined or straggled) takes S_-i = Σρ. Budgets are
learned relative to the reward, x = ρ/R: Theorem 1's budgets are proportional to R, so the
target x* stays put while R_t grows (note 003 §4.2).

**What they converge to under stragglers.** Each client's update arrives independently
with probability p_i. The delivered rivals' total a client learns from is then a random
draw of S_-i, so the rules follow the *exact expected-delivery* utility
p_i·(R·E[ρ_i/(ρ_i + S_-i)] − φν_iρ_i), and their target is that game's Nash equilibrium,
:func:`expected_delivery_equilibrium` (ours). It is not the certainty equivalent
(:func:`fedgame.game.contest.contest_equilibrium` with p, which replaces S_-i by its mean and
is what the model's ``eq_distance`` measures against): with ten clients and p = 0.8 the two
are 5% apart (Σ|ρ − ρ*|/Σρ*), the exact budgets larger; with p ≡ 1 they coincide.
Measured with R fixed, ten clients, p = 0.8 (``tests/mechanisms/policy/
test_learning_stragglers.py``): the default log-gradient rule is 0.20, 0.16, 0.12, 0.06 from
the target at rounds 50, 100, 200, 800 (η = 2: 0.10, 0.06, 0.07, 0.01); adaptive Hedge 0.04,
0.04, 0.03, 0.01. Two rules (both ours):

* **log-gradient**: x ← x·exp(η_t·clip(m, −1, 1)) with m = R·S_-i/(S²·φν_i) − 1 the relative
  marginal utility of the realised round (Eq. 21: m = 0 at the first-order condition), and a
  step η_t = η·t^(−κ). With κ = 0 this is the constant-step rule, which keeps a random walk
  of size η under stragglers; κ ∈ (1/2, 1] makes it a Robbins-Monro stochastic
  approximation: E[m] is the exact expected marginal utility (over p_i, up to the clip,
  which binds only when every rival straggles), so the iterates settle at its zero, the
  target above. Slowly: a client's own share enters m with weight about 2/N, so the
  differences between clients decay at rate about (2/N)·Σ_τ η_τ ∝ t^(1−κ).
* **Hedge** (exponential weights) over a grid of budgets x_k = g_k/(φν_i), g on a log scale in
  (0, 1] (a budget with φν_i·x ≥ 1 costs more than the whole reward). Full information: after
  a round every grid point's utility per unit reward, u_k = x_k/(x_k + S_-i/R) − g_k ∈ [−1, 1],
  is computed from the broadcast; weights are w_k ∝ exp(η_t·Σ_τ u_k,τ). The rate is either
  AdaHedge's η_t = ln K/Δ_(t−1), Δ the cumulative mixability gap (``adaptive``, default; de
  Rooij, van Erven, Grünwald & Koolen, JMLR 15, 2014: regret ≤ 2Δ_T = O(sqrt(T ln K)), and
  far smaller when the grid points' payoffs differ little, as they do near the equilibrium),
  or η·sqrt(ln K/t) (``anytime``: tuned for payoff differences of order 1, about 100 times
  the contest's, so its weights stay spread and its play biased for hundreds of rounds).
  The client plays the mean budget of its weights; its utility is concave in ρ, so the mean
  does at least as well as the mixture and the regret bound carries over. The Tullock
  contest is socially concave (the sum of utilities is linear in the budgets on Σρ > 0 and
  each utility is convex in the others' budgets), so the running average of no-regret play
  converges to a Nash equilibrium (Even-Dar, Mansour & Nadav, STOC 2009, Thm 3.5), up to the
  grid's resolution (256 points over six decades: 5.5% apart); under stragglers the
  utilities are those of the realised delivered totals, so it is the target above.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike

from fedgame.errors import FedGameError, ScenarioError
from fedgame.game.contest import contest_equilibrium

#: exponents below this count as -inf in the weights (e^-600 is negligible next to the
#: largest weight, 1, and avoids subnormal numbers)
_NEGLIGIBLE = -600.0
#: most players :func:`expected_delivery_equilibrium` enumerates (2^N delivery outcomes)
MAX_EXACT_PLAYERS = 12


def step_size(eta: float, t: ArrayLike, decay: float) -> np.ndarray:
    """η_t = η·t^(−κ) for the log-gradient rule (t ≥ 1 counts the client's updates)."""
    return eta * np.maximum(np.asarray(t, dtype=float), 1.0) ** (-decay)


def log_gradient_step(
    x: ArrayLike,
    *,
    reward: ArrayLike,
    rho: ArrayLike,
    others: ArrayLike,
    nu: ArrayLike,
    phi: float,
    eta: ArrayLike,
) -> np.ndarray:
    """One log-gradient step on x = ρ/R from last round's (R, ρ, S_-i), elementwise.

    A client whose rivals delivered nothing (S_-i = 0) raises x by e^η: any positive budget
    would have won the whole reward.
    """
    x = np.asarray(x, dtype=float)
    others = np.asarray(others, dtype=float)
    total = np.asarray(rho, dtype=float) + others
    safe = np.where(total > 0, total, 1.0)
    m = np.asarray(reward, dtype=float) * others / (safe**2 * phi * np.asarray(nu, dtype=float))
    step = np.where((others > 0) & (total > 0), np.clip(m - 1.0, -1.0, 1.0), 1.0)
    return x * np.exp(np.asarray(eta, dtype=float) * step)


def hedge_grid(size: int, *, low: float = 1e-6) -> np.ndarray:
    """The cost grid g_k = φν·x_k: ``size`` points log-spaced in [low, 1)."""
    return np.geomspace(low, 1.0, size + 1)[:-1]


def hedge_payoffs(grid: np.ndarray, rivals_per_reward: ArrayLike) -> np.ndarray:
    """u_k = x_k/(x_k + s) − g_k per unit reward, [clients, K], with x_k = g_k/(φν) and
    s = S_-i/R, written in g: x_k/(x_k + s) = g_k/(g_k + φν·s). ``rivals_per_reward`` is
    φν·S_-i/R per client; where it is 0 any budget wins everything (u_k = 1 − g_k)."""
    s = np.asarray(rivals_per_reward, dtype=float)[:, None]
    out = grid + s
    np.divide(grid, out, out=out)
    out -= grid
    return out


def hedge_weights(cumulative: np.ndarray, eta: ArrayLike) -> np.ndarray:
    """exp(η·U_k) normalised per row (numerically stable), U the cumulative payoffs; a row
    with η = inf is uniform over its leaders (the largest U_k: follow the leader)."""
    eta = np.broadcast_to(np.asarray(eta, dtype=float), (cumulative.shape[0],))
    top = cumulative.max(axis=1, keepdims=True)
    finite = np.isfinite(eta)
    rate = np.where(finite, eta, 0.0)[:, None]
    w = cumulative - top
    w *= rate
    w[w < _NEGLIGIBLE] = -np.inf  # exp would be subnormal (slow arithmetic): exactly 0
    np.exp(w, out=w)
    if not finite.all():  # follow the leader: 1 on the leaders, 0 elsewhere
        w[~finite] = cumulative[~finite] >= top[~finite]
    w /= w.sum(axis=1, keepdims=True)
    return w


def hedge_rate(eta: float, t: ArrayLike, size: int) -> np.ndarray:
    """Anytime Hedge rate η·sqrt(ln K / t)."""
    return eta * np.sqrt(np.log(size) / np.maximum(np.asarray(t, dtype=float), 1.0))


def adaptive_rate(gap: ArrayLike, size: int) -> np.ndarray:
    """AdaHedge's rate ln K / Δ, Δ the cumulative mixability gap (inf while Δ = 0)."""
    gap = np.asarray(gap, dtype=float)
    return np.divide(np.log(size), gap, out=np.full(gap.shape, np.inf), where=gap > 0)


def mixability_gap(weights: np.ndarray, payoffs: np.ndarray, eta: ArrayLike) -> np.ndarray:
    """δ = h − m ≥ 0 per row: the Hedge loss h = −Σ_k w_k·u_k minus the mix loss
    m = −(1/η)·ln Σ_k w_k·exp(η·u_k) of one round's payoffs u (de Rooij, van Erven, Grünwald
    & Koolen, JMLR 15, 2014, §2.1; with η = inf, m is the smallest loss −u_k on the leaders)."""
    eta = np.broadcast_to(np.asarray(eta, dtype=float), (weights.shape[0],))
    hedge_loss = -np.einsum("ij,ij->i", weights, payoffs)
    finite = np.isfinite(eta)
    rate = np.where(finite, eta, 1.0)
    with np.errstate(divide="ignore"):  # log-sum-exp of η·u + ln w (w = 0: -inf)
        z = np.log(weights)
    z += rate[:, None] * payoffs
    top = z.max(axis=1)
    z -= top[:, None]
    z[z < _NEGLIGIBLE] = -np.inf
    np.exp(z, out=z)
    mix_finite = -(top + np.log(z.sum(axis=1))) / rate
    mix = mix_finite
    if not finite.all():
        mix_leader = -np.where(weights > 0, payoffs, -np.inf).max(axis=1)
        mix = np.where(finite, mix_finite, mix_leader)
    return np.maximum(hedge_loss - mix, 0.0)


def _delivery_outcomes(p: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Every delivery outcome (rows of 0/1, one column per player) and its probability."""
    n = p.size
    outcomes = np.array(list(itertools.product((0.0, 1.0), repeat=n))).reshape(-1, n)
    prob = np.prod(np.where(outcomes == 1.0, p, 1.0 - p), axis=1)
    return outcomes, prob


def _root(rivals: np.ndarray, prob: np.ndarray, *, reward: float, cost: np.ndarray) -> np.ndarray:
    """Root in x of R·E[S/(x + S)²] = cost per column of ``rivals`` (S per outcome, rows), by
    bisection on [0, R/cost] (the left side decreases in x); 0 where it is not above the cost
    at x = 0."""
    lo, hi = np.zeros(cost.size), reward / cost
    positive = rivals > 0
    for _ in range(64):
        mid = 0.5 * (lo + hi)
        total = mid + rivals
        share = np.divide(rivals, total * total, out=np.zeros_like(rivals), where=positive)
        up = reward * (prob @ share) > cost
        lo, hi = np.where(up, mid, lo), np.where(up, hi, mid)
    return 0.5 * (lo + hi)


def expected_best_responses(
    rho: ArrayLike, nu: ArrayLike, *, reward: float, phi: float, p: ArrayLike
) -> np.ndarray:
    """Each player's best response in the exact expected-delivery contest.

    Player i maximises p_i·(R·E[ρ_i/(ρ_i + S_-i)] − φν_iρ_i), S_-i the total of the rivals
    that deliver (each j independently with probability p_j). Its marginal utility over p_i,
    R·E[S_-i/(x + S_-i)²] − φν_i, decreases in x (outcomes with S_-i = 0 add nothing: any
    x > 0 wins all), so the best response is its root (bisection), or 0 where the marginal
    utility at 0 is not positive. There, if every rival may straggle, no maximiser exists:
    any x > 0 wins R when they all do, so the utility's supremum p_i·R·P(S_-i = 0) is
    approached as x → 0+, and 0 stands for that limit (as in :mod:`fedgame.game.diagnostics`).
    Enumerates all 2^N outcomes.
    """
    rho = np.asarray(rho, dtype=float)
    nu = np.asarray(nu, dtype=float)
    outcomes, prob = _delivery_outcomes(np.asarray(p, dtype=float))
    rivals = (outcomes @ rho)[:, None] - outcomes * rho  # S_-i per outcome, [2^N, N]
    return _root(rivals, prob, reward=reward, cost=phi * nu)


def expected_delivery_equilibrium(
    nu: ArrayLike,
    *,
    reward: float,
    phi: float = 1.0,
    p: ArrayLike | None = None,
    tol: float = 1e-12,
    max_sweeps: int = 2000,
) -> np.ndarray:
    """The learning rules' target: the Nash equilibrium of the exact expected-delivery contest.

    Every player's budget is its best response (:func:`expected_best_responses`) to the
    others'. Both learning rules update from the realised delivered total, an unbiased sample
    of S_-i, so what they settle at is this equilibrium, not the certainty equivalent of
    :func:`fedgame.game.contest.contest_equilibrium` (which replaces S_-i by its mean; the two
    agree when p ≡ 1, and the exact budgets are a little larger since the share is convex in
    S_-i). Solved as ρ = BR(ρ) with Powell's hybrid method (``scipy.optimize.root``) from the
    certainty equivalent (simultaneous best responses oscillate); where that fails (the map
    is not smooth where a player leaves the active set), by damped Gauss-Seidel sweeps (one
    player at a time moves halfway to its best response to the latest budgets; undamped
    sweeps can cycle between a marginal player's entering and leaving).
    The largest |ρ − BR(ρ)| must end below 1000·``tol``·Σρ. At most
    :data:`MAX_EXACT_PLAYERS` players.
    """
    nu_arr = np.asarray(nu, dtype=float)
    n = nu_arr.size
    if n > MAX_EXACT_PLAYERS:
        raise ScenarioError("nu", f"{n} players", f"at most {MAX_EXACT_PLAYERS} players")
    p_arr = np.ones(n) if p is None else np.broadcast_to(np.asarray(p, float), (n,)).copy()
    rho = contest_equilibrium(nu_arr, reward=reward, phi=phi, p=p_arr)
    if n < 2 or reward == 0:
        return rho
    from scipy.optimize import root

    def excess(budgets: np.ndarray) -> np.ndarray:
        clipped = np.maximum(budgets, 0.0)
        return clipped - expected_best_responses(clipped, nu_arr, reward=reward, phi=phi, p=p_arr)

    solution = root(excess, rho, method="hybr", options={"xtol": tol})
    if solution.success:
        rho = np.maximum(solution.x, 0.0)
    residual = float(np.abs(excess(rho)).max())
    outcomes, prob = _delivery_outcomes(p_arr)
    for _ in range(max_sweeps):  # nonsmooth where a player leaves: one at a time, safely
        if residual <= 1e3 * tol * max(float(rho.sum()), 1e-300):
            return rho
        for i in range(n):
            rivals = outcomes @ rho - outcomes[:, i] * rho[i]
            answer = _root(rivals[:, None], prob, reward=reward, cost=phi * nu_arr[i : i + 1])[0]
            rho[i] += 0.5 * (answer - rho[i])  # damped: undamped sweeps can 2-cycle
        residual = float(np.abs(excess(rho)).max())
    raise FedGameError(
        f"expected_delivery_equilibrium: no fixed point after {max_sweeps} sweeps (largest "
        f"best-response gap {residual:.3g})"
    )
