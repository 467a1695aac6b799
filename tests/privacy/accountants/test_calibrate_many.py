"""``calibrate_many``: several ε targets on one curve, never under-reporting, near the smallest z.

The pld accountant searches a coarse PLD and checks the answer on its own one; these tests hold
every answer to the accountant's own ``composed_epsilon``: it meets the target, and
z / (1 + ``calibration_minimal_rtol``) does not.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgame.privacy.accountants import make_accountant
from fedgame.privacy.accountants.base import search_noise
from fedgame.privacy.accountants.pld import PldAccountant
from fedgame.privacy.base import Charge


def _eps(acc, template: Charge, z: float, *, releases: int, delta: float) -> float:
    return acc.composed_epsilon(replace(template, noise_multiplier=z), count=releases, delta=delta)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    targets=st.lists(st.floats(0.5, 8.0), min_size=1, max_size=2),
    q=st.floats(0.02, 0.6),
    steps=st.integers(1, 4),
    releases=st.integers(1, 3),
    delta=st.floats(1e-7, 1e-4),
)
def test_pld_answers_meet_each_target_and_are_nearly_the_smallest(
    targets: list[float], q: float, steps: int, releases: int, delta: float
) -> None:
    acc = PldAccountant(PldAccountant.Config(value_discretization_interval=1e-3))
    template = Charge("subsampled_gaussian", sample_rate=q, steps=steps)
    zs = acc.calibrate_many(epsilons=targets, delta=delta, releases=releases, template=template)
    assert zs.shape == (len(targets),)
    slack = 1.0 + acc.calibration_minimal_rtol
    for eps, z in zip(targets, zs.tolist()):
        assert _eps(acc, template, z, releases=releases, delta=delta) <= eps
        assert _eps(acc, template, z / slack, releases=releases, delta=delta) > eps
        plain = search_noise(  # the target-by-target search on the accountant's own curve
            lambda x: _eps(acc, template, x, releases=releases, delta=delta),
            epsilon=eps,
            rtol=acc.calibration_rtol,
        )
        assert z == pytest.approx(plain, rel=acc.calibration_minimal_rtol)


@pytest.mark.parametrize("name", ["rdp", "zcdp", "pld"])
def test_calibrate_many_equals_calibrate_per_target(name: str) -> None:
    noise = "gaussian" if name == "zcdp" else "subsampled_gaussian"
    template = Charge(noise, sample_rate=0.25 if noise != "gaussian" else 1.0, steps=3)
    targets = [6.0, 1.5, 3.0, 1.5]
    many = make_accountant(name)
    if name == "pld":
        many = PldAccountant(PldAccountant.Config(value_discretization_interval=1e-3))
    zs = many.calibrate_many(epsilons=targets, delta=1e-5, releases=2, template=template)
    assert zs[1] == zs[3]  # one answer per distinct target
    assert np.all(np.diff(zs[[0, 2, 1]]) > 0)  # a looser target needs less noise
    for eps, z in zip(targets, zs.tolist()):
        one = type(many)() if name != "pld" else PldAccountant(many.config)
        single = one.calibrate(epsilon=eps, delta=1e-5, releases=2, template=template)
        if name == "pld":  # searched from another start: the same crossing, to rtol
            assert z == pytest.approx(single, rel=many.calibration_minimal_rtol)
        else:  # the same search, target by target
            assert z == single
        assert many.calibrate(epsilon=eps, delta=1e-5, releases=2, template=template) == z


def test_progress_counts_the_distinct_targets_solved() -> None:
    acc = make_accountant("rdp")
    template = Charge("subsampled_gaussian", sample_rate=0.1, steps=2)
    seen: list[tuple[int, int]] = []
    acc.calibrate_many(
        epsilons=[1.0, 2.0, 1.0, 4.0],
        delta=1e-5,
        releases=3,
        template=template,
        progress=lambda done, total: seen.append((done, total)),
    )
    assert seen == [(1, 3), (2, 3), (3, 3)]
    seen.clear()
    acc.calibrate_many(  # cached: nothing to solve, nothing reported
        epsilons=[2.0],
        delta=1e-5,
        releases=3,
        template=template,
        progress=lambda *a: seen.append(a),
    )
    assert seen == []


def test_pld_default_interval_answer_is_checked_on_its_own_pld() -> None:
    """At the shipped 1e-3 interval: the answer meets ε on that PLD and is nearly the smallest."""
    acc = PldAccountant()
    template = Charge("subsampled_gaussian", sample_rate=0.5, steps=2)
    (z,) = acc.calibrate_many(epsilons=[3.0], delta=1e-5, releases=1, template=template)
    assert _eps(acc, template, z, releases=1, delta=1e-5) <= 3.0
    assert _eps(acc, template, z / (1 + acc.calibration_minimal_rtol), releases=1, delta=1e-5) > 3.0


@settings(max_examples=200, deadline=None)
@given(
    scale=st.floats(1e-3, 1e3),
    power=st.floats(0.3, 3.0),
    epsilon=st.floats(1e-2, 50.0),
    start=st.floats(1e-3, 1e3),
    factor=st.floats(1.001, 8.0),
)
def test_a_warm_start_finds_the_same_crossing(
    scale: float, power: float, epsilon: float, start: float, factor: float
) -> None:
    """``search_noise`` from any start and bracket factor: meets ε, within rtol of the crossing."""

    def composed(z: float) -> float:
        return scale / z**power

    rtol = 1e-4
    z = search_noise(composed, epsilon=epsilon, rtol=rtol, start=start, factor=factor)
    assert composed(z) <= epsilon
    assert composed(z / (1 + 2 * rtol)) > epsilon
