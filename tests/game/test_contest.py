"""The followers' contest on the actual active set, checked against numeric optima."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from fedgame.game.contest import contest_equilibrium, expected_utilities
from fedgame.game.diagnostics import nash_gaps
from fedgame.game.rules import GameRules
from fedgame.game.stackelberg import follower_equilibrium
from fedgame.mechanisms.policy.game import BestResponse, BudgetAware
from fedgame.views import ClientView, MarketView, Offer, RoundInfo

nus = st.lists(st.floats(0.3, 3.0), min_size=2, max_size=6)


def best_deviation(i, rho, nu, *, reward, phi, p, cap):
    """max over ρ_i in [0, cap] of player i's expected utility, numerically (bounded Brent
    on a log scale and on a linear scale, plus the end points)."""
    hi = min(cap, reward / (phi * nu[i]))

    def utility(x):
        trial = rho.copy()
        trial[i] = x
        return expected_utilities(trial, nu, reward=reward, phi=phi, p=p)[0][i]

    candidates = [0.0, hi, rho[i]]
    if hi > 0:
        res = minimize_scalar(
            lambda x: -utility(x),
            bounds=(0.0, hi),
            method="bounded",
            options={"xatol": 1e-12 * max(hi, 1e-300)},
        )
        candidates.append(float(res.x))
        lo = hi * 1e-9
        res = minimize_scalar(
            lambda u: -utility(np.exp(u)),
            bounds=(np.log(lo), np.log(hi)),
            method="bounded",
            options={"xatol": 1e-10},
        )
        candidates.append(float(np.exp(res.x)))
    return max(utility(x) for x in candidates)


def assert_nash(rho, nu, *, reward, phi, p, caps):
    now = expected_utilities(rho, nu, reward=reward, phi=phi, p=p)[0]
    for i in range(nu.size):
        best = best_deviation(i, rho, nu, reward=reward, phi=phi, p=p, cap=caps[i])
        assert best - now[i] <= 1e-7 * reward, (i, best, now[i])


@settings(max_examples=40)
@given(
    nu=nus,
    reward=st.floats(0.1, 20.0),
    phi=st.floats(0.2, 3.0),
    data=st.data(),
)
def test_equilibrium_with_stragglers_and_caps_has_no_profitable_deviation(nu, reward, phi, data):
    nu = np.array(nu)
    n = nu.size
    p = np.array(data.draw(st.lists(st.floats(0.2, 1.0), min_size=n, max_size=n)))
    scale = reward / (phi * nu.sum())
    caps = (
        np.array(
            data.draw(
                st.lists(st.one_of(st.just(np.inf), st.floats(0.01, 1.0)), min_size=n, max_size=n)
            )
        )
        * scale
    )
    rho = contest_equilibrium(nu, reward=reward, phi=phi, p=p, caps=caps)
    assert np.all(rho >= 0) and np.all(rho <= caps * (1 + 1e-12))
    assert_nash(rho, nu, reward=reward, phi=phi, p=p, caps=caps)


@settings(max_examples=30)
@given(nu=nus, reward=st.floats(0.1, 20.0))
def test_full_delivery_without_caps_is_theorem1(nu, reward):
    nu = np.array(nu)
    rho = contest_equilibrium(nu, reward=reward, phi=1.0, p=np.ones(nu.size))
    np.testing.assert_allclose(rho, follower_equilibrium(nu, reward=reward, phi=1.0), rtol=1e-9)


def view(i, nu, *, eps_total=100.0, straggle=0.0, reachable=True):
    return ClientView(
        i, 100, 0.0, nu, eps_total, 1e-5, 0.0, 1.0, 1e-5, straggle, False, reachable=reachable
    )


@settings(max_examples=25)
@given(nu=st.lists(st.floats(0.5, 2.0), min_size=4, max_size=7), data=st.data())
def test_best_response_plays_on_the_actual_active_set(nu, data):
    """Unreachable, broke and excluded clients are not players: the others' budgets are the
    equilibrium of the contest among themselves (expected delivery: complete information)."""
    n = len(nu)
    reachable = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    broke = data.draw(st.lists(st.booleans(), min_size=n, max_size=n))
    straggle = data.draw(st.lists(st.floats(0.0, 0.6), min_size=n, max_size=n))
    clients = tuple(
        view(i, v, eps_total=1e-9 if b else 100.0, straggle=s, reachable=r)
        for i, (v, r, b, s) in enumerate(zip(nu, reachable, broke, straggle))
    )
    m = MarketView(clients, RoundInfo(1, 5, n), game=GameRules(complete_information=True))
    offer = Offer(reward=3.0, plan={"phi": 1.0}, excluded=frozenset({0}))
    answers = BudgetAware(BudgetAware.Config()).respond_all(offer, clients=clients, market=m)
    playing = np.array([r and not b and i != 0 for i, (r, b) in enumerate(zip(reachable, broke))])
    rho = np.nan_to_num(np.array([a.rho for a in answers], dtype=float), nan=0.0)
    assert np.all(rho[~playing] == 0)
    if playing.sum() < 2:
        assert not rho.any()
        return
    p = 1.0 - np.array(straggle)[playing]
    expected = contest_equilibrium(np.array(nu)[playing], reward=3.0, phi=1.0, p=p)
    np.testing.assert_allclose(rho[playing], expected, rtol=1e-9, atol=1e-15)
    assert_nash(
        rho[playing],
        np.array(nu)[playing],
        reward=3.0,
        phi=1.0,
        p=p,
        caps=np.full(int(playing.sum()), np.inf),
    )


def test_best_response_leaves_out_who_cannot_pay_and_replays():
    clients = (view(0, 1.0, eps_total=0.01), view(1, 1.0), view(2, 1.0), view(3, 1.0))
    m = MarketView(clients, RoundInfo(1, 5, 4))
    answers = BestResponse(None).respond_all(Offer(reward=5.0), clients=clients, market=m)
    assert answers[0].reason == "budget"
    rho = np.array([a.rho for a in answers[1:]])
    np.testing.assert_allclose(rho, follower_equilibrium(np.ones(3), reward=5.0, phi=1.0))


@settings(max_examples=30)
@given(
    nu=st.lists(st.floats(0.3, 3.0), min_size=3, max_size=6),
    k=st.integers(2, 3),
    reward=st.floats(0.5, 10.0),
    capped=st.booleans(),
)
def test_cartel_budgets_maximise_coalition_utility(nu, k, reward, capped):
    nu = np.array(nu)
    n = nu.size
    k = min(k, n - 1)
    cartel = np.zeros(n, dtype=bool)
    cartel[:k] = True
    caps = np.where(cartel, 0.05 * reward / nu.sum(), np.inf) if capped else None
    rho = contest_equilibrium(nu, reward=reward, phi=1.0, cartel=cartel, caps=caps)
    out_total = rho[~cartel].sum()
    joint = reward * rho[cartel].sum() / max(rho.sum(), 1e-300) - (nu * rho)[cartel].sum()

    def coalition(x):  # the best joint utility the cartel gets with a total x
        order = np.argsort(nu[cartel], kind="stable")
        cap = np.full(k, np.inf) if caps is None else caps[cartel][order]
        left, cost = x, 0.0
        for j, c in zip(order, cap):
            take = min(left, c)
            cost += nu[cartel][j] * take
            left -= take
        if left > 1e-15:
            return -np.inf
        total = x + out_total
        return (reward * x / total if total > 0 else 0.0) - cost

    upper = reward / nu[cartel].min()
    if caps is not None:
        upper = min(upper, caps[cartel].sum())
    grid = np.linspace(0.0, upper, 4001)
    best = max(coalition(x) for x in grid)
    res = minimize_scalar(
        lambda x: -coalition(x), bounds=(0.0, upper), method="bounded", options={"xatol": 1e-13}
    )
    best = max(best, -res.fun)
    assert best - joint <= 1e-7 * reward
    # outsiders best-respond to the cartel's total
    if (~cartel).sum():
        gaps = nash_gaps(rho, nu, reward=reward, phi=1.0)
        assert gaps.absolute[~cartel].max() <= 1e-7 * reward


def test_normalised_gap_is_zero_at_the_closed_form_and_positive_off_it():
    nu = np.array([0.8, 1.0, 1.3, 1.1])
    star = follower_equilibrium(nu, reward=4.0, phi=1.0)
    gaps = nash_gaps(star, nu, reward=4.0)
    assert gaps.normalised_max == pytest.approx(0.0, abs=1e-12)
    off = star * np.array([1.5, 1.0, 1.0, 1.0])
    moved = nash_gaps(off, nu, reward=4.0)
    assert moved.normalised_max > 1e-3 and moved.max > 0
    # normalisation: scaling the reward (and ρ with it) leaves the normalised gap unchanged
    assert nash_gaps(off * 10, nu, reward=40.0).normalised_max == pytest.approx(
        moved.normalised_max, rel=1e-9
    )
    assert nash_gaps(off * 10, nu, reward=40.0).max == pytest.approx(10 * moved.max, rel=1e-9)
