"""QI-DPFL two-stage Stackelberg game in closed form (Yuan & Wang 2024, arXiv 2404.08261).

The server (leader) announces a total reward R_t. Each of the N selected clients (followers)
then picks a zCDP budget ρ_i, is paid the share (ρ_i / Σ_j ρ_j)·R_t (a Tullock contest) and pays
a linear privacy cost φ·ν_i·ρ_i (Eqs. 16-17; ``phi`` is the paper's φ_1). Theorem 1 gives the
followers' Nash equilibrium ρ_i* = C_i·R_t and Theorem 2 the server's optimal reward. ``clip``
is the clipping threshold C of Corollary 1, not the per-client constants C_i. Privacy values ν
are public and constant over rounds (note 003 §1.2).

Error resolved (note 003 §4.1 and §8 item 1): Theorem 1 silently needs (N-1)·ν_i < Σ_j ν_j for
every i, or it returns negative budgets. The true equilibrium is then the Tullock active set:
the cheapest clients for which the condition holds play Theorem 1 with N replaced by their
number k; the others play ρ = 0 and are dropped from aggregation, payment and the server's cost.
With fewer than two clients there is no contest: a lone client's utility R - φνρ has no
maximiser on ρ > 0, so the active set is empty and every budget is 0 (note 003 §4.1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from fedgame.errors import ScenarioError
from fedgame.game.memo import ArrayMemo, array_key

#: the last active sets and Theorem 1 constants (the leader, the followers and the round
#: check ask for the same ν every round; :mod:`fedgame.game.memo`)
_FEASIBLE = ArrayMemo()
_ACTIVE = ArrayMemo()
_ACCURACY = ArrayMemo()


def _positive_vector(key: str, value: ArrayLike) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim != 1 or not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ScenarioError(key, value, "a 1-D array of finite positive numbers")
    return arr


def _positive(key: str, value: float) -> float:
    if not np.isfinite(value) or value <= 0:
        raise ScenarioError(key, value, "a finite number > 0")
    return float(value)


def follower_coefficients(nu: ArrayLike, *, phi: float) -> np.ndarray:
    """Theorem 1 constants C_i, with ρ_i* = C_i·R_t (paper Eq. 20, note 003 §4.1).

    C_i = (N-1)·[Σ_j ν_j - (N-1)·ν_i] / (φ·(Σ_j ν_j)²). Raw formula over all clients: a
    C_i ≤ 0 flags a client outside the active set (see :func:`feasible_set`). N = 1 gives 0.
    """
    nu = _positive_vector("nu", nu)
    phi = _positive("phi", phi)
    n, total = nu.size, nu.sum()
    if n == 0:
        return nu.copy()
    return (n - 1) * (total - (n - 1) * nu) / (phi * total**2)


def feasible_set(nu: ArrayLike) -> np.ndarray:
    """Active set of the Tullock equilibrium: mask of clients with ρ_i* > 0 (note 003 §4.1).

    The largest prefix {1..k} of the ν-sorted clients with (k-1)·ν_(k) < Σ_{j≤k} ν_(j).
    Feasible prefixes are downward closed (if prefix k+1 is feasible so is prefix k), so k is
    the number of prefixes that pass the test; a prefix ending inside a run of equal ν fails
    exactly when the run's first prefix does, so ties at the top leave together. Two clients
    are always feasible; N ≤ 1 gives an all-False mask (no contest). O(N log N).
    """
    arr = np.asarray(nu, dtype=float)
    return _FEASIBLE.get(array_key(arr), lambda: _feasible_set(nu))


def _feasible_set(nu: ArrayLike) -> np.ndarray:
    nu = _positive_vector("nu", nu)
    if nu.size < 2:
        return np.zeros(nu.size, dtype=bool)
    ordered = np.sort(nu)
    k = np.arange(1, nu.size + 1)
    passes = (k - 1) * ordered < np.cumsum(ordered)
    size = int(np.count_nonzero(passes))
    return nu <= ordered[size - 1]


def active_coefficients(nu: ArrayLike, *, phi: float) -> np.ndarray:
    """Theorem 1 constants on the active set, 0 outside it (Eq. 20 with N → k, note §4.1)."""
    arr = np.asarray(nu, dtype=float)
    return _ACTIVE.get(array_key(arr, phi), lambda: _active_coefficients(nu, phi))


def _active_coefficients(nu: ArrayLike, phi: float) -> np.ndarray:
    nu = _positive_vector("nu", nu)
    active = feasible_set(nu)
    coeff = np.zeros(nu.size)
    if active.any():
        coeff[active] = follower_coefficients(nu[active], phi=phi)
    return coeff


def follower_equilibrium(
    nu: ArrayLike, *, reward: float, phi: float, strict: bool = False
) -> np.ndarray:
    """Followers' Nash equilibrium budgets ρ_i* = C_i·R_t (Theorem 1, Eq. 20).

    Args:
        nu: privacy values ν_i > 0.
        reward: total reward R_t ≥ 0.
        phi: privacy-cost weight φ_1 > 0.
        strict: raise when the paper's interior condition fails instead of falling back to the
            active set (note 003 §4.1).
    """
    nu = _positive_vector("nu", nu)
    if not np.isfinite(reward) or reward < 0:
        raise ScenarioError("reward", reward, "a finite number >= 0")
    if strict and not feasible_set(nu).all():
        raise ScenarioError(
            "nu", nu.tolist(), "at least 2 clients with (N-1)·ν_i < Σ_j ν_j for every i"
        )
    return active_coefficients(nu, phi=phi) * reward


def follower_best_response(
    others: ArrayLike, *, reward: float, nu: ArrayLike, phi: float
) -> np.ndarray:
    """Best response max(0, sqrt(R·S_-i/(φν_i)) - S_-i) to the others' total S_-i.

    Solves the first-order condition R·S_-i/S² = φν_i (Eq. 21, note 003 §4.1 [OURS]); the
    utility is strictly concave for S_-i > 0 (Eq. 22). At S_-i = 0 no maximiser exists (the
    supremum is approached as ρ → 0+); 0 is returned.
    """
    s = np.asarray(others, dtype=float)
    root = np.sqrt(reward * np.maximum(s, 0.0) / (phi * np.asarray(nu, dtype=float)))
    return np.maximum(0.0, root - s)


def reward_shares(rho: ArrayLike, *, reward: float) -> np.ndarray:
    """Payment r_i = ρ_i / Σ_j ρ_j · R_t (Sec. III-B2); all zero when Σ_j ρ_j = 0."""
    rho = np.asarray(rho, dtype=float)
    total = rho.sum()
    return rho / total * reward if total > 0 else np.zeros_like(rho)


def follower_utility(
    rho: ArrayLike,
    *,
    reward: float,
    nu: ArrayLike,
    phi: float,
    constant_cost: ArrayLike = 0.0,
) -> np.ndarray:
    """Client utilities U_i = r_i - φ·ν_i·ρ_i - constant_cost_i (Eqs. 16-17).

    ``constant_cost`` stands for φ_2·C^d + φ_3·C^cp + φ_4·C^cm of Eq. 17, which do not depend
    on ρ: it shifts the utility level but not the equilibrium.
    """
    rho = np.asarray(rho, dtype=float)
    nu = np.asarray(nu, dtype=float)
    return reward_shares(rho, reward=reward) - phi * nu * rho - np.asarray(constant_cost)


@dataclass(frozen=True)
class ServerCostParams:
    """Constants of the server cost, Eq. 15 (note 003 §3.2; none are given in the paper).

    Attributes:
        gamma: weight γ ∈ (0, 1) of the accuracy-loss bound against the payments.
        discount: discount factor π ∈ (0, 1] (Table I: 0.9429 MNIST, 0.9664 Cifar10, 0.901 EMNIST).
        beta: smoothness β > 0 (Assumption 1).
        lam: strong convexity λ > 0 (Assumption 2).
        clip: clipping threshold C > 0 (Corollary 1).
        dim: dimension d of the noised vector, the number of model parameters (note §8 item 7).
        rounds: horizon T ≥ 1.
        grad_bound: gradient bound V ≥ 0 (adds a ρ-independent constant).
    """

    gamma: float
    discount: float
    beta: float = 1.0
    lam: float = 1.0
    clip: float = 1.0
    dim: int = 1
    rounds: int = 1
    grad_bound: float = 0.0

    def __post_init__(self) -> None:
        if not 0 < self.gamma < 1:
            raise ScenarioError("gamma", self.gamma, "a number in (0, 1)")
        if not 0 < self.discount <= 1:
            raise ScenarioError("discount", self.discount, "a number in (0, 1]")
        for key in ("beta", "lam", "clip"):
            _positive(key, getattr(self, key))
        for key in ("dim", "rounds"):
            if int(getattr(self, key)) != getattr(self, key) or getattr(self, key) < 1:
                raise ScenarioError(key, getattr(self, key), "an integer >= 1")
        if not np.isfinite(self.grad_bound) or self.grad_bound < 0:
            raise ScenarioError("grad_bound", self.grad_bound, "a finite number >= 0")

    @property
    def scale(self) -> float:
        """The factor 2βγ/(λ²T²) in front of the per-round accuracy-loss term of Eq. 15."""
        return 2 * self.beta * self.gamma / (self.lam**2 * self.rounds**2)


@dataclass(frozen=True)
class ServerCost:
    """One round of Eq. 15: ``accuracy`` (γ-weighted loss bound) and discounted ``payment``."""

    accuracy: float
    payment: float

    @property
    def total(self) -> float:
        """Sum of the two terms."""
        return self.accuracy + self.payment


def _check_round(t: int, params: ServerCostParams) -> None:
    if int(t) != t or not 1 <= t <= params.rounds:
        raise ScenarioError("t", t, f"an integer round in 1..{params.rounds}")


def server_cost(
    reward: float, *, rho: ArrayLike, data_sizes: ArrayLike, t: int, params: ServerCostParams
) -> ServerCost:
    """Round-t server cost given the clients' budgets (Eq. 15, separable in t, note §3.2).

    accuracy = 2βγ/(λ²T²)·(V² + 2dC²/N²·Σ_i 1/(|D_i|²ρ_i)) and payment = (1-γ)·π^(t-1)·R_t.
    Clients with ρ_i = 0 upload nothing and are left out of the sum and of N (note §4.1).
    The accuracy term is the γ-weighted bound on the loss the Gaussian noise σ_i² =
    2C²/(ρ_i|D_i|²) adds to the average of N updates of d coordinates (Corollary 1); both
    terms are in reward units (the paper weighs them with γ, it does not convert them).

    Args:
        reward: R_t ≥ 0, what the leader pays this round in total (reward units).
        rho: each client's zCDP budget ρ_i ≥ 0 this round (at least one positive).
        data_sizes: each client's |D_i| > 0 (samples), aligned with ``rho``.
        t: the round, 1..``params.rounds`` (discounted by π^(t−1)).
        params: the constants γ, π, β, λ, C, d, T, V (:class:`ServerCostParams`).

    Returns:
        ``ServerCost(accuracy, payment)``; ``.total`` is their sum.
    """
    rho = np.asarray(rho, dtype=float)
    sizes = _positive_vector("data_sizes", data_sizes)
    _check_round(t, params)
    if rho.shape != sizes.shape or np.any(rho < 0) or not np.all(np.isfinite(rho)):
        raise ScenarioError("rho", rho.tolist(), "finite budgets >= 0, one per data size")
    live = rho > 0
    if not live.any():
        raise ScenarioError("rho", rho.tolist(), "at least one positive budget")
    n = int(live.sum())
    noise = 2 * params.dim * params.clip**2 / n**2 * np.sum(1 / (sizes[live] ** 2 * rho[live]))
    accuracy = params.scale * (params.grad_bound**2 + noise)
    payment = (1 - params.gamma) * params.discount ** (t - 1) * reward
    return ServerCost(accuracy=float(accuracy), payment=float(payment))


def accuracy_constant(
    nu: ArrayLike, data_sizes: ArrayLike, *, phi: float, params: ServerCostParams
) -> float:
    """A_t = Σ_i 4dγβC² / (T²λ²N²·C_i·|D_i|²), so the noise term is A_t/R_t (Theorem 2).

    Sums over the active set with N = its size (note 003 §4.1-4.2); raises when it is empty.
    Remembers its last answers (the leader asks it every round, mostly for the same players).
    """
    key = array_key(np.asarray(nu, dtype=float), np.asarray(data_sizes, dtype=float), phi, params)
    found = _ACCURACY.get(key, lambda: np.array(_accuracy_constant(nu, data_sizes, phi, params)))
    return float(found)


def _accuracy_constant(
    nu: ArrayLike, data_sizes: ArrayLike, phi: float, params: ServerCostParams
) -> float:
    nu = _positive_vector("nu", nu)
    sizes = _positive_vector("data_sizes", data_sizes)
    if sizes.shape != nu.shape:
        raise ScenarioError("data_sizes", sizes.tolist(), f"{nu.size} positive sizes, one per ν")
    coeff = active_coefficients(nu, phi=phi)
    live = coeff > 0
    if not live.any():
        raise ScenarioError("nu", nu.tolist(), "at least 2 clients (no contest otherwise)")
    n = int(live.sum())
    p = params
    num = 4 * p.dim * p.gamma * p.beta * p.clip**2
    return float(np.sum(num / (p.rounds**2 * p.lam**2 * n**2 * coeff[live] * sizes[live] ** 2)))


def optimal_reward(a: float, *, t: int, params: ServerCostParams) -> float:
    """R_t* = sqrt(A_t·π^(1-t)/(1-γ)), the server's optimal reward (Theorem 2, note §4.2).

    Rounds are 1-based (note §8 item 8); R_t* grows by π^(-1/2) per round.
    """
    a = _positive("a", a)
    _check_round(t, params)
    return float(np.sqrt(a * params.discount ** (1 - t) / (1 - params.gamma)))
