"""Screening menus (fedgame.game.contracts) against worked examples, an independent numerical
optimum of the leader's problem, and the IC/IR properties for random type laws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize

from fedgame.errors import ScenarioError
from fedgame.game.contracts import (
    cost_of,
    first_best,
    iron,
    item_utilities,
    population_types,
    screening_menu,
    self_select,
    server_value_alpha,
    virtual_costs,
)
from fedgame.game.stackelberg import ServerCostParams


def test_two_types_worked_by_hand():
    # θ = (1, 2), p = (1/2, 1/2), α = 1, c(ρ) = ρ. Virtual costs: θ̃_1 = 1, θ̃_2 = 2 + 1·(2 − 1)
    # = 3. ρ_1 = √(1/1) = 1 (first best), ρ_2 = √(1/3). IR binds for type 2: r_2 = 2/√3;
    # downward IC binds: r_1 = r_2 + 1·(1 − 1/√3) = 1 + 1/√3.
    menu = screening_menu([1.0, 2.0], [0.5, 0.5], alpha=1.0)
    np.testing.assert_allclose(menu.virtual, [1.0, 3.0])
    np.testing.assert_allclose(menu.rho, [1.0, 1 / math.sqrt(3)])
    np.testing.assert_allclose(menu.reward, [1 + 1 / math.sqrt(3), 2 / math.sqrt(3)])
    # the efficient type's rent is θ-difference × the inefficient type's ρ: (2 − 1)/√3
    u = item_utilities([1.0, 2.0], menu.rho, menu.reward)
    np.testing.assert_allclose(np.diag(u), [1 / math.sqrt(3), 0.0], atol=1e-12)
    # the leader's expected profit: −½(1/1 + 1 + 1/√3) − ½(√3 + 2/√3)
    want = -0.5 * (1 + 1 + 1 / math.sqrt(3)) - 0.5 * (math.sqrt(3) + 2 / math.sqrt(3))
    assert menu.expected_profit(1.0) == pytest.approx(want)


def test_three_types_need_ironing_worked_by_hand():
    # θ = (1, 2, 3), p = (0.45, 0.1, 0.45): θ̃_2 = 2 + 0.45/0.1 = 6.5 > θ̃_3 = 3 + 0.55/0.45.
    # Ironing pools types 2 and 3 at (0.1·6.5 + 0.45·θ̃_3)/0.55 = (0.65 + 1.9)/0.55 = 51/11.
    menu = screening_menu([1.0, 2.0, 3.0], [0.45, 0.1, 0.45], alpha=1.0)
    np.testing.assert_allclose(menu.virtual, [1.0, 51 / 11, 51 / 11])
    pooled = math.sqrt(11 / 51)
    np.testing.assert_allclose(menu.rho, [1.0, pooled, pooled])
    np.testing.assert_allclose(menu.reward, [3 * pooled + (1 - pooled), 3 * pooled, 3 * pooled])
    assert len(menu.items()) == 2


def test_quadratic_cost_worked_by_hand():
    # c(ρ) = ρ²/2, one type θ = 2, α = 16: V'(ρ) = 16/ρ² = 2ρ gives ρ = 2, r = 2·2 = 4
    menu = screening_menu([2.0], [1.0], alpha=16.0, cost="quadratic")
    np.testing.assert_allclose(menu.rho, [2.0])
    np.testing.assert_allclose(menu.reward, [4.0])
    np.testing.assert_allclose(first_best([2.0], alpha=16.0, cost="quadratic"), [2.0])


def test_iron_leaves_monotone_values_and_pools_violators():
    np.testing.assert_allclose(iron([1.0, 2.0, 3.0], [1, 1, 1]), [1.0, 2.0, 3.0])
    np.testing.assert_allclose(iron([3.0, 1.0, 2.0], [1, 1, 2]), [2.0, 2.0, 2.0])
    np.testing.assert_allclose(iron([1.0, 4.0, 2.0, 5.0], [1, 1, 3, 1]), [1.0, 2.5, 2.5, 5.0])


def _numerical_optimum(theta, prob, alpha):
    """The leader's problem solved directly: max Σ p_k(−α/ρ_k − r_k) over (ρ, r) subject
    to every IR and IC constraint (SLSQP from the first-best), no virtual costs used."""
    n = len(theta)

    def unpack(z):
        return z[:n], z[n:]

    def objective(z):
        rho, r = unpack(z)
        return -np.sum(prob * (-alpha / rho - r))

    cons = []
    for i in range(n):
        cons.append(
            {"type": "ineq", "fun": lambda z, i=i: unpack(z)[1][i] - theta[i] * unpack(z)[0][i]}
        )
        for j in range(n):
            if i != j:
                cons.append(
                    {
                        "type": "ineq",
                        "fun": lambda z, i=i, j=j: (
                            (unpack(z)[1][i] - theta[i] * unpack(z)[0][i])
                            - (unpack(z)[1][j] - theta[i] * unpack(z)[0][j])
                        ),
                    }
                )
    rho0 = np.sqrt(alpha / np.asarray(theta))
    z0 = np.concatenate([rho0, np.max(theta) * rho0])
    bounds = [(1e-6, None)] * n + [(0, None)] * n
    found = minimize(
        objective,
        z0,
        constraints=cons,
        bounds=bounds,
        method="SLSQP",
        options={"maxiter": 500, "ftol": 1e-12},
    )
    return -found.fun


@pytest.mark.parametrize(
    ("theta", "prob"),
    [
        ([1.0, 2.0], [0.5, 0.5]),
        ([1.0, 1.5, 3.0], [0.3, 0.4, 0.3]),
        ([1.0, 2.0, 3.0], [0.45, 0.1, 0.45]),
    ],
)
def test_the_menu_is_the_leaders_optimum_found_numerically(theta, prob):
    theta, prob = np.array(theta), np.array(prob)
    menu = screening_menu(theta, prob, alpha=2.0)
    assert menu.expected_profit(2.0) == pytest.approx(
        _numerical_optimum(theta, prob, 2.0), abs=1e-5
    )


type_laws = st.integers(1, 6).flatmap(
    lambda n: st.tuples(
        st.lists(st.floats(0.05, 10.0), min_size=n, max_size=n, unique=True).map(sorted),
        st.lists(st.floats(0.01, 1.0), min_size=n, max_size=n),
    )
)


@settings(max_examples=200, deadline=None)
@given(
    law=type_laws,
    alpha=st.floats(1e-4, 1e3),
    cost=st.sampled_from(["linear", "quadratic"]),
    cap=st.one_of(st.just(math.inf), st.floats(0.01, 10.0)),
)
def test_every_menu_is_incentive_compatible_individually_rational_and_monotone(
    law, alpha, cost, cap
):
    theta, weights = np.array(law[0]), np.array(law[1])
    if np.any(np.diff(theta) <= 1e-9 * theta[1:]):
        return  # types closer than rounding are one type
    prob = weights / weights.sum()
    menu = screening_menu(theta, prob, alpha=alpha, cost=cost, cap=cap)
    u = item_utilities(theta, menu.rho, menu.reward, cost=cost)
    own = np.diag(u)
    scale = 1e-9 * max(1.0, float(np.abs(menu.reward).max()))
    assert (own >= -scale).all(), "IR"
    assert (own[:, None] >= u - scale).all(), "IC"
    assert (np.diff(menu.rho) <= scale).all(), "monotone allocation"
    assert own[-1] == pytest.approx(0.0, abs=scale), "IR binds for the highest-cost type"
    assert (menu.rho <= cap * (1 + 1e-12)).all()
    # self-selection takes an item as good as the type's own
    index, got = self_select(theta, menu.rho, menu.reward, cost=cost)
    assert (index >= 0).all()
    np.testing.assert_allclose(got, own, atol=10 * scale)
    # no distortion at the top: the most efficient type gets its first-best ρ
    top = min(float(first_best(theta[:1], alpha=alpha, cost=cost)[0]), cap)
    assert menu.rho[0] == pytest.approx(top, rel=1e-9)


def test_self_select_respects_budgets_and_declines_below_zero():
    rho = np.array([1.0, 0.5])
    reward = np.array([1.5, 0.8])
    # θ = 1: items give 0.5 and 0.3; θ = 1 with only 0.6 left: only item 1 (0.3);
    # θ = 2: −0.5 and −0.2, declines; nothing affordable: declines
    index, got = self_select([1.0, 1.0, 2.0, 1.0], rho, reward, left=[5.0, 0.6, 5.0, 0.1])
    assert index.tolist() == [0, 1, -1, -1]
    np.testing.assert_allclose(got, [0.5, 0.3, 0.0, 0.0])


def test_population_types_take_each_groups_largest_value():
    theta, prob = population_types([3.0, 0.5, 2.0, 1.0, 1.0, 4.0], bins=3, phi=2.0)
    np.testing.assert_allclose(theta, [2.0, 4.0, 8.0])
    np.testing.assert_allclose(prob, [1 / 3, 1 / 3, 1 / 3])
    theta, prob = population_types([1.0, 1.0, 1.0, 2.0], bins=2)
    np.testing.assert_allclose(theta, [1.0, 2.0])
    np.testing.assert_allclose(prob, [0.5, 0.5])


def test_server_value_alpha_is_eq15s_noise_term_per_client():
    params = ServerCostParams(
        gamma=0.5, discount=0.9, beta=1.0, lam=2.0, clip=1.5, dim=10, rounds=4
    )
    # scale = 2·1·0.5/(4·16) = 1/64; noise coefficient 2·10·2.25/N² · mean(1/|D|²), N = 2
    sizes = np.array([10.0, 20.0])
    mean_inv = (1 / 100 + 1 / 400) / 2
    want = (1 / 64) * 45.0 / 4 * mean_inv / (0.5 * 0.9**2)
    assert server_value_alpha(params, clients=2, data_sizes=sizes, t=3) == pytest.approx(want)


def test_bad_type_laws_are_refused():
    with pytest.raises(ScenarioError, match="types"):
        screening_menu([2.0, 1.0], [0.5, 0.5], alpha=1.0)
    with pytest.raises(ScenarioError, match="probabilities"):
        screening_menu([1.0, 2.0], [0.5, 0.6], alpha=1.0)
    with pytest.raises(ScenarioError, match="alpha"):
        screening_menu([1.0], [1.0], alpha=0.0)
    assert virtual_costs([1.0], [1.0]).tolist() == [1.0]
    assert cost_of(2.0, "quadratic") == 2.0
