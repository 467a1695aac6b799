"""Numeric Stackelberg solver against QI-DPFL Theorems 1-2 and first-order conditions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.game.equilibrium import (
    FollowerUtility,
    nash_gap,
    numeric_best_response,
    solve_followers,
    solve_leader,
)
from fedgame.game.stackelberg import (
    ServerCostParams,
    accuracy_constant,
    follower_equilibrium,
    optimal_reward,
    server_cost,
)

NU = np.array([2.0, 3.0, 3.0])  # hand instance of test_stackelberg: rho* = (4, 2, 2) at R=8
PHI, R = 0.25, 8.0


@st.composite
def feasible_games(draw):
    """Random N in 2..8 with nu in [m(1-d), m(1+d)], d < 1/(2N-3): all C_i > 0 (note §4.1)."""
    n = draw(st.integers(2, 8))
    spread = 0.9 / (2 * n - 3)
    base = draw(st.floats(0.5, 2.0))
    unit = st.floats(-spread, spread)
    nu = base * (1 + np.array(draw(st.lists(unit, min_size=n, max_size=n))))
    return nu, draw(st.floats(0.2, 5.0)), draw(st.floats(0.5, 50.0))


def test_closed_form_has_zero_nash_gap_and_perturbation_positive():
    u = FollowerUtility(NU, R, PHI)
    rho = follower_equilibrium(NU, reward=R, phi=PHI)
    assert np.all(nash_gap(rho, u, bounds=u.bounds()) < 1e-8)
    gaps = nash_gap(rho * np.array([1.3, 1.0, 0.8]), u, bounds=u.bounds())
    assert np.all(gaps > 1e-4)


def test_nash_gap_grid_guard_finds_distant_optimum():
    # A bimodal utility: Brent on [0, 10] may settle on the local peak at 2; the grid sees 8.
    def bumps(rho):
        x = rho[0]
        return np.array([np.exp(-((x - 2) ** 2)) + 2 * np.exp(-((x - 8) ** 2) / 0.5)])

    gap = nash_gap(np.array([2.0]), bumps, bounds=(0.0, 10.0))
    assert gap[0] == pytest.approx(2 - 1, abs=1e-3)


@settings(max_examples=15, deadline=None)
@given(feasible_games())
def test_numeric_equilibrium_matches_theorem1(game):
    nu, phi, reward = game
    eq = solve_followers(FollowerUtility(nu, reward, phi))
    assert eq.converged and eq.residual <= 1e-8 * (1 + eq.rho.max())
    np.testing.assert_allclose(eq.rho, follower_equilibrium(nu, reward=reward, phi=phi), rtol=1e-6)


@settings(max_examples=10, deadline=None)
@given(st.lists(st.floats(1.0, 3.0), min_size=3, max_size=6), st.floats(1.0, 20.0))
def test_numeric_equilibrium_matches_active_set(nu, reward):
    # Heterogeneous nu (note §4.1 table): best responses reach the Tullock active set.
    nu = np.array(nu)
    expected = follower_equilibrium(nu, reward=reward, phi=1.0)
    eq = solve_followers(FollowerUtility(nu, reward, 1.0))
    assert eq.converged
    np.testing.assert_allclose(eq.rho, expected, rtol=1e-6, atol=1e-9)


def test_analytic_fast_path_matches_numeric_best_response():
    u = FollowerUtility(NU, R, PHI, caps=np.array([10.0, 1.0, 10.0]))
    lower, upper = u.bounds()
    rho = np.array([1.0, 3.0, 2.5])
    for i in range(3):
        numeric = numeric_best_response(u, rho, i, lower=lower[i], upper=upper[i])
        assert numeric == pytest.approx(u.analytic_best_response(i, rho), rel=1e-7)
    fast = solve_followers(u, analytic=True)
    slow = solve_followers(u)
    np.testing.assert_allclose(fast.rho, slow.rho, rtol=1e-6)


def test_quadratic_cost_satisfies_first_order_conditions():
    nu = np.array([1.0, 1.5, 2.0, 4.0])
    u = FollowerUtility(nu, 5.0, 0.5, cost="quadratic")
    lower, upper = u.bounds()
    numeric = numeric_best_response(u, np.ones(4), 0, lower=lower[0], upper=upper[0])
    assert u.analytic_best_response(0, np.ones(4)) == pytest.approx(numeric, rel=1e-7)
    assert u.analytic_best_response(0, np.array([0.0, 0, 0, 0])) is None  # S_-i = 0
    eq = solve_followers(u)
    fast = solve_followers(u, analytic=True)
    np.testing.assert_allclose(fast.rho, eq.rho, rtol=1e-6)
    assert eq.converged and np.all(eq.rho > 0)
    s = eq.rho.sum()
    # dU_i/drho_i = R*S_-i/S^2 - 2*phi*nu_i*rho_i = 0 at an interior equilibrium.
    marginal = 5.0 * (s - eq.rho) / s**2
    np.testing.assert_allclose(marginal, 2 * 0.5 * nu * eq.rho, rtol=1e-6)
    assert np.all(nash_gap(eq.rho, u, bounds=u.bounds()) < 1e-10)


def test_caps_are_respected_and_bind():
    # Homogeneous nu=1, phi=1, R=9: uncapped rho* = 2 each; cap client 0 at 0.5.
    u = FollowerUtility(np.ones(3), 9.0, 1.0, caps=np.array([0.5, 10.0, 10.0]))
    eq = solve_followers(u)
    assert eq.converged
    assert np.all(eq.rho <= u.caps) and eq.rho[0] == pytest.approx(0.5)
    s = eq.rho.sum()
    assert 9.0 * (s - eq.rho[0]) / s**2 - 1.0 > 0  # capped client still wants more
    assert np.all(nash_gap(eq.rho, u, bounds=u.bounds()) < 1e-10)
    free = solve_followers(FollowerUtility(np.ones(3), 9.0, 1.0))
    np.testing.assert_allclose(free.rho, 2.0, rtol=1e-6)


def test_non_convergence_is_reported():
    u = FollowerUtility(NU, R, PHI)
    eq = solve_followers(u, max_iter=1, tol=1e-10, warm_start=False)
    assert not eq.converged and eq.iterations == 1 and eq.residual > 1e-10


def test_jacobi_converges_for_two_and_oscillates_for_six_unless_damped():
    u = FollowerUtility(np.array([1.0, 1.2]), 4.0, 1.0)
    eq = solve_followers(u, scheme="jacobi")
    assert eq.converged
    np.testing.assert_allclose(eq.rho, follower_equilibrium(u.nu, reward=4.0, phi=1.0), rtol=1e-6)
    # Linearised Jacobi map has eigenvalue (2-N)/2 = -2 at N=6 (note on solve_followers).
    six = FollowerUtility(np.ones(6), 6.0, 1.0)
    cold = {"scheme": "jacobi", "analytic": True, "warm_start": False}
    undamped = solve_followers(six, max_iter=100, damping=1.0, **cold)
    assert not undamped.converged
    damped = solve_followers(six, max_iter=300, **cold)
    assert damped.converged
    np.testing.assert_allclose(damped.rho, 5 / 6, rtol=1e-6)  # (N-1)R/(N^2 phi nu)
    assert solve_followers(six, analytic=True).converged


@pytest.mark.parametrize("analytic", [False, True])
def test_heterogeneous_two_client_cycle_is_damped(analytic):
    # nu=(1, 1/8), R=phi=1: plain Gauss-Seidel best responses flip 0 <-> large forever.
    # Theorem 1: sum nu = 9/8, C = (9/8 - nu)/(81/64) = (8/81, 64/81).
    u = FollowerUtility(np.array([1.0, 0.125]), 1.0, 1.0)
    cold = {"analytic": analytic, "warm_start": False}
    assert not solve_followers(u, damping=1.0, max_iter=200, **cold).converged
    eq = solve_followers(u, **cold)
    assert eq.converged
    np.testing.assert_allclose(eq.rho, [8 / 81, 64 / 81], rtol=1e-6)


@settings(max_examples=15, deadline=None)
@given(
    st.lists(st.floats(-4.5, 2.3), min_size=2, max_size=8),
    st.floats(0.2, 50.0),
    st.floats(0.2, 5.0),
)
def test_numeric_equilibrium_matches_closed_form_heterogeneous(log_nu, reward, phi):
    # nu spread over ~3 orders of magnitude (0.01..10): active set of note 003 §4.1.
    nu = np.exp(np.array(log_nu))
    expected = follower_equilibrium(nu, reward=reward, phi=phi)
    eq = solve_followers(FollowerUtility(nu, reward, phi), analytic=True)
    assert eq.converged
    np.testing.assert_allclose(eq.rho, expected, rtol=1e-6, atol=1e-9 * expected.max())


@settings(max_examples=25, deadline=None)
@given(
    feasible_games(),
    st.lists(st.floats(50.0, 5000.0), min_size=8, max_size=8),
    st.floats(0.1, 0.9),
    st.floats(0.85, 1.0),
    st.integers(1, 50),
    st.integers(10, 100_000),
    st.floats(0.0, 2.0),
)
def test_numeric_leader_matches_theorem2(game, sizes, gamma, discount, t, dim, grad_bound):
    nu, phi, _ = game
    sizes = np.array(sizes[: nu.size])
    params = ServerCostParams(
        gamma=gamma, discount=discount, dim=dim, rounds=50, grad_bound=grad_bound
    )
    expected = optimal_reward(
        accuracy_constant(nu, sizes, phi=phi, params=params), t=t, params=params
    )
    assume(1e-6 < expected < 1e6)

    def cost(reward):
        rho = follower_equilibrium(nu, reward=reward, phi=phi)
        return server_cost(reward, rho=rho, data_sizes=sizes, t=t, params=params).total

    sol = solve_leader(cost, bounds=(1e-8, 1e8))
    assert not sol.at_bound
    assert sol.reward == pytest.approx(expected, rel=1e-6)


def test_leader_with_numeric_followers():
    # Fully numeric Stackelberg: Brent over R around best-response iteration (N=3).
    nu, sizes = np.array([1.0, 1.1, 0.9]), np.array([100.0, 200.0, 150.0])
    params = ServerCostParams(gamma=0.5, discount=0.9, dim=1000, rounds=5)

    def cost(reward):
        rho = solve_followers(FollowerUtility(nu, reward, 1.0)).rho
        return server_cost(reward, rho=rho, data_sizes=sizes, t=2, params=params).total

    sol = solve_leader(cost, bounds=(1e-4, 1e2), xatol=1e-6)
    expected = optimal_reward(
        accuracy_constant(nu, sizes, phi=1.0, params=params), t=2, params=params
    )
    assert sol.reward == pytest.approx(expected, rel=1e-3)


def test_leader_reports_bound_and_validates():
    sol = solve_leader(lambda r: (r - 50.0) ** 2, bounds=(1.0, 10.0))
    assert sol.at_bound and sol.reward == 10.0
    with pytest.raises(ScenarioError, match="bounds"):
        solve_leader(lambda r: r, bounds=(0.0, 1.0))


def test_utility_validation():
    with pytest.raises(ScenarioError, match="cost"):
        FollowerUtility(NU, R, PHI, cost="cubic")
    with pytest.raises(ScenarioError, match="caps"):
        FollowerUtility(NU, R, PHI, caps=np.array([1.0, 0.0, 1.0]))
    with pytest.raises(ScenarioError, match="reward"):
        FollowerUtility(NU, 0.0, PHI)
    with pytest.raises(ScenarioError, match="scheme"):
        solve_followers(FollowerUtility(NU, R, PHI), scheme="newton")
    with pytest.raises(ScenarioError, match="damping"):
        solve_followers(FollowerUtility(NU, R, PHI), damping=0.0)


def test_deviation_gaps_match_nash_gap():
    for cost in ("linear", "quadratic"):
        u = FollowerUtility(NU, R, PHI, cost=cost, caps=np.array([10.0, 1.0, 10.0]))
        rho = np.array([1.0, 0.5, 3.0])
        np.testing.assert_allclose(
            u.deviation_gaps(rho), nash_gap(rho, u, bounds=u.bounds()), rtol=1e-6, atol=1e-10
        )
        eq = solve_followers(u, analytic=True)
        assert np.all(u.deviation_gaps(eq.rho) < 1e-9)
    # Nobody else contributes: the supremum R is approached by an arbitrarily small budget.
    u = FollowerUtility(NU, R, PHI)
    assert u.deviation_gaps(np.zeros(3)) == pytest.approx([R, R, R])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-4.5, 2.3), min_size=2, max_size=10),
    st.floats(0.2, 50.0),
    st.floats(0.2, 5.0),
)
def test_share_function_solution_matches_theorem1(log_nu, reward, phi):
    # The aggregate fixed point is an independent numeric route to the same equilibrium.
    nu = np.exp(np.array(log_nu))
    rho = FollowerUtility(nu, reward, phi).aggregate_equilibrium()
    expected = follower_equilibrium(nu, reward=reward, phi=phi)
    np.testing.assert_allclose(rho, expected, rtol=1e-8, atol=1e-12 * expected.max())


def test_share_function_quadratic_satisfies_first_order_conditions():
    u = FollowerUtility(np.array([0.5, 1.0, 3.0]), 4.0, 1.0, cost="quadratic")
    rho = u.aggregate_equilibrium()
    s = rho.sum()
    np.testing.assert_allclose(4.0 * (s - rho) / s**2, 2 * u.nu * rho, rtol=1e-9)
    assert np.all(u.deviation_gaps(rho) < 1e-10)


def test_share_function_none_for_a_single_contributor():
    assert FollowerUtility(np.array([1.0]), 1.0, 1.0).aggregate_equilibrium() is None
