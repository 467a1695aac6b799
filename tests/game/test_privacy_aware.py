"""Tests for fedgame.game.privacy_aware: paper 001 Problem 1 and its limits."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from fedgame.errors import ScenarioError
from fedgame.game import privacy_aware as pa
from fedgame.privacy.calibrate import privacy_aware_noise_factor


def _instance(n: int = 30, seed: int = 0):
    rng = np.random.default_rng(seed)
    sizes = 6000 * rng.uniform(0.5, 1.5, n)
    eps = rng.uniform(0.01, 1.0, n)
    v = pa.noise_factors(
        epsilons=eps, deltas=[1e-5] * n, sample_rates=np.minimum(1, 64 / sizes), sizes=sizes
    )
    return sizes, v


def _slsqp(pu: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Split-variable SLSQP: p = pu + u - w, u, w >= 0, objective smooth in (u, w)."""
    n = pu.size

    def obj(x):
        u, w = x[:n], x[n:]
        a = (u + w).sum()
        p = pu + u - w
        return a + np.sqrt(a * a + np.sum(c * p * p))

    cons = [
        {"type": "eq", "fun": lambda x: (x[:n] - x[n:]).sum()},
        {"type": "ineq", "fun": lambda x: pu + x[:n] - x[n:]},
    ]
    res = minimize(
        obj, np.zeros(2 * n), method="SLSQP", bounds=[(0, None)] * (2 * n), constraints=cons,
        options={"ftol": 1e-15, "maxiter": 2000},
    )  # fmt: skip
    return pu + res.x[:n] - res.x[n:]


def test_v_k_matches_calibrate():
    v = pa.noise_factors(epsilons=[0.5], deltas=[1e-5], sample_rates=[0.2], sizes=[600])
    ref = privacy_aware_noise_factor(epsilon=0.5, delta=1e-5, sample_rate=0.2, dataset_size=600)
    assert v[0] == ref
    # note 001 §1.3 table: |M|=600, B=128, eps=1 -> V ~ 1.1e-3
    v1 = pa.noise_factors(epsilons=[1.0], deltas=[1e-5], sample_rates=[128 / 600], sizes=[600])
    assert v1[0] == pytest.approx(1.1e-3, rel=0.05)


@pytest.mark.parametrize("eta_d", [1e-2, 1e2, 1e4, 1e6])
def test_solver_matches_slsqp(eta_d):
    sizes, v = _instance()
    pu = pa.unbiased_probabilities(sizes)
    c = eta_d * v
    p = pa.solve_problem1(pu=pu, c=c)
    q = _slsqp(pu, c)
    f_p, f_q = pa.problem1_objective(p, pu=pu, c=c), pa.problem1_objective(q, pu=pu, c=c)
    assert f_p <= f_q + 1e-6
    assert abs(f_p - f_q) < 1e-6 * max(1.0, f_q)
    assert p.sum() == pytest.approx(1.0) and np.all(p > 0)  # paper 001 Prop. 2


def test_solver_beats_random_feasible_points():
    sizes, v = _instance(10, seed=3)
    pu = pa.unbiased_probabilities(sizes)
    c = 1e4 * v
    best = pa.problem1_objective(pa.solve_problem1(pu=pu, c=c), pu=pu, c=c)
    rng = np.random.default_rng(0)
    for q in rng.dirichlet(np.ones(10), size=300):
        assert best <= pa.problem1_objective(q, pu=pu, c=c) + 1e-12


def test_limits_eta_to_zero_and_infinity():
    sizes, v = _instance()
    pu = pa.unbiased_probabilities(sizes)
    np.testing.assert_allclose(pa.selection_probabilities(sizes=sizes, v=v, eta_d=1e-6), pu)
    p_inf = pa.selection_probabilities(sizes=sizes, v=v, eta_d=1e14)
    np.testing.assert_allclose(p_inf, pa.min_variance_probabilities(v), rtol=1e-3)
    # monotone: the selection gap grows with eta
    gaps = [
        np.abs(pa.selection_probabilities(sizes=sizes, v=v, eta_d=e) - pu).sum()
        for e in (1e2, 1e4, 1e6)
    ]
    assert gaps[0] < gaps[1] < gaps[2]


def test_low_budget_clients_go_down():
    sizes = np.full(6, 600.0)
    eps = np.array([0.01, 0.05, 0.5, 0.5, 1.0, 1.0])
    v = pa.noise_factors(epsilons=eps, deltas=[1e-5] * 6, sample_rates=[0.1] * 6, sizes=sizes)
    p = pa.selection_probabilities(sizes=sizes, v=v, eta_d=1e4)
    assert p[0] < p[1] < 1 / 6 < p[4]


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [({"eta_d": 0.0}, "eta_d"), ({"eta_d": -1.0}, "eta_d"), ({"v": [1.0, -1.0]}, "v")],
)
def test_bad_input(kwargs, key):
    base = {"sizes": [1.0, 2.0], "v": [1.0, 2.0], "eta_d": 1.0}
    with pytest.raises(ScenarioError, match=key):
        pa.selection_probabilities(**(base | kwargs))
