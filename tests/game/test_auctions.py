"""Procurement auction maths (fedgame.game.auctions): clearing, payments, deviations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.game.auctions import (
    bid_utilities,
    clear_market,
    deviation_gains,
    kth_lowest_of_others,
    others_threshold,
    prior_weights,
    shading_prior,
    true_unit_cost,
    unit_prices,
    winners,
)

GRID = np.geomspace(0.25, 4.0, 65)


def test_threshold_and_first_price_worked_by_hand():
    bids = np.array([0.9, 0.4, 0.7, 0.5, np.nan])
    won = winners(bids, k=2, reserve=1.0)
    assert won.tolist() == [False, True, False, True, False]
    # the critical value is the third lowest bid, 0.7: both winners are paid 0.7 per unit
    assert unit_prices(bids, won, k=2, reserve=1.0, rule="threshold").tolist() == [
        0.0, 0.7, 0.0, 0.7, 0.0,
    ]  # fmt: skip
    assert unit_prices(bids, won, k=2, reserve=0.6, rule="threshold")[1] == 0.6  # the reserve
    assert unit_prices(bids, won, k=2, reserve=1.0, rule="first_price").tolist() == [
        0.0, 0.4, 0.0, 0.5, 0.0,
    ]  # fmt: skip
    # fewer than k + 1 bids: the reserve is the critical value
    few = np.array([0.2, 0.3])
    assert unit_prices(few, winners(few, k=2, reserve=0.8), k=2, reserve=0.8,
                       rule="threshold").tolist() == [0.8, 0.8]  # fmt: skip


def test_bids_above_the_reserve_never_win():
    assert not winners([1.1, 2.0], k=2, reserve=1.0).any()


def test_true_unit_cost():
    assert true_unit_cost([2.0], phi=0.5, unit=0.1, quadratic=False).tolist() == [1.0]
    assert true_unit_cost([2.0], phi=0.5, unit=0.1, quadratic=True) == pytest.approx([0.1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.01, 5.0), min_size=1, max_size=9, unique=True), st.integers(1, 4))
def test_kth_lowest_of_others_by_brute_force(values, k):
    bids = np.array(values)
    got = kth_lowest_of_others(bids, k=k)
    for i in range(bids.size):
        others = np.sort(np.delete(bids, i))
        want = others[k - 1] if others.size >= k else math.inf
        assert got[i] == want


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.05, 3.0), min_size=2, max_size=8, unique=True),
    st.integers(1, 4),
    st.floats(0.05, 3.0),
    st.sampled_from(["threshold", "first_price"]),
)
def test_a_deviation_is_priced_as_the_clearing_rule_would(values, k, new_bid, rule):
    """bid_utilities against the others fixed = clearing the market again with the new bid."""
    bids = np.array(values)
    assume_distinct = not np.any(np.isclose(bids[1:], new_bid))
    if not assume_distinct:
        return
    cost = np.full(bids.size, 0.5)
    reserve = 2.0
    critical = kth_lowest_of_others(bids, k=k)[:1]
    predicted = bid_utilities(
        np.array([[new_bid]]), cost[:1], critical, reserve=reserve, rule=rule, unit=0.1
    )[0, 0]
    again = bids.copy()
    again[0] = new_bid
    won = winners(again, k=k, reserve=reserve)
    price = unit_prices(again, won, k=k, reserve=reserve, rule=rule)[0]
    assert predicted == pytest.approx(0.1 * (price - 0.5) if won[0] else 0.0)


def test_truthful_bidding_has_no_regret_under_the_threshold_rule_only():
    rng = np.random.default_rng(1)
    cost = rng.uniform(0.5, 1.5, 20)
    everyone = np.arange(20)
    kw = {"k": 6, "reserve": 3.0, "unit": 0.05, "grid": GRID}
    gains = deviation_gains(cost, cost, everyone, rule="threshold", **kw)
    assert np.all(gains <= 1e-12)
    first = deviation_gains(cost, cost, everyone, rule="first_price", **kw)
    won = winners(cost, k=6, reserve=3.0)
    # a truthful first-price winner could have bid just below the 6th lowest other bid
    critical = kth_lowest_of_others(cost, k=6)
    np.testing.assert_allclose(first[won], 0.05 * (critical[won] - cost[won]), rtol=1e-6)
    assert np.all(first[won] > 0)


def test_a_shaded_bid_loses_under_the_threshold_rule():
    cost = np.array([1.0, 1.1, 1.2, 2.0])
    bids = cost.copy()
    bids[0] = 1.3  # shades above the critical value 1.2: loses a profitable sale
    gains = deviation_gains(bids, cost, np.array([0]), k=2, reserve=3.0, rule="threshold",
                            unit=1.0, grid=GRID)  # fmt: skip
    assert gains[0] == pytest.approx(0.2)  # it could have won at the critical value 1.2


def test_prior_weights_start_truthful_and_follow_the_payoffs():
    grid = np.array([0.5, 1.0, 2.0])
    log_prior = shading_prior(grid, 0.5)
    w0 = prior_weights(np.zeros((1, 3)), np.array([math.inf]), log_prior)
    assert np.argmax(w0[0]) == 1 and w0.sum() == pytest.approx(1.0)
    w = prior_weights(np.array([[0.0, 0.0, 10.0]]), np.array([1.0]), log_prior)
    assert np.argmax(w[0]) == 2
    # w_k ∝ π_k·exp(η·U_k)
    want = np.exp(log_prior) * np.exp([0.0, 0.0, 10.0])
    np.testing.assert_allclose(w[0], want / want.sum())


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(0.05, 3.0), min_size=2, max_size=12, unique=True),
    st.integers(1, 5),
    st.floats(0.1, 4.0),
)
def test_threshold_is_truthful_and_individually_rational(costs, k, reserve):
    """Truthful bids: no client gains from any other bid, no winner is paid below its cost."""
    cost = np.array(costs)
    gains = deviation_gains(cost, cost, np.arange(cost.size), k=k, reserve=reserve,
                            rule="threshold", unit=0.1, grid=GRID)  # fmt: skip
    assert np.all(gains <= 1e-12)
    won = winners(cost, k=k, reserve=reserve)
    price = unit_prices(cost, won, k=k, reserve=reserve, rule="threshold")
    assert np.all(price[won] >= cost[won])
    assert won.sum() == min(k, int(np.sum(cost <= reserve)))


def test_budget_feasible_worked_by_hand():
    # sorted 0.1, 0.2, 0.3, 0.9 with B = 0.7: 0.1 <= 0.7, 0.2 <= 0.35, 0.3 > 0.233: k* = 2;
    # each winner's threshold is min(B/k*, b_(3)) = min(0.35, 0.3) = 0.3
    bids = np.array([0.3, 0.1, 0.2, 0.9])
    won, prices = clear_market(bids, rule="budget_feasible", k=1, reserve=0.0, budget=0.7)
    assert won.tolist() == [False, True, True, False]
    np.testing.assert_allclose(prices, [0.0, 0.3, 0.3, 0.0])


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(0.05, 3.0), min_size=1, max_size=10, unique=True),
    st.floats(0.05, 5.0),
    st.floats(0.01, 4.0),
)
def test_budget_feasible_is_truthful_within_budget_and_priced_by_re_clearing(costs, budget, new):
    cost = np.array(costs)
    won, prices = clear_market(cost, rule="budget_feasible", k=1, reserve=0.0, budget=budget)
    assert prices.sum() <= budget * (1 + 1e-12)  # budget feasible
    assert np.all(prices[won] >= cost[won])  # individually rational
    if won.any():  # the threshold is min(B/k*, b_(k*+1))
        k = int(won.sum())
        ordered = np.sort(cost)
        want = min(budget / k, ordered[k] if k < cost.size else math.inf)
        np.testing.assert_allclose(prices[won], want)
    gains = deviation_gains(cost, cost, np.arange(cost.size), k=1, reserve=0.0,
                            rule="budget_feasible", unit=1.0, grid=GRID, budget=budget)  # fmt: skip
    assert np.all(gains <= 1e-12)  # truthful
    if np.any(np.isclose(cost[1:], new)):
        return
    critical, rule, reserve = others_threshold(cost, rule="budget_feasible", k=1,
                                               reserve=0.0, budget=budget)  # fmt: skip
    if np.isclose(new, critical[0]):
        return  # a bid exactly at its threshold: a tie, won by clearing, lost by the estimate
    predicted = bid_utilities(np.array([[new]]), cost[:1], critical[:1], reserve=reserve,
                              rule=rule, unit=1.0)[0, 0]  # fmt: skip
    again = cost.copy()
    again[0] = new
    won2, prices2 = clear_market(again, rule="budget_feasible", k=1, reserve=0.0, budget=budget)
    assert predicted == pytest.approx(prices2[0] - cost[0] if won2[0] else 0.0)
