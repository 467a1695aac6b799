"""Tests for fedgame.game.bcs: Prop. 1 of paper 000 and its capped / KKT generalisations."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.game import bcs

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
