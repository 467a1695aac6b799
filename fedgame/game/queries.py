"""Optimal numbers of queries T and replies (clients per query b) for DP FedSGD.

Zhou et al., "Optimizing the Numbers of Queries and Replies in Federated Learning with
Differential Privacy" (paper 002). The server runs T queries (FedSGD iterations), each
answered by b of N clients, so every client replies bT/N times and its DP noise grows with
that count. Paper 002 bounds Y_T = E||theta_T - theta*||^2 (Theorems 3 and 4) and optimises it.

Laplace (basic composition, Theorem 3): U(T) = (A1 + A2 T^2 + gamma Y0)/(T + gamma) is convex
with a closed-form T* (eq. 6); jointly in (T, b) the optimum lies at b in {1, N} (Sec. V-C).
Gaussian (moments accountant, Theorem 4): U = E1/(b(T+gamma)) + E2/(T+gamma) + E3 is best at
b = N and T = infinity (or T = 0), so T is capped by the caller's budget.

How the constants are estimated (paper 002 Sec. VI and note 002 §3.5): gamma = 2 lambda/mu from
smoothness lambda and strong convexity mu, estimated by "existing algorithms" (gradient-
difference ratios at a few probe iterations); G^2 bounds the mean squared per-sample gradient
norm; Gamma = F* - sum_i (d_i/d) F_i* (Definition 4; the paper uses max_i F_i* for F*, which
underestimates it); Y0 = sum_i (d_i/d) ||theta_0 - theta_i*||^2 from local solves. These need
data and a model and live with the learner; :func:`noniid_degree` and :func:`laplace_constants`
turn the estimates into A1, A2. :func:`fit_laplace_bound` instead fits the bound's shape to
observed (T, final loss) pairs from pilot runs (fedgame's addition, not the paper's procedure).
All functions are pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from fedgame.errors import ScenarioError

__all__ = [
    "LaplaceConstants",
    "LaplaceFit",
    "QueryPlan",
    "fit_laplace_bound",
    "gaussian_bound",
    "gaussian_constants",
    "gaussian_optimum",
    "laplace_b_star",
    "laplace_bound",
    "laplace_constants",
    "laplace_joint_optimum",
    "laplace_t_star",
    "noniid_degree",
    "round_clients",
    "round_queries",
]


def _positive(**values: float) -> None:
    for key, val in values.items():
        if not (math.isfinite(val) and val > 0):
            raise ScenarioError(key, val, "must be a finite number > 0")


def _non_negative(**values: float) -> None:
    for key, val in values.items():
        if not (math.isfinite(val) and val >= 0):
            raise ScenarioError(key, val, "must be a finite number >= 0")


def _check_population(n_clients: int, clients_per_query: int | None = None) -> None:
    if n_clients < 2:
        raise ScenarioError("n_clients", n_clients, "must be >= 2")
    if clients_per_query is not None and not 1 <= clients_per_query <= n_clients:
        raise ScenarioError("clients_per_query", clients_per_query, f"in [1, N={n_clients}]")


def _inverse_eps_sq(epsilons: Sequence[float] | np.ndarray, n_clients: int) -> float:
    eps = np.asarray(epsilons, dtype=float)
    if eps.shape != (n_clients,) or not np.all(np.isfinite(eps) & (eps > 0)):
        raise ScenarioError("epsilons", list(eps), f"{n_clients} finite budgets > 0")
    return float(np.sum(eps**-2.0))


@dataclass(frozen=True)
class LaplaceConstants:
    """Constants of U(T) = (a1 + a2 T^2 + gamma y0)/(T + gamma), paper 002 eq. (6)."""

    a1: float
    a2: float
    gamma: float
    y0: float


@dataclass(frozen=True)
class QueryPlan:
    """A (T, b) choice and the bound it attains (T may be 0 or math.inf for the Gaussian)."""

    queries: float
    clients_per_query: int
    bound: float


def noniid_degree(
    *, global_optimum_loss: float, local_optimum_losses: Sequence[float], weights: Sequence[float]
) -> float:
    """Gamma = F* - sum_i (d_i/d) F_i* (paper 002 Definition 4); weights are d_i/d."""
    w, f = np.asarray(weights, dtype=float), np.asarray(local_optimum_losses, dtype=float)
    if w.shape != f.shape or np.any(w < 0) or not np.isclose(w.sum(), 1.0):
        raise ScenarioError("weights", list(w), "one non-negative weight per client, sum 1")
    return float(global_optimum_loss - np.dot(w, f))


def laplace_constants(
    *,
    n_clients: int,
    clients_per_query: int,
    n_params: int,
    n_samples: int,
    clip_l1: float,
    epsilons: Sequence[float],
    grad_bound_sq: float,
    smoothness: float,
    strong_convexity: float,
    noniid: float,
    initial_distance_sq: float,
) -> LaplaceConstants:
    """A1, A2, gamma, Y0 of the Laplace bound (paper 002 Theorem 3, Sec. V-A).

    A1 = (4/mu^2)(2 (N-b)/(N-1) G^2/b + 2 lambda Gamma); A2 = (32/mu^2) p b xi1^2/(N d^2)
    sum_i eps_i^-2; gamma = 2 lambda/mu. ``n_samples`` is d, the total over clients.
    """
    _check_population(n_clients, clients_per_query)
    _positive(n_params=n_params, n_samples=n_samples, clip_l1=clip_l1)
    _positive(grad_bound_sq=grad_bound_sq, smoothness=smoothness)
    _positive(strong_convexity=strong_convexity)
    _non_negative(noniid=noniid, initial_distance_sq=initial_distance_sq)
    if strong_convexity > smoothness:
        raise ScenarioError("strong_convexity", strong_convexity, f"<= smoothness={smoothness}")
    inv = _inverse_eps_sq(epsilons, n_clients)
    n, b, mu = n_clients, clients_per_query, strong_convexity
    a1 = 4 / mu**2 * (2 * (n - b) / (n - 1) * grad_bound_sq / b + 2 * smoothness * noniid)
    a2 = 32 / mu**2 * n_params * b * clip_l1**2 / (n * n_samples**2) * inv
    return LaplaceConstants(a1, a2, 2 * smoothness / mu, initial_distance_sq)


def _check_laplace(a1: float, a2: float, gamma: float, y0: float) -> None:
    _positive(a2=a2, gamma=gamma)
    _non_negative(a1=a1, y0=y0)


def laplace_bound(*, queries: float, a1: float, a2: float, gamma: float, y0: float) -> float:
    """U(T) = (A1 + A2 T^2 + gamma Y0)/(T + gamma), the Theorem-3 bound at t = T (paper 002)."""
    _check_laplace(a1, a2, gamma, y0)
    return (a1 + a2 * queries**2 + gamma * y0) / (queries + gamma)


def laplace_t_star(*, a1: float, a2: float, gamma: float, y0: float) -> float:
    """T* = sqrt(gamma^2 + (A1 + gamma Y0)/A2) - gamma (paper 002 eq. 6), continuous.

    U(T*) = 2 A2 T* (note 002 §4.1). Round with :func:`round_queries`.
    """
    _check_laplace(a1, a2, gamma, y0)
    return math.sqrt(gamma**2 + (a1 + gamma * y0) / a2) - gamma


def round_queries(*, a1: float, a2: float, gamma: float, y0: float) -> int:
    """Integer T: whichever of floor(T*), ceil(T*) (at least 1) has the smaller bound (U convex)."""
    t = laplace_t_star(a1=a1, a2=a2, gamma=gamma, y0=y0)
    cands = {max(1, math.floor(t)), max(1, math.ceil(t))}
    kw = {"a1": a1, "a2": a2, "gamma": gamma, "y0": y0}
    return min(sorted(cands), key=lambda q: laplace_bound(queries=q, **kw))


def laplace_b_star(*, queries: float, c1: float, c2: float) -> float:
    """Continuous b* = sqrt(C1/C2)/T for fixed T (paper 002 Sec. V-B), before clipping.

    With C1 = 8 N G^2/(mu^2 (N-1)) and C2 = 32 p xi1^2 sum_i eps_i^-2/(mu^2 N d^2) this is
    G N d / (2 T xi1 sqrt(p (N-1) sum_i eps_i^-2)).
    """
    _positive(queries=queries, c1=c1, c2=c2)
    return math.sqrt(c1 / c2) / queries


def round_clients(*, b_star: float, n_clients: int) -> int:
    """Integer b = clip(ceil(b*), 1, N): the rounding that reproduces paper 002 Table I."""
    _check_population(n_clients)
    return int(min(n_clients, max(1, math.ceil(b_star - 1e-12))))


def laplace_joint_optimum(
    *, c1: float, c2: float, c3: float, gamma: float, n_clients: int
) -> QueryPlan:
    """Joint (T*, b*) for U(T, b) = (C1/b + C2 b T^2 + C3)/(T + gamma) (paper 002 Sec. V-C).

    The optimum lies at b in {1, N} (Solutions 1-2; note 002 §4.3 shows why). Since
    U*(b) = 2 C2 b T*(b), pick the b with fewer total replies b T*(b). Needs C1/b + C3 >= 0.
    """
    _positive(c1=c1, c2=c2, gamma=gamma)
    _check_population(n_clients)
    plans = []
    for b in (1, n_clients):
        k = c1 / b + c3
        if k < 0:
            raise ScenarioError("c3", c3, f"C1/b + C3 must be >= 0 (b={b})")
        t = laplace_t_star(a1=k, a2=c2 * b, gamma=gamma, y0=0.0)
        plans.append(QueryPlan(t, b, 2 * c2 * b * t))
    return min(plans, key=lambda plan: plan.bound)


def gaussian_constants(
    *,
    n_clients: int,
    n_params: int,
    samples_per_client: Sequence[float] | np.ndarray,
    sample_rate: float,
    clip_l2: float,
    epsilons: Sequence[float],
    deltas: Sequence[float],
    c2: float,
    grad_bound_sq: float,
    grad_variances: Sequence[float],
    smoothness: float,
    strong_convexity: float,
    noniid: float,
    initial_distance_sq: float,
) -> tuple[float, float, float, float]:
    """(E1, E2, E3, gamma) of the Gaussian bound (paper 002 Theorem 4, Sec. V-D).

    E1 = 8 G^2 N/(mu^2 (N-1)); E3 = (4/mu^2) c2^2 p xi2^2/d^2 sum_i log(1/delta_i)/eps_i^2;
    E2 = (4/mu^2)(-2G^2/(N-1) + sum_i d_i Lambda_i^2/(q d^2) + 2 lambda Gamma) + gamma Y0
    - gamma E3. ``grad_variances`` are Lambda_i^2; c2 is Abadi's constant (never given).
    """
    _check_population(n_clients)
    _positive(n_params=n_params, sample_rate=sample_rate, clip_l2=clip_l2, c2=c2)
    _positive(grad_bound_sq=grad_bound_sq, smoothness=smoothness)
    _positive(strong_convexity=strong_convexity)
    _non_negative(noniid=noniid, initial_distance_sq=initial_distance_sq)
    d_i = np.asarray(samples_per_client, dtype=float)
    lam2 = np.asarray(grad_variances, dtype=float)
    dl = np.asarray(deltas, dtype=float)
    if d_i.shape != (n_clients,) or np.any(d_i <= 0):
        raise ScenarioError("samples_per_client", list(d_i), f"{n_clients} values > 0")
    if lam2.shape != (n_clients,) or np.any(lam2 < 0):
        raise ScenarioError("grad_variances", list(lam2), f"{n_clients} values >= 0")
    if dl.shape != (n_clients,) or np.any((dl <= 0) | (dl >= 1)):
        raise ScenarioError("deltas", list(dl), f"{n_clients} values in (0, 1)")
    eps = np.asarray(epsilons, dtype=float)
    _inverse_eps_sq(eps, n_clients)
    n, mu, d = n_clients, strong_convexity, float(d_i.sum())
    gamma = 2 * smoothness / mu
    e1 = 8 * grad_bound_sq * n / (mu**2 * (n - 1))
    e3 = 4 / mu**2 * c2**2 * n_params * clip_l2**2 / d**2 * float(np.sum(np.log(1 / dl) / eps**2))
    inner = -2 * grad_bound_sq / (n - 1) + float(np.sum(d_i * lam2)) / (sample_rate * d**2)
    e2 = 4 / mu**2 * (inner + 2 * smoothness * noniid) + gamma * initial_distance_sq - gamma * e3
    return e1, e2, e3, gamma


def gaussian_bound(
    *, queries: float, clients_per_query: int, e1: float, e2: float, e3: float, gamma: float
) -> float:
    """U(T, b) = E1/(b (T + gamma)) + E2/(T + gamma) + E3 (paper 002 Sec. V-D)."""
    _positive(e1=e1, e3=e3, gamma=gamma)
    return (e1 / clients_per_query + e2) / (queries + gamma) + e3


def gaussian_optimum(
    *, e1: float, e2: float, e3: float, gamma: float, n_clients: int, max_queries: int | None
) -> QueryPlan:
    """Boundary optimum of the Gaussian bound (paper 002 Sec. V-D, Solutions 1-2).

    b* = N. With D = E1/N + E2 > 0 the bound falls in T: T* = max_queries (math.inf when None,
    bound -> E3). With D <= 0 training does not help the bound: T* = 0.
    """
    _positive(e1=e1, e3=e3, gamma=gamma)
    _check_population(n_clients)
    if max_queries is not None and max_queries < 1:
        raise ScenarioError("max_queries", max_queries, "an integer >= 1, or None")
    if e1 / n_clients + e2 <= 0:
        t: float = 0.0
    else:
        t = math.inf if max_queries is None else float(max_queries)
    if math.isinf(t):
        return QueryPlan(t, n_clients, e3)
    kw = {"e1": e1, "e2": e2, "e3": e3, "gamma": gamma}
    return QueryPlan(t, n_clients, gaussian_bound(queries=t, clients_per_query=n_clients, **kw))


@dataclass(frozen=True)
class LaplaceFit:
    """Least-squares fit loss(T) ~ (k + a2 T^2)/(T + gamma) + offset; k = A1 + gamma Y0."""

    k: float
    a2: float
    gamma: float
    offset: float

    @property
    def t_star(self) -> float:
        """T* of the fitted bound (paper 002 eq. 6)."""
        return laplace_t_star(a1=self.k, a2=self.a2, gamma=self.gamma, y0=0.0)


def fit_laplace_bound(
    *,
    queries: Sequence[float],
    losses: Sequence[float],
    gamma_range: tuple[float, float] = (0.01, 1e3),
) -> LaplaceFit:
    """Fit the shape of paper 002's Laplace bound (eq. 6) to observed (T, final loss) pairs.

    For fixed gamma the model is linear in (k, a2, offset) >= 0 (non-negative least squares);
    gamma is found by a log-grid search refined with a bounded scalar minimisation. Needs at
    least four distinct T values. The offset absorbs the loss floor F*, which Y_T lacks.
    """
    from scipy.optimize import minimize_scalar, nnls

    t = np.asarray(queries, dtype=float)
    y = np.asarray(losses, dtype=float)
    if t.shape != y.shape or t.ndim != 1 or np.unique(t).size < 4 or np.any(t < 0):
        raise ScenarioError("queries", list(t), "one T >= 0 per loss, at least 4 distinct")
    if not np.all(np.isfinite(y)):
        raise ScenarioError("losses", list(y), "finite numbers")
    lo, hi = gamma_range
    _positive(gamma_min=lo, gamma_max=hi - lo)

    def solve(log_g: float) -> tuple[float, np.ndarray]:
        g = math.exp(log_g)
        design = np.column_stack([1 / (t + g), t**2 / (t + g), np.ones_like(t)])
        coef, resid = nnls(design, y)
        return resid, coef

    grid = np.linspace(math.log(lo), math.log(hi), 121)
    i = int(np.argmin([solve(v)[0] for v in grid]))
    a, b = grid[max(i - 1, 0)], grid[min(i + 1, grid.size - 1)]
    res = minimize_scalar(lambda v: solve(v)[0], bounds=(a, b), method="bounded")
    coef = solve(float(res.x))[1]
    if coef[1] <= 0:
        raise ScenarioError("losses", list(y), "a loss that rises again for large T (a2 > 0)")
    return LaplaceFit(float(coef[0]), float(coef[1]), math.exp(float(res.x)), float(coef[2]))
