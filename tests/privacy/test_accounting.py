"""Per-client accountants: oracle checks against dp_accounting, properties, refusals."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import dp_accounting as dpa
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame import registry
from fedgame.errors import ScenarioError
from fedgame.privacy.accounting import (
    Accountant,
    BasicAccountant,
    PldAccountant,
    RdpAccountant,
    ZcdpAccountant,
    check_supported,
)
from fedgame.privacy.calibrate import accountant_sigma, zcdp_to_epsilon
from fedgame.privacy.rdp_ledger import BatchRdpLedger, rdp_to_epsilon

DELTA = 1e-5


def _event(z: float, q: float) -> dpa.DpEvent:
    gauss = dpa.GaussianDpEvent(z)
    return gauss if q == 1.0 else dpa.PoissonSampledDpEvent(q, gauss)


@pytest.mark.parametrize(("z", "q", "steps"), [(1.0, 1.0, 10), (1.5, 0.05, 40)])
def test_pld_below_and_close_to_rdp(z: float, q: float, steps: int) -> None:
    rdp, pld = (
        RdpAccountant(),
        PldAccountant(PldAccountant.Config(value_discretization_interval=1e-3)),
    )
    for acc in (rdp, pld):
        acc.step(noise_multiplier=z, sample_rate=q, steps=steps)
    eps_rdp, eps_pld = rdp.epsilon(delta=DELTA), pld.epsilon(delta=DELTA)
    assert eps_pld <= eps_rdp
    assert eps_pld >= 0.6 * eps_rdp


def test_pld_matches_dp_accounting_pld_accountant() -> None:
    ours = PldAccountant(PldAccountant.Config(value_discretization_interval=1e-3))
    theirs = dpa.pld.PLDAccountant(value_discretization_interval=1e-3)
    for z, q, steps in [(2.0, 1.0, 3), (1.2, 0.1, 5), (3.0, 1.0, 1)]:
        ours.step(noise_multiplier=z, sample_rate=q, steps=steps)
        theirs.compose(_event(z, q), steps)
    assert ours.epsilon(delta=DELTA) == pytest.approx(theirs.get_epsilon(DELTA), abs=1e-9)


SCHEDULE = [  # (client, noise multiplier, sample rate, steps)
    (0, 1.1, 1.0, 3),
    (1, 0.8, 1.0, 1),
    (2, 2.0, 0.1, 5),
    (0, 2.0, 0.1, 2),
    (3, 5.0, 1.0, 10),
    (1, 1.1, 1.0, 4),
]


def test_batch_ledger_equals_fresh_dp_accounting_composition() -> None:
    ledger = BatchRdpLedger(5)
    oracles = [dpa.rdp.RdpAccountant() for _ in range(5)]
    for client, z, q, steps in SCHEDULE:
        ledger.charge([client], noise_multiplier=z, sample_rate=q, steps=steps)
        oracles[client].compose(_event(z, q), steps)
    for delta in (1e-3, 1e-5, 1e-8):
        expected = [acc.get_epsilon(delta) for acc in oracles]
        np.testing.assert_allclose(ledger.epsilons(delta=delta), expected, rtol=0, atol=1e-9)
    assert ledger.epsilons(delta=DELTA)[4] == 0.0  # never charged


def test_batch_charge_with_per_client_noise_equals_one_by_one() -> None:
    batch, single = BatchRdpLedger(4), BatchRdpLedger(4)
    z, q, steps = np.array([1.0, 2.0, 1.0, 3.0]), np.array([1.0, 1.0, 1.0, 0.5]), [1, 2, 3, 0]
    batch.charge([0, 1, 2, 3], noise_multiplier=z, sample_rate=q, steps=steps)
    for i in range(4):
        single.charge([i], noise_multiplier=z[i], sample_rate=q[i], steps=steps[i])
    np.testing.assert_allclose(batch.rdp, single.rdp, rtol=1e-15)
    assert np.all(batch.rdp[3] == 0.0)


@settings(max_examples=40, deadline=None)
@given(
    rdp=st.lists(
        st.one_of(st.floats(0, 50), st.just(0.0), st.just(math.inf), st.floats(-1e-3, 0)),
        min_size=6,
        max_size=6,
    ),
    delta=st.one_of(st.floats(1e-12, 0.5), st.just(0.0)),
)
def test_vectorised_conversion_equals_dp_accounting(rdp: list[float], delta: float) -> None:
    orders = [1.005, 1.5, 2.0, 8.0, 64.0, 1024.0]
    expected = dpa.rdp.compute_epsilon(orders, rdp, delta)[0]
    got = rdp_to_epsilon(np.array(orders), np.array(rdp), delta)
    assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_views_share_the_ledger_and_standalone_agrees() -> None:
    ledger = BatchRdpLedger(3)
    views = RdpAccountant.views(ledger)
    views[1].step(noise_multiplier=1.3, steps=7)
    alone = RdpAccountant()
    alone.step(noise_multiplier=1.3, steps=7)
    assert ledger.epsilons(delta=DELTA)[1] == alone.epsilon(delta=DELTA) > 0
    assert views[0].epsilon(delta=DELTA) == 0.0
    np.testing.assert_array_equal(views[1].rdp, alone.rdp)


def test_epsilon_if_does_not_mutate_and_predicts_the_step() -> None:
    for acc in (RdpAccountant(), ZcdpAccountant(), BasicAccountant()):
        acc.step(noise_multiplier=2.0, steps=3)
        before = acc.epsilon(delta=DELTA)
        predicted = acc.epsilon_if(delta=DELTA, noise_multiplier=1.5, steps=2)
        assert acc.epsilon(delta=DELTA) == before
        acc.step(noise_multiplier=1.5, steps=2)
        assert acc.epsilon(delta=DELTA) == pytest.approx(predicted, rel=1e-12)
        assert predicted > before


def test_would_exceed_stops_at_the_calibrated_number_of_steps() -> None:
    steps = 12
    z = accountant_sigma(epsilon=1.0, delta=DELTA, steps=steps)
    ledger = BatchRdpLedger(2)
    acc = RdpAccountant(ledger=ledger, index=0)
    for _ in range(steps):
        assert not acc.would_exceed(epsilon_total=1.0, delta=DELTA, noise_multiplier=z)
        acc.step(noise_multiplier=z)
    assert acc.would_exceed(epsilon_total=1.0, delta=DELTA, noise_multiplier=z)
    flags = ledger.would_exceed([0, 1], epsilon_total=1.0, delta=DELTA, noise_multiplier=z)
    assert flags.tolist() == [True, False]


def test_basic_budget_of_ten_tenths_fits_exactly() -> None:
    acc = BasicAccountant()
    for _ in range(10):
        assert not acc.would_exceed(
            epsilon_total=1.0, delta=1e-5, epsilon_step=0.1, delta_step=1e-6
        )
        acc.step_epsilon(epsilon=0.1, delta=1e-6)
    assert acc.epsilon(delta=1e-5) == pytest.approx(1.0)
    assert acc.would_exceed(epsilon_total=1.0, delta=1e-5, epsilon_step=0.1)
    assert acc.epsilon(delta=1e-6) == math.inf  # summed delta 1e-5 does not fit in 1e-6


def test_basic_laplace_step_charges_one_over_z() -> None:
    acc = BasicAccountant()
    acc.step(noise_multiplier=4.0, steps=3)  # scale b = 4 * Delta_1 -> eps = 1/4 per release
    assert acc.epsilon(delta=0.0) == pytest.approx(0.75)


def test_zcdp_worked_by_hand() -> None:
    acc = ZcdpAccountant()
    acc.step(noise_multiplier=2.0, steps=8)  # rho = 8 / (2 * 4) = 1
    assert acc.rho == pytest.approx(1.0)
    acc.step_rho(rho=0.5)
    # 1.5 + 2 sqrt(1.5 * 11.51292546) = 1.5 + 2 * sqrt(17.26938820) = 1.5 + 2 * 4.15564534
    assert acc.epsilon(delta=DELTA) == pytest.approx(9.81129068, rel=1e-8)
    assert acc.epsilon_if(delta=DELTA, rho=0.5) == pytest.approx(zcdp_to_epsilon(2.0, delta=DELTA))


def test_zcdp_conversion_is_looser_than_rdp_for_the_same_gaussian() -> None:
    rdp, zcdp = RdpAccountant(), ZcdpAccountant()
    for acc in (rdp, zcdp):
        acc.step(noise_multiplier=3.0, steps=20)
    assert rdp.epsilon(delta=DELTA) < zcdp.epsilon(delta=DELTA)


def test_no_noise_is_infinite_and_no_sampling_is_free() -> None:
    for acc in (RdpAccountant(), PldAccountant(), ZcdpAccountant(), BasicAccountant()):
        acc.step(noise_multiplier=1.0, sample_rate=0.0, steps=5)
        assert acc.epsilon(delta=DELTA) == 0.0
        acc.step(noise_multiplier=0.0)
        assert acc.epsilon(delta=DELTA) == math.inf


def test_impossible_charges_are_refused() -> None:
    with pytest.raises(ValueError):
        RdpAccountant().step(noise_multiplier=-1.0)
    with pytest.raises(ValueError):
        ZcdpAccountant().step(noise_multiplier=1.0, sample_rate=1.5)
    with pytest.raises(ValueError):
        BatchRdpLedger(2).charge([0], noise_multiplier=1.0, steps=1.5)


def _coarse_pld() -> PldAccountant:
    return PldAccountant(PldAccountant.Config(value_discretization_interval=1e-3))


def _epsilon_after(cls: Callable[[], Any], z: float, q: float, steps: int) -> float:
    acc = cls()
    acc.step(noise_multiplier=z, sample_rate=q, steps=steps)
    return acc.epsilon(delta=DELTA)


@settings(max_examples=25, deadline=None)
@given(
    cls=st.sampled_from([RdpAccountant, ZcdpAccountant, BasicAccountant]),
    z=st.floats(0.5, 20),
    factor=st.floats(1.05, 4),
    steps=st.integers(1, 50),
    extra=st.integers(1, 50),
)
def test_epsilon_grows_with_steps_and_falls_with_noise(
    cls: type, z: float, factor: float, steps: int, extra: int
) -> None:
    base = _epsilon_after(cls, z, 1.0, steps)
    assert _epsilon_after(cls, z, 1.0, steps + extra) >= base
    assert _epsilon_after(cls, z * factor, 1.0, steps) <= base
    if base > 0:
        assert _epsilon_after(cls, z * factor, 1.0, steps) < base


@settings(max_examples=5, deadline=None)
@given(z=st.sampled_from([0.9, 1.4]), steps=st.integers(1, 6))
def test_pld_epsilon_monotone(z: float, steps: int) -> None:
    eps = [_epsilon_after(_coarse_pld, z * f, 1.0, s) for f, s in [(1, steps), (1, steps + 2)]]
    assert eps[1] >= eps[0]
    assert _epsilon_after(_coarse_pld, z * 2, 1.0, steps) < eps[0]


def test_check_supported_refusals_list_alternatives() -> None:
    check_supported("rdp", "subsampled_gaussian")
    check_supported("basic", "laplace")
    check_supported("rdp", "none")
    with pytest.raises(ScenarioError) as err:
        check_supported("rdp", "laplace")
    assert err.value.key == "privacy.accountant"
    assert "basic" in err.value.allowed and "pld" not in err.value.allowed
    with pytest.raises(ScenarioError) as err:
        check_supported("zcdp", "subsampled_gaussian")
    assert "pld, rdp" in err.value.allowed
    with pytest.raises(ScenarioError, match=r"privacy\.accountant"):
        check_supported("moments", "gaussian")


def test_registered_plugins_follow_the_contract() -> None:
    for name in ("rdp", "pld", "zcdp", "basic"):
        acc = registry.create("accountant", name)
        assert isinstance(acc, Accountant)
        assert acc.supports("gaussian")
    custom = registry.create("accountant", "rdp", {"orders": [2, 4, 8]})
    assert custom.rdp.shape == (3,)
    with pytest.raises(ScenarioError, match="orders"):
        registry.create("accountant", "rdp", {"orders": [0.5, 2]})
    with pytest.raises(ScenarioError, match="sigma"):
        registry.create("accountant", "zcdp", {"sigma": 1.0})
