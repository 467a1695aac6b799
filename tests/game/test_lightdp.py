"""Tests for fedgame.game.lightdp against note 004's worked values and Monte-Carlo checks."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.game import lightdp as ld

C_TAIL = np.sqrt(2 * np.log(2 / 1e-5))  # 4.94086, note 004 §4.4


def test_tail_constants_match_note():
    assert ld.tail_constant(1e-5) == pytest.approx(4.94086, abs=1e-5)
    assert ld.tail_constant(1e-5, calibration="classic") == pytest.approx(4.8448, abs=1e-4)


def test_example1_worked_values():
    # Note 004 §4.4 test vector: N=50, C_bar=S_bar=10, uniform g, delta=1e-5, Delta=1.
    pmf = ld.uniform_straggler_pmf(10)
    mu = ld.straggler_mu(n_clients=50, straggler_pmf=pmf)
    assert mu == pytest.approx(5.22308, abs=1e-5)
    kappa = ld.example1_coefficients(n_honest=40, mu=mu)
    expected = [651840.96, 119645.01, 6528.97, -1184.63, -33.777]
    np.testing.assert_allclose(kappa, expected, rtol=1e-5)
    for eps, s_u, s_k in [(3, 0.9477, 0.2675), (6, 0.4739, 0.1337), (9, 0.3159, 0.0892)]:
        d = ld.lightdp_design(
            n_clients=50,
            max_colluders=10,
            straggler_pmf=pmf,
            epsilon=eps,
            delta=1e-5,
            sensitivity=1.0,
        )
        assert d.gamma0 == pytest.approx(0.079656, abs=1e-6)
        assert d.sigma_individual == pytest.approx(s_u, abs=1e-4)
        assert d.sigma_pairwise == pytest.approx(s_k, abs=1e-4)


@pytest.mark.parametrize(
    ("c_bar", "s_bar", "mu", "gamma0", "s_u", "s_k", "ratio"),
    [
        (10, 10, 5.2231, 0.079656, 0.68477, 0.19326, 0.469),
        (20, 10, 5.2231, 0.082398, 0.74189, 0.21296, 0.550),
        (30, 10, 5.2231, 0.082011, 0.82504, 0.23627, 0.681),
        (40, 10, 5.2231, 0.057681, 0.95564, 0.22951, 0.913),
        (15, 0, 0.0, 0.138861, 0.57036, 0.21254, 0.325),
        (15, 10, 5.2231, 0.081156, 0.71098, 0.20254, 0.505),
        (15, 20, 10.934, 0.058483, 0.80787, 0.19537, 0.653),
        (15, 30, 17.419, 0.041768, 0.88857, 0.18160, 0.790),
    ],
)
def test_design_table(c_bar, s_bar, mu, gamma0, s_u, s_k, ratio):
    # Note 004 §4.4 design table, N=50, sigmas in units of c Delta / eps (here eps=c, Delta=1).
    pmf = ld.uniform_straggler_pmf(s_bar)
    assert ld.straggler_mu(n_clients=50, straggler_pmf=pmf) == pytest.approx(mu, abs=1e-3)
    d = ld.lightdp_design(
        n_clients=50,
        max_colluders=c_bar,
        straggler_pmf=pmf,
        epsilon=C_TAIL,
        delta=1e-5,
        sensitivity=1.0,
    )
    assert d.gamma0 == pytest.approx(gamma0, abs=1e-6)
    # The note's sigma columns hold sqrt(h(gamma0)) = sigma * sqrt(1 + mu gamma0), not the
    # paper's sigma_U = c Delta sqrt(q(gamma0)) / eps (they agree only at mu = 0; the note's own
    # eps=3 test vector 0.9477 follows the paper's formula).
    scale = np.sqrt(1 + mu * d.gamma0)
    assert d.sigma_individual * scale == pytest.approx(s_u, abs=2e-4)
    assert d.sigma_pairwise * scale == pytest.approx(s_k, abs=2e-4)
    kw = {"n_clients": 50, "straggler_pmf": pmf}
    light = ld.expected_average_residual_variance(
        **kw, sigma_pairwise=d.sigma_pairwise, sigma_individual=d.sigma_individual
    )
    ldp = ld.expected_average_residual_variance(**kw, sigma_pairwise=0.0, sigma_individual=1.0)
    assert light / ldp == pytest.approx(ratio, abs=1e-3)


def test_binomial_straggler_law():
    # Note 004 §4.4: Binomial(50, 0.05) stragglers -> mu = 2.5511, gamma0 = 0.09673 (C_bar=10).
    s = np.arange(21)
    pmf = np.array([np.exp(_log_binom(50, k, 0.05)) for k in s])
    pmf /= pmf.sum()
    assert ld.straggler_mu(n_clients=50, straggler_pmf=pmf) == pytest.approx(2.5511, abs=1e-4)
    d = ld.lightdp_design(
        n_clients=50, max_colluders=10, straggler_pmf=pmf, epsilon=1, delta=1e-5, sensitivity=1
    )
    assert d.gamma0 == pytest.approx(0.09673, abs=1e-5)


def _log_binom(n: int, k: int, p: float) -> float:
    from math import lgamma, log

    return lgamma(n + 1) - lgamma(k + 1) - lgamma(n - k + 1) + k * log(p) + (n - k) * log(1 - p)


def test_design_makes_prop1_tight():
    # The optimum sits on the Prop.-1 constraint: lhs * Delta^2 == eps^2 / (2 ln(2/delta)).
    d = ld.lightdp_design(
        n_clients=50,
        max_colluders=20,
        straggler_pmf=ld.uniform_straggler_pmf(10),
        epsilon=6,
        delta=1e-5,
        sensitivity=0.3,
    )
    lhs = ld.prop1_worst_case_variance(
        n_clients=50,
        n_colluders=20,
        sigma_pairwise=d.sigma_pairwise,
        sigma_individual=d.sigma_individual,
    )
    assert lhs * 0.3**2 == pytest.approx(6**2 / C_TAIL**2, rel=1e-9)


def test_prop1_closed_form_matches_matrix():
    # Prop. 1 left side from C_m = b I - sigma_K^2 11^T built explicitly (note 004 §3.5).
    m, k2, u2 = 7, 0.3**2, 1.1**2
    cov = ((m * k2 + u2) * np.eye(m)) - k2 * np.ones((m, m))
    inv = np.linalg.inv(cov)
    direct = float(np.sum(inv[0] ** 2 * np.diag(cov)))
    closed = ld.prop1_worst_case_variance(
        n_clients=12, n_colluders=5, sigma_pairwise=0.3, sigma_individual=1.1
    )
    assert closed == pytest.approx(direct, rel=1e-10)


def test_gamma0_fallback_without_positive_root():
    # mu >= M - 1: kappa_0 >= 0 and no positive root -> gamma0 = 0 (note 004 §4.4 edge case).
    mu = ld.straggler_mu(n_clients=50, straggler_pmf=ld.uniform_straggler_pmf(30))
    assert mu >= 10 - 1
    assert ld.optimal_pairwise_ratio(n_honest=10, mu=mu) == 0.0
    assert ld.optimal_pairwise_ratio(n_honest=1, mu=0.0) == 0.0
    # Note's example N=50, S_bar=10, C_bar=44 -> plain LDP level sigma_U = c Delta / eps.
    d44 = ld.lightdp_design(
        n_clients=50,
        max_colluders=44,
        straggler_pmf=ld.uniform_straggler_pmf(10),
        epsilon=2,
        delta=1e-5,
        sensitivity=1,
    )
    assert d44.gamma0 == 0.0 and d44.sigma_pairwise == 0.0
    assert d44.sigma_individual == pytest.approx(C_TAIL / 2, rel=1e-12)
    d43 = ld.lightdp_design(
        n_clients=50,
        max_colluders=43,
        straggler_pmf=ld.uniform_straggler_pmf(10),
        epsilon=2,
        delta=1e-5,
        sensitivity=1,
    )
    assert d43.gamma0 > 0.0  # mu = 5.22 < M - 1 = 6: a positive root exists
    # Within a valid scenario: all mass on S = N - C_bar - 1 gives mu = M - 1 exactly.
    pmf = np.zeros(5)
    pmf[4] = 1.0
    d = ld.lightdp_design(
        n_clients=10, max_colluders=5, straggler_pmf=pmf, epsilon=2, delta=1e-5, sensitivity=1
    )
    assert d.gamma0 == pytest.approx(0.0, abs=1e-9)
    assert d.sigma_individual == pytest.approx(C_TAIL / 2, rel=1e-6)  # plain LDP level


def test_design_is_global_minimum_on_grid():
    pmf = ld.uniform_straggler_pmf(20)
    mu = ld.straggler_mu(n_clients=50, straggler_pmf=pmf)
    m = 35
    g0 = ld.optimal_pairwise_ratio(n_honest=m, mu=mu)
    grid = np.linspace(0, 2, 200001)
    q = ((m - 1) * grid + 1) * ((m - 1) * grid**2 + (grid + 1) ** 2) / (m * grid + 1) ** 2
    h = (1 + mu * grid) * q
    assert abs(grid[np.argmin(h)] - g0) < 2e-5


def test_average_residual_variance_monte_carlo():
    # Paper 004 eq. (9): Var(n_D) = (S sigma_K^2 + sigma_U^2)/(N - S) for the average.
    n, s_k, s_u, draws = 8, 0.7, 0.4, 20000
    stragglers = [1, 5, 6]
    rng = np.random.default_rng(11)
    signs = ld.mask_signs(np.ones((n, n), dtype=bool) & ~np.eye(n, dtype=bool), n_clients=n)
    pair = rng.normal(0.0, s_k, size=(draws, n, n))
    pair = np.triu(pair, 1) + np.triu(pair, 1).transpose(0, 2, 1)  # r_ij = r_ji
    upload_noise = (signs * pair).sum(axis=2) + rng.normal(0.0, s_u, size=(draws, n))
    alive = np.setdiff1d(np.arange(n), stragglers)
    n_d = upload_noise[:, alive].mean(axis=1)
    expected = ld.average_residual_variance(
        n_clients=n, n_stragglers=3, sigma_pairwise=s_k, sigma_individual=s_u
    )
    assert expected == pytest.approx((3 * s_k**2 + s_u**2) / 5)
    assert n_d.var() == pytest.approx(expected, rel=0.05)
    assert upload_noise[:, 0].var() == pytest.approx((n - 1) * s_k**2 + s_u**2, rel=0.05)


def test_topology_residual_monte_carlo_on_ring():
    n, s_k, s_u, draws = 6, 1.0, 0.5, 20000
    edges = [(i, (i + 1) % n) for i in range(n)]
    rng = np.random.default_rng(7)
    signs = ld.mask_signs(edges, n_clients=n)
    pair = rng.normal(0.0, s_k, size=(draws, n, n))
    pair = np.triu(pair, 1) + np.triu(pair, 1).transpose(0, 2, 1)
    noise = (signs * pair).sum(axis=2) + rng.normal(0.0, s_u, size=(draws, n))
    n_d = noise[:, [0, 1, 3, 4]].mean(axis=1)  # stragglers 2 and 5: 4 cut edges
    expected = ld.topology_residual_variance(
        edges, n_clients=n, stragglers=[2, 5], sigma_pairwise=s_k, sigma_individual=s_u
    )
    assert expected == pytest.approx((4 * s_k**2 + 4 * s_u**2) / 16)
    assert n_d.var() == pytest.approx(expected, rel=0.05)


def test_mask_signs_cancel_on_full_upload():
    signs = ld.mask_signs([(0, 2), (1, 2), (0, 3)], n_clients=4)
    assert signs[0, 2] == 1 and signs[2, 0] == -1 and signs[1, 3] == 0
    np.testing.assert_array_equal(signs, -signs.T)


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(3, 12),
    data=st.data(),
    s_k=st.floats(0.0, 3.0),
    s_u=st.floats(0.1, 3.0),
)
def test_topology_reduces_to_complete_graph(n, data, s_k, s_u):
    complete = ~np.eye(n, dtype=bool)
    ids = st.lists(st.integers(0, n - 1), unique=True, max_size=n - 1)
    strag, coll = data.draw(ids), data.draw(ids)
    got = ld.topology_residual_variance(
        complete, n_clients=n, stragglers=strag, sigma_pairwise=s_k, sigma_individual=s_u
    )
    want = ld.average_residual_variance(
        n_clients=n, n_stragglers=len(strag), sigma_pairwise=s_k, sigma_individual=s_u
    )
    assert got == pytest.approx(want, rel=1e-12)
    per_client = ld.topology_colluder_residual_variance(
        complete, n_clients=n, colluders=coll, sigma_pairwise=s_k, sigma_individual=s_u
    )
    honest = ld.colluder_residual_variance(
        n_clients=n, n_colluders=len(coll), sigma_pairwise=s_k, sigma_individual=s_u
    )
    mask = np.isin(np.arange(n), coll)
    np.testing.assert_allclose(per_client[~mask], honest, rtol=1e-12)
    assert np.all(per_client[mask] == 0.0)


def test_sparse_graph_colluding_neighbours_leave_only_individual_noise():
    # Note 004 §7.1 item 10: if all of i's neighbours collude only sigma_U protects i.
    star = [(0, j) for j in range(1, 5)]
    var = ld.topology_colluder_residual_variance(
        star, n_clients=5, colluders=[0], sigma_pairwise=2.0, sigma_individual=0.5
    )
    np.testing.assert_allclose(var, [0.0, 0.25, 0.25, 0.25, 0.25])


def test_baselines():
    s_l = ld.ldp_sigma(epsilon=3, delta=1e-5, sensitivity=1, calibration="classic")
    assert s_l == pytest.approx(4.8448 / 3, abs=1e-4)
    s_m = ld.smpc_dp_sigma(
        n_clients=50,
        max_colluders=10,
        max_stragglers=10,
        epsilon=3,
        delta=1e-5,
        sensitivity=1,
        calibration="classic",
    )
    assert s_m**2 == pytest.approx(s_l**2 / 30)


@pytest.mark.parametrize(("c_bar", "s_bar"), [(40, 10), (25, 25), (0, 50), (-1, 3), (3, -1)])
def test_smpc_bad_counts_raise(c_bar, s_bar):
    # SMPC+DP needs N - C_bar - S_bar > 0 honest uploaders.
    with pytest.raises(ScenarioError, match="max_"):
        ld.smpc_dp_sigma(
            n_clients=50,
            max_colluders=c_bar,
            max_stragglers=s_bar,
            epsilon=1,
            delta=1e-5,
            sensitivity=1,
        )


@pytest.mark.parametrize(("c_bar", "s_bar"), [(50, 0), (-1, 3), (3, 50), (60, 10)])
def test_lightdp_bad_counts_raise(c_bar, s_bar):
    # LightDP-FL itself needs only C_bar < N and S_bar < N (paper 004 Table II: C_bar=40, S_bar=10).
    with pytest.raises(ScenarioError):
        ld.lightdp_design(
            n_clients=50,
            max_colluders=c_bar,
            straggler_pmf=ld.uniform_straggler_pmf(s_bar),
            epsilon=1,
            delta=1e-5,
            sensitivity=1,
        )


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"delta": 1.5}, "delta"),
        ({"sensitivity": -1.0}, "sensitivity"),
        ({"straggler_pmf": [0.5, 0.6]}, "straggler_pmf"),
    ],
)
def test_bad_design_input_raises(kwargs, key):
    base = {
        "n_clients": 10,
        "max_colluders": 2,
        "straggler_pmf": [0.5, 0.5],
        "epsilon": 1.0,
        "delta": 1e-5,
        "sensitivity": 1.0,
    }
    with pytest.raises(ScenarioError, match=key):
        ld.lightdp_design(**(base | kwargs))


def test_bad_topology_raises():
    with pytest.raises(ScenarioError):
        ld.mask_signs([(0, 0)], n_clients=3)
    with pytest.raises(ScenarioError):
        ld.mask_signs(np.triu(np.ones((3, 3), dtype=bool), 1), n_clients=3)
    with pytest.raises(ScenarioError):
        ld.topology_residual_variance(
            [(0, 1)], n_clients=2, stragglers=[0, 1], sigma_pairwise=1, sigma_individual=1
        )


def test_all_pairs_enumeration_helper_consistency():
    # Complete graph via edge list equals boolean matrix input.
    edges = list(itertools.combinations(range(5), 2))
    np.testing.assert_array_equal(
        ld.adjacency_from_edges(edges, n_clients=5), ~np.eye(5, dtype=bool)
    )
