"""The leader's reward in the real game: expected delivery, binding budgets, chosen set."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from fedgame.game.contest import contest_equilibrium
from fedgame.game.leader import (
    capped_reward,
    expected_server_cost,
    numeric_reward,
    optimal_active_set,
    proportional_reward,
    subset_accuracy_constant,
)
from fedgame.game.rules import GameRules
from fedgame.game.stackelberg import (
    ServerCostParams,
    accuracy_constant,
    active_coefficients,
    optimal_reward,
)
from fedgame.mechanisms.incentive.qi_dpfl import QiDpfl
from fedgame.views import ClientView, MarketView, RoundInfo, SetupContext

PARAMS = ServerCostParams(gamma=0.5, discount=0.9429, dim=90, rounds=10, lam=1.0)


def brute_min(cost, lo, hi, points=401):
    """argmin of cost on a fine log grid, refined by bounded Brent around the best point."""
    grid = np.linspace(np.log(lo), np.log(hi), points)
    values = np.array([cost(float(np.exp(u))) for u in grid])
    k = int(np.argmin(values))
    res = minimize_scalar(
        lambda u: cost(float(np.exp(u))),
        bounds=(grid[max(k - 1, 0)], grid[min(k + 1, points - 1)]),
        method="bounded",
        options={"xatol": 1e-12},
    )
    return float(np.exp(res.x)), float(res.fun)


def test_full_delivery_is_theorem2():
    nu, sizes = np.array([2.0, 3.0, 3.0]), np.full(3, 100.0)
    coeff = active_coefficients(nu, phi=1.0)
    a = accuracy_constant(nu, sizes, phi=1.0, params=PARAMS)
    for t in (1, 4):
        assert proportional_reward(coeff, sizes, t=t, params=PARAMS) == pytest.approx(
            optimal_reward(a, t=t, params=PARAMS), rel=1e-12
        )


@settings(max_examples=6)
@given(
    nu=st.lists(st.floats(0.8, 1.25), min_size=2, max_size=6),
    data=st.data(),
    t=st.integers(1, 10),
)
def test_expected_delivery_reward_is_the_numeric_optimum(nu, data, t):
    """Followers with complete information about delivery; the leader minimises the expected
    server cost over R: the closed form equals a numeric minimisation."""
    nu = np.array(nu)
    n = nu.size
    p = np.array(data.draw(st.lists(st.floats(0.3, 1.0), min_size=n, max_size=n)))
    sizes = np.array(data.draw(st.lists(st.integers(20, 200), min_size=n, max_size=n)), float)
    coeff = contest_equilibrium(nu, reward=1.0, p=p)

    def cost(r):
        rho = contest_equilibrium(nu, reward=r, p=p)
        return expected_server_cost(r, rho=rho, data_sizes=sizes, p=p, t=t, params=PARAMS).total

    closed = proportional_reward(coeff, sizes, p=p, t=t, params=PARAMS)
    found, best = brute_min(cost, closed * 1e-3, closed * 1e3)
    assert cost(closed) <= best * (1 + 1e-9)
    assert closed == pytest.approx(found, rel=1e-4)


@settings(max_examples=6)
@given(
    nu=st.lists(st.floats(0.8, 1.25), min_size=2, max_size=5),
    data=st.data(),
)
def test_binding_budget_reward_is_the_numeric_optimum(nu, data):
    """With budget caps the response is piecewise linear in R; the leader's numeric search
    (scan + Brent) reaches the cost of a fine brute-force grid."""
    nu = np.array(nu)
    n = nu.size
    sizes = np.full(n, 100.0)
    free_coeff = contest_equilibrium(nu, reward=1.0)
    free = proportional_reward(free_coeff, sizes, t=1, params=PARAMS)
    frac = np.array(data.draw(st.lists(st.floats(0.05, 3.0), min_size=n, max_size=n)))
    caps = frac * free_coeff.max() * free

    def cost(r):
        rho = contest_equilibrium(nu, reward=r, caps=caps)
        return expected_server_cost(r, rho=rho, data_sizes=sizes, t=1, params=PARAMS).total

    chosen = numeric_reward(cost, around=free)
    _, best = brute_min(cost, free * 1e-3, free * 1e2)
    assert cost(chosen) <= best * (1 + 1e-6)


def test_capped_reward():
    assert capped_reward(5.0, None) == 5.0
    assert capped_reward(5.0, 2.0) == 2.0


@settings(max_examples=6)
@given(
    nu=st.lists(st.floats(0.2, 5.0), min_size=2, max_size=8),
    sizes=st.lists(st.integers(10, 300), min_size=8, max_size=8),
    equal=st.booleans(),
)
def test_optimal_active_set_beats_every_subset(nu, sizes, equal):
    nu = np.array(nu)
    n = nu.size
    d = np.full(n, 100.0) if equal else np.array(sizes[:n], float)
    chosen = optimal_active_set(nu, d, phi=1.0, params=PARAMS)
    value = subset_accuracy_constant(nu[chosen], d[chosen], phi=1.0, params=PARAMS)
    best = min(
        subset_accuracy_constant(nu[list(s)], d[list(s)], phi=1.0, params=PARAMS)
        for k in range(2, n + 1)
        for s in itertools.combinations(range(n), k)
    )
    assert value <= best * (1 + 1e-9)


def view(i, nu, *, straggle=0.0, eps_total=100.0):
    return ClientView(i, 100, 0.0, nu, eps_total, 1e-5, 0.0, 1.0, 1e-5, straggle, False)


def test_qi_dpfl_anticipates_stragglers_when_told():
    nus = [1.0, 1.1, 0.9, 1.05]
    clients = tuple(view(i, v, straggle=0.3) for i, v in enumerate(nus))
    info = RoundInfo(1, 10, 4)
    rules = GameRules(complete_information=True)
    paper = QiDpfl(QiDpfl.Config(dim=90))
    real = QiDpfl(QiDpfl.Config(dim=90, delivery="expected"))
    for inc in (paper, real):
        inc.prepare(
            SetupContext(num_clients=4, rounds=10, clients=(), planned_participations=10),
            rng=np.random.default_rng(0),
        )
    r_paper = paper.offer(MarketView(clients, info), info=info).reward
    r_real = real.offer(MarketView(clients, info, game=rules), info=info).reward
    p = np.full(4, 0.7)
    coeff = contest_equilibrium(np.array(nus), reward=1.0, p=p)
    params = real.params()
    expected = proportional_reward(coeff, np.full(4, 100.0), p=p, t=1, params=params)
    assert r_real == pytest.approx(expected, rel=1e-9)
    assert r_real != pytest.approx(r_paper, rel=1e-3)


def test_qi_dpfl_reward_cap_and_budget_exclusion():
    clients = (view(0, 1.0, eps_total=1e-9), view(1, 1.0), view(2, 1.0), view(3, 1.0))
    info = RoundInfo(1, 10, 4)
    inc = QiDpfl(QiDpfl.Config(dim=90, budgets="exclude", reward_cap=1e-3))
    inc.prepare(
        SetupContext(num_clients=4, rounds=10, clients=(), planned_participations=10),
        rng=np.random.default_rng(0),
    )
    offer = inc.offer(MarketView(clients, info), info=info)
    assert offer.excluded == frozenset({0})
    assert offer.reward == 1e-3
