"""The analytic Gaussian mechanism (Balle & Wang 2018): exact calibration for every ε."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import integrate, stats

from fedgame.privacy.calibrate import (
    analytic_gaussian_delta,
    analytic_gaussian_epsilon,
    analytic_gaussian_multipliers,
    analytic_gaussian_sigma,
    classic_gaussian_sigma,
)


def numeric_profile_delta(epsilon: float, z: float) -> float:
    """δ(ε) = E[(1 − e^{ε − L})₊] with the privacy loss L ~ N(μ, 2μ), μ = 1/(2z²),
    integrated numerically (Balle & Wang 2018, Lemma 3 / Thm 5): independent of Thm 8."""
    mu = 1.0 / (2.0 * z * z)
    sd = math.sqrt(2.0 * mu)
    integrand = lambda x: (1.0 - math.exp(epsilon - x)) * stats.norm.pdf(x, mu, sd)  # noqa: E731
    value, _ = integrate.quad(integrand, epsilon, mu + 40 * sd, limit=200, epsabs=1e-15)
    return value


@pytest.mark.parametrize(
    ("epsilon", "delta", "z"),
    [
        (1.0, 1e-5, 3.7306),  # the value Balle & Wang contrast with the classic 4.8448
        (0.5, 1e-5, 7.0318),
        (2.0, 1e-5, 1.9938),
        (9.0, 1e-5, 0.5447),
    ],
)
def test_worked_values(epsilon: float, delta: float, z: float) -> None:
    assert analytic_gaussian_sigma(epsilon=epsilon, delta=delta) == pytest.approx(z, abs=1e-4)
    assert classic_gaussian_sigma(sensitivity=1, epsilon=1.0, delta=1e-5) == pytest.approx(
        4.8448, abs=1e-4
    )


@settings(max_examples=25)
@given(z=st.floats(0.3, 20.0), epsilon=st.floats(0.05, 12.0))
def test_closed_form_profile_equals_numeric_integral(z: float, epsilon: float) -> None:
    exact = float(analytic_gaussian_delta(epsilon=epsilon, noise_multiplier=z))
    assert exact == pytest.approx(numeric_profile_delta(epsilon, z), rel=1e-6, abs=1e-14)


@settings(max_examples=20)
@given(z=st.floats(0.4, 10.0), delta=st.sampled_from([1e-3, 1e-5, 1e-7]))
def test_epsilon_matches_the_pld_of_the_gaussian_and_is_never_below_it(z, delta) -> None:
    ours = float(analytic_gaussian_epsilon(noise_multiplier=z, delta=delta))
    pld = pld_lib.from_gaussian_mechanism(z, value_discretization_interval=1e-4)
    assert ours == pytest.approx(pld.get_epsilon_for_delta(delta), rel=1e-3)
    assert analytic_gaussian_delta(epsilon=ours, noise_multiplier=z) <= delta


@settings(max_examples=30)
@given(epsilon=st.floats(0.01, 50.0), delta=st.floats(1e-12, 0.1))
def test_sigma_meets_the_target_and_is_tight(epsilon: float, delta: float) -> None:
    z = analytic_gaussian_sigma(epsilon=epsilon, delta=delta)
    assert analytic_gaussian_delta(epsilon=epsilon, noise_multiplier=z) <= delta
    assert analytic_gaussian_delta(epsilon=epsilon, noise_multiplier=z * (1 - 1e-6)) > delta
    assert analytic_gaussian_multipliers(np.array([epsilon]), np.array([delta]))[0] == z


def test_classic_bound_is_conservative_below_one_and_fails_for_large_epsilon() -> None:
    for eps in (0.1, 0.5, 0.99):
        assert classic_gaussian_sigma(sensitivity=1, epsilon=eps, delta=1e-5) > (
            analytic_gaussian_sigma(epsilon=eps, delta=1e-5)
        )
    # at epsilon = 20 the classic sigma is not even (20, 1e-5)-DP: the real epsilon is ~25
    loose = classic_gaussian_sigma(sensitivity=1, epsilon=20.0, delta=1e-5)
    assert analytic_gaussian_epsilon(noise_multiplier=loose, delta=1e-5) > 24.0


def test_edges_no_noise_infinite_noise_and_loose_delta() -> None:
    out = analytic_gaussian_epsilon(noise_multiplier=np.array([0.0, np.inf, 1.0]), delta=0.9)
    assert out[0] == math.inf and out[1] == 0.0 and out[2] == 0.0
