"""The round's economics (fedgame.game.economics) against values worked by hand, and the
contest's deviation gains against the Nash gaps of fedgame.game.diagnostics (an independent
implementation of the same supremum)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedgame.game import economics as econ
from fedgame.game.diagnostics import gaps_of
from fedgame.game.economics import RoundOutcome


def outcome(payments, true_cost, ids=None, units=None) -> RoundOutcome:
    payments = np.asarray(payments, dtype=float)
    n = payments.size
    return RoundOutcome(
        np.arange(n, dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64),
        np.ones(n) if units is None else np.asarray(units, dtype=float),
        payments,
        np.asarray(true_cost, dtype=float),
    )


def test_server_cost_surplus_welfare_by_hand():
    o = outcome([1.5, 2.0, 0.5], [1.0, 2.5, 0.0])
    assert econ.server_cost(o) == 4.0
    np.testing.assert_allclose(econ.surplus(o), [0.5, -0.5, 0.5])
    # value 10 reward units; true costs 1 + 2.5 + 0 = 3.5; payments cancel
    assert econ.social_welfare(10.0, o) == 6.5
    assert econ.ir_violations(o) == 1
    assert econ.server_cost(RoundOutcome.empty()) == 0.0
    assert econ.ir_violations(RoundOutcome.empty()) == 0


def test_rounding_below_zero_is_no_ir_violation():
    # a share that should equal the cost, off in the last bits
    o = outcome([0.1 + 0.2], [0.3 + 1e-15])
    assert econ.surplus(o)[0] < 0
    assert econ.ir_violations(o) == 0
    assert econ.ir_violations(outcome([0.3], [0.3 + 1e-6])) == 1


def test_accuracy_value_is_value_per_point_times_points_gained():
    assert econ.accuracy_value(0.5, 0.75, value_per_point=2.0) == 50.0
    assert econ.accuracy_value(0.75, 0.5, value_per_point=1.0) == -25.0  # a lost round
    assert econ.accuracy_value(math.nan, 0.5, value_per_point=1.0) == 0.0


def test_accuracy_per_cost():
    assert econ.accuracy_per_cost(3.0, 1.5) == 2.0
    assert econ.accuracy_per_cost(3.0, 0.0) == 0.0  # nothing paid
    assert econ.accuracy_per_cost(math.nan, 1.0) == 0.0


def test_payment_fairness_by_hand():
    ids, pay = np.array([0, 1]), np.array([3.0, 1.0])
    # shares (0.75, 0.25) against (0.5, 0.5): ½·(0.25 + 0.25) = 0.25
    assert econ.payment_fairness(ids, pay, {0: 0.5, 1: 0.5}) == pytest.approx(0.75)
    # payments proportional to contributions: 1
    assert econ.payment_fairness(ids, pay, {0: 0.3, 1: 0.1}) == pytest.approx(1.0)
    # all paid to 0, all contributed by 1: disjoint, 0
    assert econ.payment_fairness(ids, np.array([1.0, 0.0]), {1: 2.0}) == pytest.approx(0.0)
    # a negative contribution is clipped to 0: shares (1, 0) against (1, 0)
    assert econ.payment_fairness(ids, np.array([2.0, 0.0]), {0: 1.0, 1: -1.0}) == 1.0
    # a valued client that was not paid counts: (1, 0) against (0.5, 0.5)
    assert econ.payment_fairness(np.array([0]), np.array([1.0]), {0: 1.0, 2: 1.0}) == 0.5


def test_payment_fairness_is_nan_without_an_estimate_or_payments():
    ids, pay = np.array([0, 1]), np.array([1.0, 1.0])
    assert math.isnan(econ.payment_fairness(ids, pay, None))
    assert math.isnan(econ.payment_fairness(ids, np.zeros(2), {0: 1.0}))
    assert math.isnan(econ.payment_fairness(ids, pay, {0: -1.0, 1: 0.0}))


@given(
    st.lists(st.floats(0.0, 10.0), min_size=1, max_size=8),
    st.lists(st.floats(-5.0, 10.0), min_size=1, max_size=8),
)
def test_payment_fairness_lies_in_zero_one(pays, values):
    ids = np.arange(len(pays))
    fair = econ.payment_fairness(ids, np.array(pays), dict(enumerate(values)))
    if sum(pays) > 0 and sum(max(v, 0.0) for v in values) > 0:
        assert -1e-12 <= fair <= 1.0 + 1e-12
    else:
        assert math.isnan(fair)


def test_deviation_sample_takes_everyone_without_drawing():
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    np.testing.assert_array_equal(econ.deviation_sample(np.array([5, 2, 9]), 3, rng=rng), [2, 5, 9])
    assert rng.bit_generator.state == state
    sample = econ.deviation_sample(np.arange(100, 120), 4, rng=rng)
    assert sample.size == 4 and len(set(sample.tolist())) == 4
    assert set(sample.tolist()) <= set(range(100, 120)) and (np.diff(sample) > 0).all()


def test_regret_summary():
    assert econ.regret_summary(np.array([0.0, 0.5, 0.25])) == (0.5, 0.25)
    assert econ.regret_summary(np.zeros(0)) == (0.0, 0.0)


# --- the contest's deviation gains -----------------------------------------------------------
INF2 = np.full(2, np.inf)


def gains(rho, nu, *, reward=1.0, caps=INF2, quadratic=False, which=(0, 1)):
    return econ.contest_deviation_gains(
        np.asarray(rho, dtype=float),
        np.asarray(nu, dtype=float),
        reward=reward,
        phi=1.0,
        quadratic=quadratic,
        caps=np.asarray(caps, dtype=float),
        which=np.asarray(which),
    )


def test_contest_gains_by_hand():
    # R = 1, ν = 1, ρ = (0.5, 0.25). The best response to s is sqrt(s) − s, worth
    # (1 − sqrt(s))². Player 0: U = 0.5/0.75 − 0.5 = 1/6, best (1 − 0.5)² = 1/4: gain 1/12.
    # Player 1: U = 0.25/0.75 − 0.25 = 1/12, best (1 − sqrt(0.5))².
    got = gains([0.5, 0.25], [1.0, 1.0])
    np.testing.assert_allclose(got, [1 / 12, (1 - math.sqrt(0.5)) ** 2 - 1 / 12], rtol=1e-12)


def test_contest_gains_at_the_equilibrium_are_zero():
    # two players, ν = 1, R = 1: ρ* = R/4 each
    np.testing.assert_allclose(gains([0.25, 0.25], [1.0, 1.0]), [0.0, 0.0], atol=1e-15)


def test_a_cap_bounds_the_deviation():
    # player 0 may sell at most 0.1: best 0.1/0.35 − 0.1, now 1/6
    got = gains([0.5, 0.25], [1.0, 1.0], caps=[0.1, np.inf], which=[0])
    np.testing.assert_allclose(got, [0.1 / 0.35 - 0.1 - 1 / 6], rtol=1e-12)
    # no budget left: no other move
    assert gains([0.0, 0.25], [1.0, 1.0], caps=[0.0, np.inf], which=[0])[0] == 0.0


def test_a_lone_player_could_have_won_the_whole_reward_for_almost_nothing():
    # player 0 alone: U = 1 − 0.5, supremum R = 1 (ρ → 0+); player 1 enters against 0.5
    got = gains([0.5, 0.0], [1.0, 1.0])
    np.testing.assert_allclose(got, [0.5, (1 - math.sqrt(0.5)) ** 2], rtol=1e-12)


def test_without_a_reward_the_best_deviation_is_to_sell_nothing():
    np.testing.assert_allclose(gains([0.5, 0.2], [2.0, 1.0], reward=0.0), [1.0, 0.2])


@given(
    st.lists(st.floats(0.0, 3.0), min_size=2, max_size=7),
    st.lists(st.floats(0.2, 5.0), min_size=7, max_size=7),
    st.floats(0.1, 20.0),
    st.booleans(),
)
def test_contest_gains_match_the_nash_gaps(rho, nu, reward, quadratic):
    """Two implementations of the same quantity: the per-player Brent/closed-form search here
    and the vectorised gaps of fedgame.game.diagnostics (bisection for quadratic costs)."""
    rho = np.array(rho)
    nu = np.array(nu[: rho.size])
    caps = np.full(rho.size, 2.0)
    rho = np.minimum(rho, caps)
    ours = econ.contest_deviation_gains(
        rho, nu, reward=reward, phi=1.0, quadratic=quadratic, caps=caps, which=np.arange(rho.size)
    )
    theirs = gaps_of(rho, nu, reward=reward, phi=1.0, p=None, caps=caps, quadratic=quadratic)
    np.testing.assert_allclose(ours, theirs.absolute, rtol=1e-7, atol=1e-9 * reward)
