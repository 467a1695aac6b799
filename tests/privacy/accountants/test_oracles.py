"""Each accountant against an independent computation: a fresh dp_accounting composition,
the closed forms of Bun & Steinke, or the exact Gaussian privacy profile."""

from __future__ import annotations

import math

import dp_accounting as dpa
import numpy as np
import pytest
from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.accountants.rdp import DEFAULT_ORDERS, rdp_to_epsilon
from fedgame.privacy.base import Charge, Charges
from fedgame.privacy.calibrate import analytic_gaussian_epsilon

EVENTS = [
    (Charge("gaussian", 1.3, steps=1), dpa.GaussianDpEvent(1.3)),
    (Charge("gaussian", 2.0, steps=4), dpa.SelfComposedDpEvent(dpa.GaussianDpEvent(2.0), 4)),
    (
        Charge("subsampled_gaussian", 1.1, sample_rate=0.05, steps=30),
        dpa.SelfComposedDpEvent(dpa.PoissonSampledDpEvent(0.05, dpa.GaussianDpEvent(1.1)), 30),
    ),
    (Charge("laplace", 0.8, steps=2), dpa.SelfComposedDpEvent(dpa.LaplaceDpEvent(0.8), 2)),
]


@pytest.mark.parametrize(("charge", "event"), EVENTS)
def test_rdp_equals_a_fresh_dp_accounting_rdp_accountant(charge, event) -> None:
    acc = make_accountant("rdp")
    acc.start(np.array([1e-5, 1e-6]))
    acc.charge(np.array([0, 0, 1]), Charges.of([charge, charge, charge]))
    oracle = dpa.rdp.RdpAccountant()
    oracle.compose(event, count=2)
    assert acc.epsilon(np.array([0]))[0] == pytest.approx(oracle.get_epsilon(1e-5), rel=1e-9)
    assert charge.event() == event


@pytest.mark.parametrize(("charge", "event"), EVENTS)
def test_pld_equals_a_fresh_dp_accounting_pld_accountant(charge, event) -> None:
    acc = make_accountant("pld")
    acc.start(np.array([1e-5]))
    acc.charge(np.array([0, 0]), Charges.of([charge, charge]))
    oracle = dpa.pld.PLDAccountant(value_discretization_interval=1e-4)
    oracle.compose(event, count=2)
    assert acc.epsilon()[0] == pytest.approx(oracle.get_epsilon(1e-5), rel=2e-3)


def test_pld_is_tighter_than_rdp_for_the_same_releases() -> None:
    charges = Charges.of([EVENTS[2][0]] * 3)
    eps = {}
    for name in ("rdp", "pld"):
        acc = make_accountant(name)
        acc.start(np.array([1e-5]))
        acc.charge(np.zeros(3, dtype=np.int64), charges)
        eps[name] = acc.epsilon()[0]
    assert eps["pld"] < eps["rdp"] < 1.3 * eps["pld"]


@settings(max_examples=40)
@given(
    rdp=st.lists(
        st.floats(0.0, 50.0),
        min_size=len(rdp_lib.DEFAULT_RDP_ORDERS),
        max_size=len(rdp_lib.DEFAULT_RDP_ORDERS),
    ),
    delta=st.floats(1e-12, 0.5),
)
def test_vectorised_conversion_equals_dp_accounting(rdp: list[float], delta: float) -> None:
    orders = np.array(rdp_lib.DEFAULT_RDP_ORDERS, dtype=float)
    ours = rdp_to_epsilon(orders, np.array([rdp]), delta)[0]
    theirs, _ = rdp_lib.compute_epsilon(orders, np.array(rdp), delta)
    assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-12)


def test_zcdp_worked_by_hand() -> None:
    # two Gaussian releases of z = 1: rho = 2 * 1/(2 z^2) = 1 (Bun & Steinke Prop. 1.6)
    # eps(delta = 1e-5) = rho + 2 sqrt(rho ln(1e5)) = 1 + 2 sqrt(11.5129...) = 7.78614 (Prop 1.3)
    acc = make_accountant("zcdp")
    acc.start(np.array([1e-5]))
    acc.charge(np.array([0, 0]), Charges("gaussian", noise_multiplier=1.0, size=2))
    assert acc.epsilon()[0] == pytest.approx(1 + 2 * math.sqrt(math.log(1e5)), rel=1e-12)
    # a 0.5-DP Laplace release is (0.5^2 / 2)-zCDP (Prop. 1.4)
    acc.charge(np.array([0]), Charges("laplace", noise_multiplier=2.0, size=1))
    assert acc.rho()[0] == pytest.approx(1.125)


def test_basic_composition_adds_exact_release_epsilons_until_delta_runs_out() -> None:
    acc = make_accountant("basic")
    acc.start(np.array([1e-5]))
    gauss = Charge("gaussian", 2.0, steps=4, delta=4e-6)  # 4 steps of z = 2 are one z = 1
    lap = Charge("laplace", 0.5, steps=1)  # 2-DP, no delta
    acc.charge(np.array([0, 0]), Charges.of([gauss, lap]))
    exact = float(analytic_gaussian_epsilon(noise_multiplier=1.0, delta=4e-6))
    assert acc.epsilon()[0] == pytest.approx(exact + 2.0, rel=1e-12)
    acc.charge(np.array([0]), Charges.of([gauss]))  # delta spent 8e-6 <= 1e-5
    assert math.isfinite(acc.epsilon()[0])
    acc.charge(np.array([0]), Charges.of([gauss]))  # 1.2e-5 > 1e-5: no guarantee left
    assert acc.epsilon()[0] == math.inf


def test_an_accountant_that_cannot_describe_a_release_is_refused_naming_who_can() -> None:
    with pytest.raises(ScenarioError, match="accountants that can: pld, rdp") as err:
        check_describes("zcdp", "subsampled_gaussian")
    assert err.value.key == "privacy.accountant"
    with pytest.raises(ScenarioError, match="allowed accountant kinds"):
        check_describes("moments", "gaussian")


def test_default_orders_are_dp_accountings() -> None:
    assert list(DEFAULT_ORDERS) == list(rdp_lib.DEFAULT_RDP_ORDERS)
    assert make_accountant("rdp").orders.tolist() == list(rdp_lib.DEFAULT_RDP_ORDERS)
