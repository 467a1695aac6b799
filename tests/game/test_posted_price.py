"""Posted price maths (fedgame.game.posted_price) against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.game.belief import EXACT, LOWER, UPPER
from fedgame.game.posted_price import (
    cost_at_price,
    optimal_price,
    quadratic_uncapped_price,
    revealed_privacy_values,
    supply,
)
from fedgame.game.stackelberg import ServerCostParams

#: scale 2βγ/(λ²T²) = 1, payment weight (1 − γ)π^0 = 0.5, d = C = 1, V = 0
UNIT = ServerCostParams(gamma=0.5, discount=1.0, beta=1.0, lam=1.0, clip=1.0, dim=1, rounds=1)


def test_linear_supply_is_all_or_nothing_at_the_cost_threshold():
    got = supply(1.2, [1.0, 1.2, 4.0], [0.3, 0.2, 0.5], phi=1.0, quadratic=False)
    assert got.tolist() == [0.3, 0.2, 0.0]  # the indifferent seller (ν = 1.2) sells
    assert supply(0.0, [1.0], [1.0], phi=1.0, quadratic=False).tolist() == [0.0]


def test_quadratic_supply_is_the_clipped_peak():
    # max p·ρ − φνρ²: ρ = p/(2φν) = 1/(2·2·0.5) = 0.5, clipped at the cap 0.3 for ν = 1
    got = supply(1.0, [1.0, 2.0], [0.3, 1.0], phi=0.5, quadratic=True)
    np.testing.assert_allclose(got, [0.3, 0.5])


def test_linear_optimal_price_worked_by_hand():
    # J_k = 2/k + 0.5·ν_(k)·k (unit caps and sizes): k = 1: 2.5, k = 2: 1 + 1.2 = 2.2,
    # k = 3: 2/3 + 6 = 6.67, so the leader posts ν_(2) = 1.2 and buys the two cheapest
    choice = optimal_price(
        [4.0, 1.2, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0], phi=1.0, quadratic=False, t=1,
        params=UNIT,
    )  # fmt: skip
    assert choice.price == pytest.approx(1.2)
    assert choice.cost == pytest.approx(2.2)
    assert choice.rho.tolist() == [0.0, 1.0, 1.0]


def test_linear_optimal_price_is_the_best_threshold():
    rng = np.random.default_rng(4)
    nu = rng.uniform(0.5, 1.5, 12)
    caps, sizes = rng.uniform(0.01, 0.2, 12), rng.integers(20, 200, 12).astype(float)
    params = ServerCostParams(gamma=0.5, discount=0.9, dim=50, rounds=5)
    choice = optimal_price(nu, caps, sizes, phi=1.0, quadratic=False, t=2, params=params)
    costs = [
        cost_at_price(p, nu, caps, sizes, phi=1.0, quadratic=False, t=2, params=params).cost
        for p in np.concatenate([nu, np.linspace(0.4, 1.6, 400)])
    ]
    assert choice.cost == pytest.approx(min(costs))


def test_quadratic_uncapped_price_worked_by_hand():
    # ν = (1, 1), |D| = 1: J(p) = 2/p + 0.5·p², minimised where p³ = 2
    p = quadratic_uncapped_price([1.0, 1.0], [1.0, 1.0], phi=1.0, t=1, params=UNIT)
    assert p == pytest.approx(2.0 ** (1.0 / 3.0))
    choice = optimal_price([1.0, 1.0], [np.inf, np.inf], [1.0, 1.0], phi=1.0, quadratic=True,
                           t=1, params=UNIT)  # fmt: skip
    assert choice.price == pytest.approx(2.0 ** (1.0 / 3.0))
    assert choice.cost == pytest.approx(2 / p + 0.5 * p * p)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000))
def test_quadratic_optimal_price_beats_a_fine_price_grid_with_caps(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 8))
    nu = rng.uniform(0.3, 3.0, n)
    caps = rng.uniform(0.05, 1.0, n)
    sizes = rng.uniform(1.0, 3.0, n)
    choice = optimal_price(nu, caps, sizes, phi=1.0, quadratic=True, t=1, params=UNIT)
    grid = np.geomspace(1e-3, 20.0, 4000)
    costs = [
        cost_at_price(p, nu, caps, sizes, phi=1.0, quadratic=True, t=1, params=UNIT).cost
        for p in grid
    ]
    assert choice.cost <= min(costs) * (1 + 1e-6)


def test_linear_cost_needs_finite_capacities():
    with pytest.raises(ScenarioError, match="caps"):
        optimal_price([1.0, 2.0], [np.inf, 1.0], [1.0, 1.0], phi=1.0, quadratic=False, t=1,
                      params=UNIT)  # fmt: skip


def test_nobody_can_sell():
    choice = optimal_price([1.0], [0.0], [1.0], phi=1.0, quadratic=False, t=1, params=UNIT)
    assert choice.price == 0.0 and math.isinf(choice.cost)


def test_what_supply_reveals():
    # quadratic: ρ = p/(2φν) reveals ν = p/(2φρ); at the cap only an upper bound
    nu, kind = revealed_privacy_values(2.0, [0.5, 0.25, np.nan], [1.0, 0.25, 1.0],
                                       phi=1.0, quadratic=True)  # fmt: skip
    assert nu[:2].tolist() == [2.0, 4.0] and kind.tolist()[:2] == [EXACT, UPPER]
    # linear: a sale says ν ≤ p/φ, no sale ν ≥ p/φ
    nu, kind = revealed_privacy_values(1.5, [0.2, 0.0], [0.2, 0.2], phi=0.5, quadratic=False)
    assert nu.tolist() == [3.0, 3.0] and kind.tolist() == [UPPER, LOWER]
