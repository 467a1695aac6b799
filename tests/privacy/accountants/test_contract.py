"""Contract of every registered accountant: behaviour, not just the presence of methods."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame import registry
from fedgame.privacy.accountants import Accountant, make_accountant, within
from fedgame.privacy.accountants.base import NOISE_FAMILIES
from fedgame.privacy.base import Charge, Charges

NAMES = registry.names("accountant")


def release(noise: str, z: float, *, delta: float = 1e-6) -> Charge:
    q = 0.1 if noise == "subsampled_gaussian" else 1.0
    return Charge(noise, z, sample_rate=q, steps=2, delta=delta)  # type: ignore[arg-type]


def fresh(name: str, n: int = 3, delta: float = 1e-5) -> Accountant:
    acc = make_accountant(name)
    acc.start(np.full(n, delta))
    return acc


def test_at_least_the_four_builtin_accountants_are_registered() -> None:
    assert {"basic", "pld", "rdp", "zcdp"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_is_an_accountant_and_describes_what_it_can_charge(name: str) -> None:
    acc = fresh(name)
    assert isinstance(acc, Accountant)
    for noise in NOISE_FAMILIES:
        one = Charges.of([release(noise, 2.0)])
        if acc.describes(noise):
            acc.charge(np.array([0]), one)
            assert 0.0 < acc.epsilon(np.array([0]))[0] < math.inf
        else:
            with pytest.raises(ValueError, match="cannot describe"):
                acc.charge(np.array([1]), one)
            assert acc.epsilon(np.array([1]))[0] == 0.0


@pytest.mark.parametrize("name", NAMES)
def test_epsilon_if_predicts_charging_and_records_nothing(name: str) -> None:
    acc = fresh(name)
    noise = "gaussian"
    ids = np.array([2, 0, 2])  # client 2 releases twice in the round
    charges = Charges.of([release(noise, 3.0), release(noise, 2.0), release(noise, 1.5)])
    before = acc.epsilon()
    predicted = acc.epsilon_if(ids, charges)
    np.testing.assert_array_equal(acc.epsilon(), before)
    assert predicted[2] > predicted[0] > 0  # the second release of client 2 adds to its first
    acc.charge(ids, charges)
    np.testing.assert_allclose(acc.epsilon(np.array([0, 2])), predicted[[1, 2]], rtol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_free_releases_cost_nothing_and_no_noise_costs_everything(name: str) -> None:
    acc = fresh(name)
    acc.charge(np.array([0, 1]), Charges("none", size=2))
    assert np.all(acc.epsilon() == 0.0)
    free_z = Charges("gaussian", noise_multiplier=0.0, delta=1e-6)
    assert acc.epsilon_if(np.array([1]), free_z)[0] == math.inf


@pytest.mark.parametrize("name", NAMES)
def test_impossible_releases_are_refused(name: str) -> None:
    acc = fresh(name)
    for bad in (
        Charges("gaussian", noise_multiplier=-1.0, size=1),
        Charges("subsampled_gaussian", noise_multiplier=1.0, sample_rate=1.5, size=1),
        Charges("gaussian", noise_multiplier=1.0, steps=-1, size=1),
        Charges("uniform", noise_multiplier=1.0, size=1),
    ):
        with pytest.raises(ValueError):
            acc.epsilon_if(np.array([0]), bad)


@settings(max_examples=15)
@given(
    name=st.sampled_from(NAMES),
    zs=st.lists(st.floats(0.6, 20.0), min_size=1, max_size=5),
    bump=st.floats(1.05, 3.0),
)
def test_spent_never_decreases_and_more_noise_costs_less(name, zs, bump) -> None:
    less, more = fresh(name, 1), fresh(name, 1)
    prev = 0.0
    for z in zs:
        less.charge(np.array([0]), Charges.of([release("gaussian", z)]))
        more.charge(np.array([0]), Charges.of([release("gaussian", z * bump)]))
        now = float(less.epsilon()[0])
        assert now >= prev - 1e-12
        prev = now
        assert float(more.epsilon()[0]) < now


DESCRIBED = [(n, f) for n in NAMES for f in NOISE_FAMILIES if make_accountant(n).describes(f)]


@pytest.mark.parametrize(("name", "noise"), DESCRIBED)
def test_calibrated_noise_fits_exactly_the_planned_releases(name: str, noise: str) -> None:
    acc = fresh(name, 1, delta=1e-5)
    releases, eps = 5, 2.0
    template = release(noise, 1.0, delta=1e-5 / releases)
    z = acc.calibrate(epsilon=eps, delta=1e-5, releases=releases, template=template)
    step = Charges.of([Charge(noise, z, template.sample_rate, template.steps, template.delta)])
    for _ in range(releases):  # every planned release is admitted ...
        assert within(acc.epsilon_if(np.array([0]), step), np.array([eps]))[0]
        acc.charge(np.array([0]), step)
    assert not within(acc.epsilon_if(np.array([0]), step), np.array([eps]))[0]  # ... no more
    tighter = acc.composed_epsilon(
        Charge(noise, z * 0.99, template.sample_rate, template.steps, template.delta),
        count=releases,
        delta=1e-5,
    )
    assert tighter > eps  # and the noise is not larger than it needs to be (1%)


def test_the_numbers_of_a_release_are_keyword_only():
    """A multiplier passed where a sample rate was meant cannot happen silently."""
    from fedgame.privacy.accountants.pld import event_pld
    from fedgame.privacy.accountants.rdp import DEFAULT_ORDERS, event_rdp
    from fedgame.privacy.base import release_event

    with pytest.raises(TypeError):
        Charges("gaussian", 1.0)  # type: ignore[misc]
    with pytest.raises(TypeError):
        release_event("gaussian", 1.0, 1.0, 1)  # type: ignore[misc]
    with pytest.raises(TypeError):
        event_rdp("gaussian", 1.0, 1.0, DEFAULT_ORDERS)  # type: ignore[misc]
    with pytest.raises(TypeError):
        event_pld("gaussian", 1.0, 1.0, 1, 1e-3)  # type: ignore[misc]
    assert len(Charges("gaussian", noise_multiplier=1.0, sample_rate=0.5, steps=3)) == 1
