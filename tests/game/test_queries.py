"""Tests for fedgame.game.queries: paper 002 Table I, Theorems 3-4 and the boundary optima."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.game import queries as q

N = 10
EPS = (1.0, 5.0, 10.0)
# Note 002 §5.5: fit of eq. (6) to Table I with A1 + gamma Y0 = R (P h(b) + Q), A2 = R b/eps^2.
FIT = {"MNIST": (3.16, 411.0, 202.0), "FEMNIST": (5.37, 96.0, 131.0)}
TABLE_T = {  # Table I, T* for (b=5), (b=10), (b*=1); eps = 1 / 5 / 10
    "MNIST": {5: (5, 32, 67), 10: (2, 20, 42), 1: (22, 121, 244)},
    "FEMNIST": {5: (2, 22, 48), 10: (1, 14, 31), 1: (11, 70, 145)},
}
TABLE_B = {"MNIST": (1, 3, 5), "FEMNIST": (1, 2, 3)}  # Table I, b* at T = 50


def _h(b: int) -> float:
    return (N - b) / ((N - 1) * b)


T_CASES = [
    (ds, b, eps, TABLE_T[ds][b][k]) for ds in FIT for b in (5, 10, 1) for k, eps in enumerate(EPS)
]
B_CASES = [(ds, eps, TABLE_B[ds][k]) for ds in FIT for k, eps in enumerate(EPS)]


@pytest.mark.parametrize(("dataset", "b", "eps", "expected"), T_CASES)
def test_table1_t_star(dataset, b, eps, expected):
    gamma, p, q_ = FIT[dataset]
    # Scaled by 1/R: a1 = P h(b), gamma y0 = Q, a2 = b / eps^2 (T* is scale-free).
    t = q.laplace_t_star(a1=p * _h(b), a2=b / eps**2, gamma=gamma, y0=q_ / gamma)
    assert abs(t - expected) <= 0.5


@pytest.mark.parametrize(("dataset", "eps", "expected"), B_CASES)
def test_table1_b_star(dataset, eps, expected):
    _, p, _ = FIT[dataset]
    # C1 = N/(N-1) * 8 G^2/mu^2 = N/(N-1) P R, C2 = R / eps^2 (equal budgets).
    b = q.laplace_b_star(queries=50, c1=N / (N - 1) * p, c2=1 / eps**2)
    assert q.round_clients(b_star=b, n_clients=N) == expected
    assert expected - 1 < b <= expected


def test_table1_from_physical_constants():
    # MNIST: p=7840, xi1=300, d=60000; mu=1 so G^2 = R P / 8 (note 002: G ~ 17.9).
    gamma, p_fit, q_fit = FIT["MNIST"]
    r = 32 * 7840 * 300.0**2 / 60000.0**2
    g2 = r * p_fit / 8
    assert math.sqrt(g2) == pytest.approx(17.9, abs=0.1)
    c = q.laplace_constants(
        n_clients=N,
        clients_per_query=1,
        n_params=7840,
        n_samples=60000,
        clip_l1=300.0,
        epsilons=[10.0] * N,
        grad_bound_sq=g2,
        smoothness=gamma / 2,
        strong_convexity=1.0,
        noniid=0.0,
        initial_distance_sq=r * q_fit / gamma,
    )
    assert c.gamma == pytest.approx(gamma)
    t = q.laplace_t_star(a1=c.a1, a2=c.a2, gamma=c.gamma, y0=c.y0)
    assert abs(t - 244) <= 0.5
    assert q.round_queries(a1=c.a1, a2=c.a2, gamma=c.gamma, y0=c.y0) == 244


def test_laplace_constants_match_theorem3():
    # Theorem 3 at t = T assembled from omega_0, omega_1 directly.
    n, b, p, d, xi, lam, mu, gam_, y0, g2 = 10, 3, 100, 5000, 2.0, 3.0, 0.5, 0.2, 4.0, 9.0
    eps = [1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 1.0, 2.0, 4.0, 1.0]
    c = q.laplace_constants(
        n_clients=n,
        clients_per_query=b,
        n_params=p,
        n_samples=d,
        clip_l1=xi,
        epsilons=eps,
        grad_bound_sq=g2,
        smoothness=lam,
        strong_convexity=mu,
        noniid=gam_,
        initial_distance_sq=y0,
    )
    gamma = 2 * lam / mu
    s_inv = sum(e**-2 for e in eps)
    for t in (1.0, 7.0, 40.0):
        w0 = 2 * (n - b) / (n - 1) * g2 / b + 2 * lam * gam_
        w1 = 32 * p * b * t**2 * xi**2 / (n * d**2) * s_inv
        direct = (4 / mu**2 * w0 + gamma * y0) / (t + gamma) + w1 / (mu**2 * (t + gamma))
        got = q.laplace_bound(queries=t, a1=c.a1, a2=c.a2, gamma=c.gamma, y0=c.y0)
        assert got == pytest.approx(direct, rel=1e-12)


@settings(max_examples=40, deadline=None)
@given(
    a1=st.floats(0.0, 1e4),
    a2=st.floats(1e-4, 10.0),
    gamma=st.floats(0.1, 50.0),
    y0=st.floats(0.0, 100.0),
)
def test_t_star_minimises_bound(a1, a2, gamma, y0):
    kw = {"a1": a1, "a2": a2, "gamma": gamma, "y0": y0}
    t = q.laplace_t_star(**kw)
    u = q.laplace_bound(queries=t, **kw)
    assert u == pytest.approx(2 * a2 * t, rel=1e-9, abs=1e-12)  # note 002 §4.1 identity
    for dt in (-0.3 * t, 0.1, 1.0, 0.5 * t + 1):
        if t + dt >= 0:
            assert q.laplace_bound(queries=t + dt, **kw) >= u * (1 - 1e-12)
    ti = q.round_queries(**kw)
    for other in {max(1, math.floor(t)), max(1, math.ceil(t))}:
        assert q.laplace_bound(queries=ti, **kw) <= q.laplace_bound(queries=other, **kw)


@settings(max_examples=30, deadline=None)
@given(
    c1=st.floats(1.0, 1e4),
    c2=st.floats(1e-3, 1.0),
    c3=st.floats(0.0, 1e4),
    gamma=st.floats(0.5, 20.0),
    n=st.integers(2, 12),
)
def test_joint_optimum_on_b_boundary(c1, c2, c3, gamma, n):
    plan = q.laplace_joint_optimum(c1=c1, c2=c2, c3=c3, gamma=gamma, n_clients=n)
    assert plan.clients_per_query in (1, n)

    def u(t, b):
        return (c1 / b + c2 * b * t**2 + c3) / (t + gamma)

    assert u(plan.queries, plan.clients_per_query) == pytest.approx(plan.bound, rel=1e-9)
    ts = np.linspace(0.0, 3 * plan.queries + 10, 3001)
    brute = min(u(ts, b).min() for b in np.linspace(1, n, 4 * n))
    assert plan.bound <= brute * (1 + 1e-9)


def test_joint_prefers_b1_on_mnist_eps10():
    # Note 002 §4.3: 1 * 244 < 10 * 42, so b* = 1.
    gamma, p, q_ = FIT["MNIST"]
    plan = q.laplace_joint_optimum(
        c1=N / (N - 1) * p, c2=1 / 100, c3=q_ - p / (N - 1), gamma=gamma, n_clients=N
    )
    assert plan.clients_per_query == 1
    assert abs(plan.queries - 244) <= 0.5


GAUSS = {
    "n_clients": 4,
    "n_params": 50,
    "samples_per_client": [100.0, 200.0, 150.0, 50.0],
    "sample_rate": 0.1,
    "clip_l2": 2.0,
    "epsilons": [0.5, 1.0, 1.0, 0.2],
    "deltas": [1e-5] * 4,
    "c2": 1.5,
    "grad_bound_sq": 4.0,
    "grad_variances": [1.0, 2.0, 0.5, 1.0],
    "smoothness": 2.0,
    "strong_convexity": 0.5,
    "noniid": 0.3,
    "initial_distance_sq": 10.0,
}


def test_gaussian_constants_match_theorem4():
    e1, e2, e3, gamma = q.gaussian_constants(**GAUSS)
    g = GAUSS
    n, mu, lam = g["n_clients"], g["strong_convexity"], g["smoothness"]
    d_i = np.array(g["samples_per_client"])
    d = d_i.sum()
    eps, dl = np.array(g["epsilons"]), np.array(g["deltas"])
    assert gamma == pytest.approx(2 * lam / mu)
    for t, b in [(1.0, 1), (10.0, 2), (100.0, 4)]:
        w0 = (
            2 * (n - b) / (n - 1) * g["grad_bound_sq"] / b
            + np.sum(d_i * np.array(g["grad_variances"])) / (g["sample_rate"] * d**2)
            + 2 * lam * g["noniid"]
        )
        w1 = (4 * g["c2"] ** 2 * g["n_params"] * t * g["clip_l2"] ** 2 / d**2) * np.sum(
            np.log(1 / dl) / eps**2
        )
        direct = (4 / mu**2 * w0 + gamma * g["initial_distance_sq"]) / (t + gamma) + w1 / (
            mu**2 * (t + gamma)
        )
        got = q.gaussian_bound(queries=t, clients_per_query=b, e1=e1, e2=e2, e3=e3, gamma=gamma)
        assert got == pytest.approx(direct, rel=1e-12)


def test_gaussian_optimum_solutions():
    e1, e2, e3, gamma = q.gaussian_constants(**GAUSS)
    assert e1 / 4 + e2 > 0
    plan = q.gaussian_optimum(e1=e1, e2=e2, e3=e3, gamma=gamma, n_clients=4, max_queries=100)
    assert (plan.queries, plan.clients_per_query) == (100.0, 4)
    kw = {"e1": e1, "e2": e2, "e3": e3, "gamma": gamma}
    for b in (1, 2, 3, 4):
        for t in (0.0, 10.0, 99.0):
            assert q.gaussian_bound(queries=t, clients_per_query=b, **kw) >= plan.bound
    inf_plan = q.gaussian_optimum(**kw, n_clients=4, max_queries=None)
    assert math.isinf(inf_plan.queries) and inf_plan.bound == e3
    # Solution 2: D = E1/N + E2 < 0 -> T* = 0.
    assert (
        q.gaussian_optimum(e1=1.0, e2=-1.0, e3=1.0, gamma=1.0, n_clients=4, max_queries=50).queries
        == 0.0
    )


def test_fit_laplace_bound_recovers_synthetic_curve():
    k, a2, gamma, offset = 500.0, 0.02, 3.0, 0.1
    t = np.array([2.0, 5.0, 10.0, 22.0, 50.0, 100.0, 200.0, 400.0])
    loss = (k + a2 * t**2) / (t + gamma) + offset
    fit = q.fit_laplace_bound(queries=t, losses=loss)
    assert fit.gamma == pytest.approx(gamma, rel=1e-3)
    assert fit.a2 == pytest.approx(a2, rel=1e-3)
    assert fit.k == pytest.approx(k, rel=1e-3)
    assert fit.offset == pytest.approx(offset, abs=1e-3)
    assert fit.t_star == pytest.approx(q.laplace_t_star(a1=k, a2=a2, gamma=gamma, y0=0), rel=1e-3)


def test_noniid_degree():
    assert q.noniid_degree(
        global_optimum_loss=0.9, local_optimum_losses=[0.1, 0.3], weights=[0.5, 0.5]
    ) == pytest.approx(0.7)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"a2": 0.0}, "a2"),
        ({"a2": -1.0}, "a2"),
        ({"gamma": 0.0}, "gamma"),
        ({"gamma": -2.0}, "gamma"),
        ({"a1": -1.0}, "a1"),
        ({"y0": -0.1}, "y0"),
        ({"a2": math.nan}, "a2"),
    ],
)
def test_bad_laplace_constants_raise(kwargs, key):
    base = {"a1": 1.0, "a2": 1.0, "gamma": 1.0, "y0": 1.0}
    with pytest.raises(ScenarioError, match=key):
        q.laplace_t_star(**(base | kwargs))


@pytest.mark.parametrize(
    "key",
    ["n_params", "n_samples", "clip_l1", "grad_bound_sq", "smoothness", "strong_convexity"],
)
def test_bad_physical_constants_raise(key):
    base = {
        "n_clients": 10,
        "clients_per_query": 1,
        "n_params": 10,
        "n_samples": 100,
        "clip_l1": 1.0,
        "epsilons": [1.0] * 10,
        "grad_bound_sq": 1.0,
        "smoothness": 2.0,
        "strong_convexity": 1.0,
        "noniid": 0.0,
        "initial_distance_sq": 1.0,
    }
    with pytest.raises(ScenarioError, match=key):
        q.laplace_constants(**(base | {key: 0}))


def test_bad_population_and_gaussian_raise():
    with pytest.raises(ScenarioError, match="clients_per_query"):
        q.laplace_constants(
            n_clients=10,
            clients_per_query=11,
            n_params=10,
            n_samples=100,
            clip_l1=1.0,
            epsilons=[1.0] * 10,
            grad_bound_sq=1.0,
            smoothness=2.0,
            strong_convexity=1.0,
            noniid=0.0,
            initial_distance_sq=1.0,
        )
    with pytest.raises(ScenarioError, match="epsilons"):
        q.gaussian_constants(**(GAUSS | {"epsilons": [1.0, 0.0, 1.0, 1.0]}))
    with pytest.raises(ScenarioError, match="e1"):
        q.gaussian_optimum(e1=0.0, e2=1.0, e3=1.0, gamma=1.0, n_clients=4, max_queries=5)
    with pytest.raises(ScenarioError, match="queries"):
        q.fit_laplace_bound(queries=[1, 2, 3], losses=[1.0, 0.5, 0.7])
