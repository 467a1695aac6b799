"""Tests for fedgame.game.bcs: Prop. 1 of paper 000 and its capped / KKT generalisations."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.game import bcs, bcs_estimate

phis = st.lists(st.floats(1e-3, 1e3), min_size=2, max_size=12)


def test_noise_factor_values():
    phi = bcs.noise_factor(
        mechanism="gaussian", epsilons=[1.0, 2.0], samples=[10.0, 5.0], deltas=[1e-5, 1e-5]
    )
    np.testing.assert_allclose(phi, [np.log(1e5) / 100, np.log(1e5) / 100])
    lap = bcs.noise_factor(mechanism="laplace", epsilons=[0.5], samples=[4.0])
    np.testing.assert_allclose(lap, [0.25])


def test_prop1_gaussian_proportional_to_d2_eps2():
    # Paper 000 Prop. 1, GM: T_n ∝ D_n^2 eps_n^2 / ln(1/delta_n); equal delta.
    eps, d_n = np.array([0.5, 1.0, 2.0]), np.array([100.0, 100.0, 50.0])
    phi = bcs.noise_factor(mechanism="gaussian", epsilons=eps, samples=d_n, deltas=[1e-5] * 3)
    t = bcs.prop1_allocation(phi=phi, z=1, total=90.0)
    w = (d_n * eps) ** 2
    np.testing.assert_allclose(t, 90 * w / w.sum())


@settings(max_examples=40, deadline=None)
@given(phi=phis, z=st.sampled_from([1, 2]), total=st.floats(1.0, 500.0))
def test_prop1_equalises_noise(phi, z, total):
    t = bcs.prop1_allocation(phi=phi, z=z, total=total)
    noise = t**z * np.asarray(phi)
    np.testing.assert_allclose(noise, noise[0], rtol=1e-9)
    assert t.sum() == pytest.approx(total)


@settings(max_examples=40, deadline=None)
@given(phi=phis, z=st.sampled_from([1, 2]), frac=st.floats(0.05, 1.0), cap=st.floats(1.0, 50.0))
def test_capped_allocation_invariants(phi, z, frac, cap):
    total = frac * len(phi) * cap
    t = bcs.capped_allocation(phi=phi, z=z, total=total, cap=cap)
    assert t.sum() == pytest.approx(total, rel=1e-9)
    assert np.all(t >= 0) and np.all(t <= cap * (1 + 1e-12))
    free = t < cap * (1 - 1e-9)
    noise = t**z * np.asarray(phi)
    if free.sum() > 1:
        np.testing.assert_allclose(noise[free], noise[free][0], rtol=1e-9)
    # Capped clients are those that Prop. 1 would have given the most.
    if free.any() and (~free).any():
        w = np.asarray(phi) ** (-1 / z)
        assert w[~free].min() >= w[free].max() * (1 - 1e-9)


@settings(max_examples=25, deadline=None)
@given(phi=phis, z=st.sampled_from([1, 2]), frac=st.floats(0.1, 0.9))
def test_bisection_with_zero_gamma_equals_water_filling(phi, z, frac):
    cap = 10.0
    total = frac * len(phi) * cap
    kkt = bcs.p1_allocation(
        phi=phi, gamma_n=[0.0] * len(phi), omega_a=0.7, omega_b=2.0, z=z, total=total, cap=cap
    )
    water = bcs.capped_allocation(phi=phi, z=z, total=total, cap=cap)
    np.testing.assert_allclose(kkt, water, rtol=1e-7, atol=1e-9)


def test_uncapped_matches_prop1_and_gm_noise_ratio():
    phi = np.array([1.0, 4.0, 0.25, 2.0])
    t = bcs.capped_allocation(phi=phi, z=1, total=40.0, cap=1e6)
    np.testing.assert_allclose(t, bcs.prop1_allocation(phi=phi, z=1, total=40.0))
    # Note 000 §4.2: J_unif / J_BCS = (sum Phi)(sum 1/Phi) / N^2 for GM (z = 1).
    j_bcs = np.sum(t**2 * phi)
    j_unif = np.sum((40.0 / 4) ** 2 * phi)
    assert j_unif / j_bcs == pytest.approx(phi.sum() * (1 / phi).sum() / 16)


def test_high_noniid_client_gets_nothing():
    t = bcs.p1_allocation(
        phi=[1.0, 1.0, 1.0],
        gamma_n=[0.0, 0.0, 100.0],
        omega_a=1.0,
        omega_b=1.0,
        z=1,
        total=6,
        cap=5,
    )
    assert t[2] == pytest.approx(0.0)
    assert t.sum() == pytest.approx(6.0)


def test_round_allocation():
    out = bcs.round_allocation(allocation=[2.6, 2.6, 4.8], total=10, cap=5)
    assert out.tolist() == [3, 2, 5]
    assert out.sum() == 10


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"phi": [1.0, 0.0]}, "phi"),
        ({"total": -1.0}, "total"),
        ({"cap": 1.0}, "cap"),  # N * cap < total
    ],
)
def test_bad_input_raises(kwargs, key):
    base = {"phi": [1.0, 2.0], "z": 1, "total": 5.0, "cap": 10.0}
    with pytest.raises(ScenarioError, match=key):
        bcs.capped_allocation(**(base | kwargs))


def test_bad_mechanism_raises():
    with pytest.raises(ScenarioError, match="mechanism"):
        bcs.noise_exponent("cauchy")
    with pytest.raises(ScenarioError, match="deltas"):
        bcs.noise_factor(mechanism="gaussian", epsilons=[1.0], samples=[1.0])


# ---------------------------------------------------------------- greedy, P1, estimators
def _brute_force(phi, gam, oa, ob, z, total, cap):
    best = None
    for combo in itertools.product(range(cap + 1), repeat=len(phi)):
        if sum(combo) != total:
            continue
        j = bcs.p1_objective(combo, phi=phi, gamma_n=gam, omega_a=oa, omega_b=ob, z=z)
        best = j if best is None else min(best, j)
    return best


@settings(max_examples=30, deadline=None)
@given(
    phi=st.lists(st.floats(0.05, 20.0), min_size=2, max_size=4),
    gam=st.lists(st.floats(0.0, 5.0), min_size=4, max_size=4),
    z=st.sampled_from([1, 2]),
    cap=st.integers(1, 4),
    data=st.data(),
)
def test_greedy_allocation_is_optimal_by_brute_force(phi, gam, z, cap, data):
    gam = gam[: len(phi)]
    total = data.draw(st.integers(0, len(phi) * cap))
    t = bcs.greedy_allocation(
        phi=phi, gamma_n=gam, omega_a=0.3, omega_b=0.7, z=z, total=total, cap=cap
    )
    assert t.sum() == total and np.all((t >= 0) & (t <= cap))
    j = bcs.p1_objective(t, phi=phi, gamma_n=gam, omega_a=0.3, omega_b=0.7, z=z)
    assert j == pytest.approx(_brute_force(phi, gam, 0.3, 0.7, z, total, cap), rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(phi=phis, z=st.sampled_from([1, 2]), frac=st.floats(0.0, 1.0), cap=st.integers(1, 30))
def test_greedy_sum_and_caps(phi, z, frac, cap):
    total = int(frac * len(phi) * cap)
    t = bcs.greedy_allocation(
        phi=phi, gamma_n=[0.1] * len(phi), omega_a=1.0, omega_b=1.0, z=z, total=total, cap=cap
    )
    assert t.sum() == total and t.min() >= 0 and t.max() <= cap


def test_greedy_close_to_relaxed_kkt():
    phi = np.array([0.5, 1.0, 2.0, 4.0, 0.1])
    gam = np.array([0.0, 1.0, 0.5, 0.0, 2.0])
    kw = {"phi": phi, "gamma_n": gam, "omega_a": 0.05, "omega_b": 0.2, "z": 1}
    t_int = bcs.greedy_allocation(**kw, total=60, cap=20)
    t_rel = bcs.p1_allocation(**kw, total=60, cap=20)
    assert np.max(np.abs(t_int - t_rel)) < 1.0 + 1e-9


def test_greedy_infeasible_caps_raise():
    with pytest.raises(ScenarioError, match="total"):
        bcs.greedy_allocation(
            phi=[1.0, 1.0], gamma_n=[0, 0], omega_a=1, omega_b=1, z=1, total=7, cap=3
        )


def test_p1_weights_ratio():
    # note 000 §4.1: Omega_B / Omega_A = K (L + 3/8 mu (gamma + T)) / Lambda
    oa, ob = bcs.p1_weights(smoothness=2.0, strong_convexity=0.5, gamma=4.0, k=5, rounds=20, lam=3)
    assert ob / oa == pytest.approx(5 * (2.0 + 3 / 8 * 0.5 * 24) / 3)


def test_noise_constant():
    assert bcs.noise_constant(mechanism="gaussian", clip=2.0, dim=10, c2=1.5) == 4 * 4 * 10 * 2.25
    assert bcs.noise_constant(mechanism="laplace", clip=2.0, dim=10) == 8 * 10 * 4


def test_estimate_noniid_eq8_clip_and_fill():
    reports = {0: [(2.0, 1.5), (1.0, 0.9)], 2: [(9.0, -3.0)]}
    g = bcs.estimate_noniid(reports, num_clients=4, loss_bound=2.0)
    # client 0: min(|2-1.5|, |1-0.9|) = 0.1; client 2: clip -> |2 - 0| = 2; others: mean 1.05
    np.testing.assert_allclose(g, [0.1, 1.05, 2.0, 1.05])


def test_rho_min_is_one_for_equal_losses():
    rho = bcs.estimate_rho_min(counts=[3, 0, 5, 1], last_losses={0: 1.2, 2: 1.2}, k=3, loss_bound=3)
    assert rho == pytest.approx(1.0)
    # unequal: F_bar = 1.5, F = [1, 1.5, 2, 1.5]; sum C F / (sum C * F_bar)
    rho = bcs.estimate_rho_min(counts=[3, 0, 5, 1], last_losses={0: 1.0, 2: 2.0}, k=3, loss_bound=3)
    assert rho == pytest.approx((3 * 1 + 5 * 2 + 1.5) / (9 * 1.5))


def test_fit_p2_reaches_observed_loss_and_is_seeded():
    kw = {
        "observed_loss": 1.7, "t0": 10, "k": 4, "counts": [9, 9, 9, 9], "phi": [0.1] * 4,
        "gamma_hat": [0.05] * 4, "rho_min": 1.0, "lam": 50.0, "z": 1,
    }  # fmt: skip
    a = bcs.fit_p2(**kw, restarts=2, rng=np.random.default_rng(1))
    b = bcs.fit_p2(**kw, restarts=2, rng=np.random.default_rng(1))
    assert a == b
    assert a.residual < 1e-4 and a.smoothness > a.strong_convexity > 0
    assert not a.at_bound
    # a loss the model cannot reach (below 0) drives gamma to the optimiser's box: flagged
    lost = bcs.fit_p2(**(kw | {"observed_loss": -5.0}))
    assert lost.at_bound and lost.gamma > 1e8
    x = (a.initial_distance_sq, a.gamma, a.sigma_sq, a.smoothness, a.strong_convexity)
    model = bcs_estimate.p2_model(x, **{k: v for k, v in kw.items() if k != "observed_loss"})
    assert model == pytest.approx(1.7, abs=1e-3)
