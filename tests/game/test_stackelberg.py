"""Tests of the QI-DPFL closed forms (Theorems 1-2, Eq. 15) against hand-worked values."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.errors import ScenarioError
from fedgame.game.stackelberg import (
    ServerCostParams,
    accuracy_constant,
    active_coefficients,
    feasible_set,
    follower_best_response,
    follower_coefficients,
    follower_equilibrium,
    follower_utility,
    optimal_reward,
    reward_shares,
    server_cost,
)

# Hand instance: N=3, nu=(2,3,3), phi=1/4, R=8.
#   sum nu = 8, N-1 = 2, phi*(sum nu)^2 = 16.
#   C_1 = 2*(8 - 2*2)/16 = 0.5 ; C_2 = C_3 = 2*(8 - 2*3)/16 = 0.25.
#   rho* = C*R = (4, 2, 2); S = 8 = (N-1)R/(phi*sum nu) = 2*8/2.
#   shares r = rho/S*R = (4, 2, 2); costs phi*nu*rho = (2, 1.5, 1.5); U = (2, 0.5, 0.5).
NU = np.array([2.0, 3.0, 3.0])
PHI = 0.25
R = 8.0
# Leader instance: gamma=0.5, beta=lam=clip=1, d=90, T=10, |D|=(1,1,1), V=0.
#   A = sum 4*d*gamma*beta*C^2 / (T^2 lam^2 N^2 C_i |D_i|^2) = 180/900 * (2+4+4) = 2.
#   R_1* = sqrt(A/(1-gamma)) = 2 ; R_2* = 2/sqrt(0.81) = 2/0.9 ; R_3* = 2/0.81.
PARAMS = ServerCostParams(gamma=0.5, discount=0.81, dim=90, rounds=10)
SIZES = np.ones(3)


def test_theorem1_coefficients_hand_worked():
    np.testing.assert_allclose(follower_coefficients(NU, phi=PHI), [0.5, 0.25, 0.25])


def test_theorem1_equilibrium_hand_worked():
    rho = follower_equilibrium(NU, reward=R, phi=PHI, strict=True)
    np.testing.assert_allclose(rho, [4.0, 2.0, 2.0])
    np.testing.assert_allclose(reward_shares(rho, reward=R), [4.0, 2.0, 2.0])


def test_first_order_condition_holds_at_equilibrium():
    # Eq. 21 (corrected, note 003 §4.1): R*S_-i/S^2 = phi*nu_i.
    rho = follower_equilibrium(NU, reward=R, phi=PHI)
    s = rho.sum()
    np.testing.assert_allclose(R * (s - rho) / s**2, PHI * NU)


def test_equilibrium_utility_hand_worked_and_constant_cost_shifts():
    rho = follower_equilibrium(NU, reward=R, phi=PHI)
    u = follower_utility(rho, reward=R, nu=NU, phi=PHI)
    np.testing.assert_allclose(u, [2.0, 0.5, 0.5])
    # note §4.1: U* = R*((sum nu - (N-1) nu_i)/sum nu)^2 = 8*(4/8)^2, 8*(2/8)^2.
    shifted = follower_utility(rho, reward=R, nu=NU, phi=PHI, constant_cost=[1.0, 0.0, 0.5])
    np.testing.assert_allclose(shifted, [1.0, 0.5, 0.0])


def test_best_response_to_equilibrium_is_equilibrium():
    rho = follower_equilibrium(NU, reward=R, phi=PHI)
    br = follower_best_response(rho.sum() - rho, reward=R, nu=NU, phi=PHI)
    np.testing.assert_allclose(br, rho)
    assert follower_best_response(0.0, reward=R, nu=1.0, phi=1.0) == 0.0


def test_homogeneous_case():
    # note §4.1: rho_i = R(N-1)/(N^2 phi nu); N=4, nu=2, phi=1, R=16: 16*3/32 = 1.5.
    rho = follower_equilibrium(np.full(4, 2.0), reward=16.0, phi=1.0)
    np.testing.assert_allclose(rho, 1.5)


def test_feasibility_removes_expensive_client():
    # nu=(1,1,1,5): sum 8, (N-1)*5 = 15 >= 8 -> drop client 4; rest: 2*1 < 3 feasible.
    # Active C = 2*(3-2)/(1*9) = 2/9, R=9 -> rho = (2,2,2,0).
    nu = np.array([1.0, 1.0, 1.0, 5.0])
    assert follower_coefficients(nu, phi=1.0)[3] < 0  # raw Theorem 1 gives rho < 0
    np.testing.assert_array_equal(feasible_set(nu), [True, True, True, False])
    np.testing.assert_allclose(follower_equilibrium(nu, reward=9.0, phi=1.0), [2, 2, 2, 0])
    with pytest.raises(ScenarioError, match="nu"):
        follower_equilibrium(nu, reward=9.0, phi=1.0, strict=True)


def test_feasibility_iterates_until_feasible():
    # nu=(1,1,2.5,3): sum 7.5, 3*3 = 9 >= 7.5 -> drop 3.0; (1,1,2.5): 2*2.5 = 5 >= 4.5 -> drop
    # 2.5; (1,1) feasible. C = 1*(2-1)/(1*4) = 1/4, R=4 -> rho = (1,1,0,0).
    nu = np.array([2.5, 1.0, 3.0, 1.0])
    np.testing.assert_array_equal(feasible_set(nu), [False, True, False, True])
    np.testing.assert_allclose(active_coefficients(nu, phi=1.0), [0, 0.25, 0, 0.25])


def test_boundary_client_is_removed():
    # nu=(1,1,2): (N-1)*2 = 4 = sum -> C_3 = 0 exactly; strict condition drops it.
    np.testing.assert_array_equal(feasible_set([1.0, 1.0, 2.0]), [True, True, False])


def test_fewer_than_two_clients_have_no_contest():
    np.testing.assert_array_equal(feasible_set([1.0]), [False])
    np.testing.assert_array_equal(follower_equilibrium([1.0], reward=5.0, phi=1.0), [0.0])
    assert feasible_set(np.array([])).size == 0
    with pytest.raises(ScenarioError, match="nu"):
        accuracy_constant([1.0], [10.0], phi=1.0, params=PARAMS)


def test_accuracy_constant_and_theorem2_hand_worked():
    a = accuracy_constant(NU, SIZES, phi=PHI, params=PARAMS)
    assert a == pytest.approx(2.0)
    assert optimal_reward(a, t=1, params=PARAMS) == pytest.approx(2.0)
    assert optimal_reward(a, t=2, params=PARAMS) == pytest.approx(2.0 / 0.9)
    assert optimal_reward(a, t=3, params=PARAMS) == pytest.approx(2.0 / 0.81)


def test_server_cost_terms_hand_worked():
    # R=2, rho=C*R=(1,.5,.5): scale 2*beta*gamma/(lam T)^2 = 0.01; 2dC^2/N^2 = 20;
    # sum 1/(D^2 rho) = 5 -> accuracy 0.01*100 = 1 = A/R ; payment (1-gamma)*R = 1.
    rho = follower_equilibrium(NU, reward=2.0, phi=PHI)
    cost = server_cost(2.0, rho=rho, data_sizes=SIZES, t=1, params=PARAMS)
    assert (cost.accuracy, cost.payment, cost.total) == pytest.approx((1.0, 1.0, 2.0))
    # V=3 adds 0.01*9; round 3 discounts the payment by 0.81^2.
    params = ServerCostParams(gamma=0.5, discount=0.81, dim=90, rounds=10, grad_bound=3.0)
    cost = server_cost(2.0, rho=rho, data_sizes=SIZES, t=3, params=params)
    assert (cost.accuracy, cost.payment) == pytest.approx((1.09, 0.6561))


def test_server_cost_drops_inactive_clients():
    # Clients with rho=0 are not aggregated: same cost as the active pair alone.
    params = ServerCostParams(gamma=0.3, discount=0.9, dim=5, rounds=4)
    full = server_cost(3.0, rho=[1.0, 2.0, 0.0], data_sizes=[4.0, 5.0, 6.0], t=2, params=params)
    pair = server_cost(3.0, rho=[1.0, 2.0], data_sizes=[4.0, 5.0], t=2, params=params)
    assert full == pair


def test_optimal_reward_stationary_and_growth():
    # note §4.5: at R*, A/R* = (1-gamma) pi^(t-1) R*, and R_{t+1}/R_t = pi^(-1/2).
    params = ServerCostParams(gamma=0.4, discount=0.9429, dim=7850, rounds=30, clip=2.0)
    nu, sizes = np.array([1.0, 1.01, 0.99, 1.02]), np.array([300.0, 500.0, 800.0, 1000.0])
    a = accuracy_constant(nu, sizes, phi=1.0, params=params)
    for t in (1, 7, 30):
        r = optimal_reward(a, t=t, params=params)
        cost = server_cost(
            r, rho=follower_equilibrium(nu, reward=r, phi=1.0), data_sizes=sizes, t=t, params=params
        )
        assert cost.accuracy == pytest.approx(cost.payment, rel=1e-12)
    ratio = optimal_reward(a, t=30, params=params) / optimal_reward(a, t=1, params=params)
    assert ratio == pytest.approx(0.9429 ** (-29 / 2))
    assert ratio == pytest.approx(2.35, abs=0.005)  # note §4.2 table, MNIST


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"gamma": 1.0, "discount": 0.9}, "gamma"),
        ({"gamma": 0.5, "discount": 0.0}, "discount"),
        ({"gamma": 0.5, "discount": 0.9, "dim": 0}, "dim"),
        ({"gamma": 0.5, "discount": 0.9, "lam": -1.0}, "lam"),
        ({"gamma": 0.5, "discount": 0.9, "grad_bound": -1.0}, "grad_bound"),
    ],
)
def test_params_validation(kwargs, key):
    with pytest.raises(ScenarioError, match=key):
        ServerCostParams(**kwargs)


def test_input_validation():
    with pytest.raises(ScenarioError, match="nu"):
        follower_coefficients([1.0, -1.0], phi=1.0)
    with pytest.raises(ScenarioError, match="phi"):
        follower_coefficients([1.0, 1.0], phi=0.0)
    with pytest.raises(ScenarioError, match="reward"):
        follower_equilibrium([1.0, 1.0], reward=-1.0, phi=1.0)
    with pytest.raises(ScenarioError, match="'t'"):
        optimal_reward(1.0, t=11, params=PARAMS)
    with pytest.raises(ScenarioError, match="rho"):
        server_cost(1.0, rho=[0.0, 0.0, 0.0], data_sizes=SIZES, t=1, params=PARAMS)
