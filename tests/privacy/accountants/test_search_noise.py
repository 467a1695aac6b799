"""``search_noise``: the smallest noise multiplier meeting a target, to rtol, never below it."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.privacy.accountants.base import search_noise


def _kinked(scale: float, power: float, kink: float):
    """A decreasing ε(z) with a kink at ``kink`` (as a minimum over RDP orders has)."""

    def composed(z: float) -> float:
        return scale / z**power if z < kink else scale / kink**power * (kink / z) ** (2 * power)

    return composed


@settings(max_examples=200, deadline=None)
@given(
    scale=st.floats(1e-3, 1e3),
    power=st.floats(0.3, 3.0),
    kink=st.floats(0.05, 50.0),
    epsilon=st.floats(1e-2, 50.0),
    rtol=st.sampled_from([1e-7, 1e-4]),
)
def test_the_answer_meets_the_target_and_is_within_rtol_of_the_crossing(
    scale, power, kink, epsilon, rtol
):
    composed = _kinked(scale, power, kink)
    z = search_noise(composed, epsilon=epsilon, rtol=rtol)
    assert composed(z) <= epsilon
    below = z / (1 + 2 * rtol)
    assert composed(below) > epsilon  # and not needlessly large


def test_brent_takes_fewer_evaluations_than_bisection():
    calls = []

    def composed(z: float) -> float:
        calls.append(z)
        return 3.0 / z

    z = search_noise(composed, epsilon=1.7, rtol=1e-7)
    assert math.isclose(z, 3.0 / 1.7, rel_tol=1e-7) and 3.0 / z <= 1.7
    assert len(calls) <= 15  # bisection from a 4x bracket to 1e-7 takes about 27
