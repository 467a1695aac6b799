"""LightDP-FL noise design: pairwise-cancelling plus individual Gaussian noise.

Hong, Lin & Duan, "Lightweight Federated Learning with Differential Privacy and Straggler
Resilience" (paper 004). Client ``i`` uploads ``w_i + sum_{a>i} r_ia - sum_{b<i} r_bi + n_i``
(eq. 7): a private ``n_i ~ N(0, sigma_U^2 I)`` and, for every partner, a pairwise term
``r_ij = r_ji ~ N(0, sigma_K^2 I)`` from a shared seed, added by the lower id and subtracted
by the higher. Pairwise terms between two uploaders cancel in the aggregate; those shared with
a straggler stay (eq. 9); those shared with a colluder are known to the server (eq. 8).

All functions are per coordinate and per round, pure and RNG-free. Sampling lives with the
caller: :func:`mask_signs` gives the +1/-1 pattern to apply to the pairwise draws.
The complete-graph formulas are the paper's; the ``topology_*`` functions generalise them to
any undirected graph of shared seeds (pairwise terms exist only on edges).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from fedgame.errors import ScenarioError
from fedgame.privacy.calibrate import analytic_gaussian_sigma, gaussian_tail_constant

__all__ = [
    "LightDPNoise",
    "adjacency_from_edges",
    "average_residual_variance",
    "colluder_residual_variance",
    "example1_coefficients",
    "expected_average_residual_variance",
    "ldp_sigma",
    "lightdp_design",
    "mask_signs",
    "optimal_pairwise_ratio",
    "prop1_worst_case_variance",
    "smpc_dp_sigma",
    "straggler_mu",
    "tail_constant",
    "topology_colluder_residual_variance",
    "topology_residual_variance",
    "uniform_straggler_pmf",
]

Calibration = Literal["analytic", "lightdp", "classic"]


def _check_counts(
    *, n_clients: int, max_colluders: int, max_stragglers: int, joint: bool = False
) -> None:
    """Raise ScenarioError unless 0 <= C_bar < N and 0 <= S_bar < N.

    ``joint`` also demands C_bar + S_bar < N (SMPC+DP needs an honest uploader; LightDP-FL
    does not: paper 004 Table II runs N=50, C_bar=40, S_bar=10).
    """
    if n_clients < 1:
        raise ScenarioError("n_clients", n_clients, "must be >= 1")
    for key, val in (("max_colluders", max_colluders), ("max_stragglers", max_stragglers)):
        if not 0 <= val < n_clients:
            raise ScenarioError(key, val, f"must be in [0, N={n_clients})")
    if joint and max_colluders + max_stragglers >= n_clients:
        raise ScenarioError(
            "max_colluders",
            max_colluders,
            f"C_bar + S_bar must be < N={n_clients} (S_bar={max_stragglers})",
        )


def _check_positive(**values: float) -> None:
    """Raise ScenarioError for the first value that is not finite and > 0."""
    for key, val in values.items():
        if not (np.isfinite(val) and val > 0):
            raise ScenarioError(key, val, "must be a finite number > 0")


def _check_subset(key: str, ids: Iterable[int], n_clients: int) -> np.ndarray:
    """Boolean membership mask of ``ids`` among N clients."""
    mask = np.zeros(n_clients, dtype=bool)
    for i in ids:
        if not 0 <= int(i) < n_clients:
            raise ScenarioError(key, int(i), f"client ids in [0, {n_clients})")
        mask[int(i)] = True
    return mask


@dataclass(frozen=True)
class LightDPNoise:
    """Designed noise levels (standard deviations per coordinate) and their ratio.

    Attributes:
        sigma_pairwise: sigma_K, std of each pairwise term r_ij.
        sigma_individual: sigma_U, std of each private term n_i.
        gamma0: sigma_K^2 / sigma_U^2 (0 means plain local DP, no pairwise noise).
    """

    sigma_pairwise: float
    sigma_individual: float
    gamma0: float


def tail_constant(
    delta: float, *, calibration: Calibration = "lightdp", epsilon: float | None = None
) -> float:
    """Gaussian-mechanism constant c with sigma = c * Delta / epsilon.

    ``"lightdp"``: sqrt(2 ln(2/delta)), the tail bound of paper 004 Prop. 1 / Appendix A.
    ``"classic"``: sqrt(2 ln(1.25/delta)) (Dwork-Roth), what paper 004's garbled baseline
    constant most likely means (note 004 §5). Both are tail bounds proven for epsilon < 1.
    ``"analytic"``: epsilon * z(epsilon, delta) with z the exact one-release multiplier of the
    analytic Gaussian mechanism (Balle & Wang 2018), valid for every epsilon (needs
    ``epsilon``). Use one calibration for every scheme compared.
    """
    if not 0.0 < delta < 1.0:
        raise ScenarioError("delta", delta, "must be in (0, 1)")
    if calibration == "analytic":
        if epsilon is None:
            raise ScenarioError("calibration", calibration, "the analytic constant needs epsilon")
        _check_positive(epsilon=epsilon)
        return epsilon * analytic_gaussian_sigma(epsilon=epsilon, delta=delta)
    if calibration in ("lightdp", "classic"):
        return float(gaussian_tail_constant(delta, shift=2.0 if calibration == "lightdp" else 1.25))
    raise ScenarioError("calibration", calibration, "one of 'analytic', 'lightdp', 'classic'")


def uniform_straggler_pmf(max_stragglers: int) -> np.ndarray:
    """Uniform pmf g(s) on {0, ..., S_bar}, the straggler law of paper 004 Example 1."""
    if max_stragglers < 0:
        raise ScenarioError("max_stragglers", max_stragglers, "must be >= 0")
    return np.full(max_stragglers + 1, 1.0 / (max_stragglers + 1))


def straggler_mu(*, n_clients: int, straggler_pmf: Sequence[float] | np.ndarray) -> float:
    """mu = E_g[S/(N-S)] / E_g[1/(N-S)] (paper 004 Example 1; any pmf g, note 004 §4.4).

    Args:
        n_clients: N.
        straggler_pmf: g(s) for s = 0, ..., len - 1; must satisfy len - 1 < N.
    """
    pmf = np.asarray(straggler_pmf, dtype=float)
    s = np.arange(pmf.size)
    if pmf.ndim != 1 or pmf.size == 0 or np.any(pmf < 0) or not np.isclose(pmf.sum(), 1.0):
        raise ScenarioError("straggler_pmf", pmf.tolist(), "non-negative weights summing to 1")
    if pmf.size > n_clients:
        raise ScenarioError("straggler_pmf", pmf.size - 1, f"support must stay below N={n_clients}")
    inv = pmf / (n_clients - s)
    return float(np.sum(s * inv) / np.sum(inv))


def example1_coefficients(*, n_honest: int, mu: float) -> np.ndarray:
    """Coefficients (kappa_4, ..., kappa_0) of G(gamma) in paper 004 Example 1.

    ``n_honest`` is M = N - C_bar. G is the numerator of h'(gamma) with
    h(gamma) = (1 + mu gamma) q(gamma), the objective of problem (16) along the tight constraint.
    """
    m = float(n_honest)
    return np.array(
        [
            2 * mu * m**3 - 2 * mu * m**2,
            m**3 - m**2 + 7 * mu * m**2 - 6 * mu * m,
            3 * m**2 - 3 * m + 9 * mu * m - 6 * mu,
            -(m**2) + 5 * m - 4 + mu * m + 2 * mu,
            -m + 1 + mu,
        ]
    )


def _tight_q(gamma: float, m: float) -> float:
    """q(gamma): sigma_U^2 / (c Delta / eps)^2 on the tight Prop.-1 constraint (note 004 §4.4)."""
    return ((m - 1) * gamma + 1) * ((m - 1) * gamma**2 + (gamma + 1) ** 2) / (m * gamma + 1) ** 2


def optimal_pairwise_ratio(*, n_honest: int, mu: float) -> float:
    """gamma0 = sigma_K^2 / sigma_U^2 solving problem (16) (paper 004 Example 1).

    The smallest positive root of G is the paper's answer. When no positive root exists
    (mu >= M - 1, or M = 1) the optimum is gamma0 = 0, plain local DP (note 004 §4.4, §8.6);
    the minimiser of h over {0} and the positive roots is returned, which covers both.
    """
    if n_honest < 1:
        raise ScenarioError("max_colluders", n_honest, "N - C_bar must be >= 1")
    if mu < 0:
        raise ScenarioError("mu", mu, "must be >= 0")
    roots = np.roots(example1_coefficients(n_honest=n_honest, mu=mu))
    pos = [float(r.real) for r in roots if abs(r.imag) < 1e-9 and r.real > 0]
    m = float(n_honest)
    return min([0.0, *sorted(pos)], key=lambda g: (1 + mu * g) * _tight_q(g, m))


def lightdp_design(
    *,
    n_clients: int,
    max_colluders: int,
    straggler_pmf: Sequence[float] | np.ndarray,
    epsilon: float,
    delta: float,
    sensitivity: float,
) -> LightDPNoise:
    """Optimal uniform (sigma_K, sigma_U) of paper 004 Example 1 / problem (16).

    sigma_U = c Delta sqrt(((M-1)g+1)((M-1)g^2+(g+1)^2)) / (eps (M g + 1)), sigma_K =
    sqrt(g) sigma_U, with g = gamma0, M = N - C_bar, c = sqrt(2 ln(2/delta)). The design is
    per round (footnote 3 composition is the caller's choice). S_bar = len(straggler_pmf) - 1.
    """
    s_bar = len(straggler_pmf) - 1
    _check_counts(n_clients=n_clients, max_colluders=max_colluders, max_stragglers=s_bar)
    _check_positive(epsilon=epsilon, sensitivity=sensitivity)
    mu = straggler_mu(n_clients=n_clients, straggler_pmf=straggler_pmf)
    m = n_clients - max_colluders
    g0 = optimal_pairwise_ratio(n_honest=m, mu=mu)
    sigma_u = tail_constant(delta) * sensitivity / epsilon * float(np.sqrt(_tight_q(g0, m)))
    return LightDPNoise(float(np.sqrt(g0)) * sigma_u, sigma_u, g0)


def prop1_worst_case_variance(
    *, n_clients: int, n_colluders: int, sigma_pairwise: float, sigma_individual: float
) -> float:
    """Left side of Prop. 1, sum_j ((C_m^-1)_ij)^2 (C_m)_jj, at the worst case (paper 004 (16)).

    Worst case: C = C_bar colluders and no honest stragglers, so C_m = b I - sigma_K^2 11^T of
    size M = N - C with b = M sigma_K^2 + sigma_U^2 (note 004 §3.5). DP holds per round when
    this is <= eps^2 / (2 ln(2/delta) Delta^2).
    """
    m = n_clients - n_colluders
    k2, u2 = sigma_pairwise**2, sigma_individual**2
    num = ((m - 1) * k2 + u2) * ((m - 1) * k2**2 + (k2 + u2) ** 2)
    return num / ((m * k2 + u2) ** 2 * u2**2)


def colluder_residual_variance(
    *, n_clients: int, n_colluders: int, sigma_pairwise: float, sigma_individual: float
) -> float:
    """Variance of the noise m_i on an honest client's upload after colluders strip theirs.

    Paper 004 eq. (8), complete graph: (N - C - 1) sigma_K^2 + sigma_U^2.
    """
    _check_counts(n_clients=n_clients, max_colluders=n_colluders, max_stragglers=0)
    return (n_clients - n_colluders - 1) * sigma_pairwise**2 + sigma_individual**2


def average_residual_variance(
    *, n_clients: int, n_stragglers: int, sigma_pairwise: float, sigma_individual: float
) -> float:
    """Variance of n_D, the noise left in the equal-weight AVERAGE of the N - S uploads.

    Paper 004 eq. (9), complete graph, uniform design: (S sigma_K^2 + sigma_U^2) / (N - S).
    The noise in the SUM is (N - S) times this.
    """
    _check_counts(n_clients=n_clients, max_colluders=0, max_stragglers=n_stragglers)
    return (n_stragglers * sigma_pairwise**2 + sigma_individual**2) / (n_clients - n_stragglers)


def expected_average_residual_variance(
    *,
    n_clients: int,
    straggler_pmf: Sequence[float] | np.ndarray,
    sigma_pairwise: float,
    sigma_individual: float,
) -> float:
    """E_{S~g}[(S sigma_K^2 + sigma_U^2)/(N - S)], the objective of paper 004 problem (16)."""
    mu = straggler_mu(n_clients=n_clients, straggler_pmf=straggler_pmf)
    pmf = np.asarray(straggler_pmf, dtype=float)
    e_inv = float(np.sum(pmf / (n_clients - np.arange(pmf.size))))
    return e_inv * (mu * sigma_pairwise**2 + sigma_individual**2)


def ldp_sigma(
    *, epsilon: float, delta: float, sensitivity: float, calibration: Calibration = "lightdp"
) -> float:
    """Vanilla local-DP baseline std sigma_L = c Delta / eps (paper 004 Sec. VI, note §5.1).

    Each client adds N(0, sigma_L^2 I); the average of N - S uploads carries sigma_L^2/(N - S).
    """
    _check_positive(epsilon=epsilon, sensitivity=sensitivity)
    c = tail_constant(delta, calibration=calibration, epsilon=epsilon)
    return c * sensitivity / epsilon


def smpc_dp_sigma(
    *,
    n_clients: int,
    max_colluders: int,
    max_stragglers: int,
    epsilon: float,
    delta: float,
    sensitivity: float,
    calibration: Calibration = "lightdp",
) -> float:
    """SMPC+DP baseline per-client std: variance sigma_L^2 / (N - C_bar - S_bar).

    Paper 004 Sec. VI scales the vanilla noise by 1/(N - C_bar - S_bar); note 004 §5.2 reads
    it as a variance factor so that the honest noise in the sum has variance >= sigma_L^2.
    """
    _check_counts(
        n_clients=n_clients,
        max_colluders=max_colluders,
        max_stragglers=max_stragglers,
        joint=True,
    )
    honest = n_clients - max_colluders - max_stragglers
    sigma_l = ldp_sigma(
        epsilon=epsilon, delta=delta, sensitivity=sensitivity, calibration=calibration
    )
    return sigma_l / float(np.sqrt(honest))


def adjacency_from_edges(edges: Iterable[tuple[int, int]], *, n_clients: int) -> np.ndarray:
    """Symmetric boolean adjacency of the shared-seed graph from an edge list."""
    adj = np.zeros((n_clients, n_clients), dtype=bool)
    for i, j in edges:
        if not (0 <= i < n_clients and 0 <= j < n_clients) or i == j:
            raise ScenarioError("edges", (i, j), f"distinct client ids in [0, {n_clients})")
        adj[i, j] = adj[j, i] = True
    return adj


def _as_adjacency(topology: np.ndarray | Iterable[tuple[int, int]], n_clients: int) -> np.ndarray:
    if isinstance(topology, np.ndarray) and topology.ndim == 2:
        adj = topology.astype(bool)
        ok = adj.shape == (n_clients, n_clients) and np.array_equal(adj, adj.T)
        if not ok or adj.diagonal().any():
            raise ScenarioError("topology", adj.shape, "symmetric N x N, empty diagonal")
        return adj
    return adjacency_from_edges(topology, n_clients=n_clients)


def mask_signs(topology: np.ndarray | Iterable[tuple[int, int]], *, n_clients: int) -> np.ndarray:
    """Coefficient of r_{min(i,j),max(i,j)} in client i's upload (paper 004 eq. 7).

    +1 where j > i (lower id adds), -1 where j < i (higher id subtracts), 0 off the graph.
    """
    adj = _as_adjacency(topology, n_clients)
    return np.triu(adj, 1).astype(float) - np.tril(adj, -1).astype(float)


def topology_colluder_residual_variance(
    topology: np.ndarray | Iterable[tuple[int, int]],
    *,
    n_clients: int,
    colluders: Iterable[int],
    sigma_pairwise: float,
    sigma_individual: float,
) -> np.ndarray:
    """Per-client variance of m_i, the upload noise the server plus colluders cannot remove.

    Generalises paper 004 eq. (8) to a graph: sigma_K^2 * (#neighbours outside the coalition)
    + sigma_U^2 for an honest client; 0 for a colluder (it reveals all its terms).
    """
    adj = _as_adjacency(topology, n_clients)
    coll = _check_subset("colluders", colluders, n_clients)
    var = adj[:, ~coll].sum(axis=1) * sigma_pairwise**2 + sigma_individual**2
    return np.where(coll, 0.0, var)


def topology_residual_variance(
    topology: np.ndarray | Iterable[tuple[int, int]],
    *,
    n_clients: int,
    stragglers: Iterable[int],
    sigma_pairwise: float,
    sigma_individual: float,
) -> float:
    """Variance of n_D in the equal-weight AVERAGE of the uploads, given the straggler set.

    Generalises paper 004 eq. (9): pairwise terms on straggler-uploader edges stay,
    (sigma_K^2 * #edges(uploaders, stragglers) + (N - S) sigma_U^2) / (N - S)^2.
    """
    adj = _as_adjacency(topology, n_clients)
    strag = _check_subset("stragglers", stragglers, n_clients)
    up = int((~strag).sum())
    if up == 0:
        raise ScenarioError("stragglers", int(strag.sum()), f"fewer than N={n_clients}")
    cut = int(adj[np.ix_(~strag, strag)].sum())
    return (cut * sigma_pairwise**2 + up * sigma_individual**2) / up**2
