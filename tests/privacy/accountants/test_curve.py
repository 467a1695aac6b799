"""Calibrating many targets on one curve: each answer confirmed on the accountant's own curve.

``solve_on_curve`` shapes the curve from a cheap coarse one and needs about one evaluation of
the costly curve per target; whatever it does, an answer is returned only where the costly
curve confirms it, and it falls back (None) where the coarse curve cannot be trusted.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.privacy.accountants import pld as pld_module
from fedgame.privacy.accountants.curve import WINDOW, solve_on_curve
from fedgame.privacy.accountants.pld import PldAccountant, event_pld
from fedgame.privacy.base import Charge


@settings(max_examples=60, deadline=None)
@given(
    scale=st.floats(0.05, 50.0),
    power=st.floats(0.8, 2.5),
    bias=st.floats(0.0, 0.05),
    tilt=st.floats(-0.02, 0.02),
    targets=st.lists(st.floats(0.2, 20.0), min_size=1, max_size=12, unique=True),
)
def test_every_answer_lies_in_the_window_of_the_costly_curve(
    scale: float, power: float, bias: float, tilt: float, targets: list[float]
) -> None:
    """A coarse curve above the fine one by a gap that drifts with z: answers are confirmed."""
    calls: list[float] = []

    def fine(z: float) -> float:
        calls.append(z)
        return scale / z**power

    def coarse(z: float) -> float:
        return scale / z**power * math.exp(bias + tilt * math.log(z))

    out = solve_on_curve(targets, coarse=coarse, fine=fine)
    if out is None:  # allowed (the caller falls back); a gap this smooth should not need it
        pytest.fail("fell back on a smooth curve")
    for eps, z in zip(targets, out):
        assert eps * (1 - WINDOW) <= fine(z) <= eps
    assert len(calls) <= 2 * len(targets) + 2 + len(targets)  # the checks above add one each


def test_a_coarse_curve_that_does_not_decrease_falls_back() -> None:
    def coarse(z: float) -> float:  # decreasing overall, rising in places
        return 3.0 / z * (1.0 + 0.3 * math.sin(40.0 * z))

    assert solve_on_curve([1.0, 2.5], coarse=coarse, fine=lambda z: 1.0 / z) is None


def test_a_gap_too_wild_for_the_tries_falls_back() -> None:
    """A fine curve that jumps about is never confirmed within the window: None, not a guess."""
    rng = np.random.default_rng(0)

    def fine(z: float) -> float:
        return 3.0 / z * (1.0 + 0.05 * rng.uniform())

    assert solve_on_curve([1.0, 2.0, 3.0], coarse=lambda z: 3.3 / z, fine=fine) is None


def test_pld_many_budgets_cost_about_one_fine_pld_each() -> None:
    """Twelve budgets on one curve: each meets its target on the accountant's own PLD, is
    within 0.1 % of the smallest z, and the accountant's PLD is built about once a budget
    (those builds are what its ledger reuses when the releases are charged)."""
    acc = PldAccountant()
    template = Charge("subsampled_gaussian", sample_rate=0.15, steps=3)
    targets = np.random.default_rng(3).uniform(2.0, 8.0, 12)
    built: list[float] = []
    original = pld_module.event_pld

    def counting(noise: str, **kw: float) -> object:
        if kw["interval"] == acc.config.value_discretization_interval and kw["z"] not in built:
            built.append(kw["z"])
        return original(noise, **kw)

    pld_module.event_pld = counting  # type: ignore[assignment]
    try:
        event_pld.cache_clear()
        zs = acc.calibrate_many(epsilons=targets, delta=1e-6, releases=4, template=template)
    finally:
        pld_module.event_pld = original
    assert len(built) <= len(targets) + 4

    def eps(z: float) -> float:
        charge = replace(template, noise_multiplier=z)
        return acc.composed_epsilon(charge, count=4, delta=1e-6)

    for target, z in zip(targets.tolist(), zs.tolist()):
        assert eps(z) <= target
        assert eps(z / (1 + acc.calibration_minimal_rtol)) > target
