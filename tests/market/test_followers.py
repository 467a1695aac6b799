"""The clients' joint play in several contests under one budget (fedgame.market.followers)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from fedgame.market.followers import joint_contests


def play(nu, rewards, caps, players=None, phi=None):
    nu = np.asarray(nu, dtype=float)
    rewards = np.asarray(rewards, dtype=float)
    if players is None:
        players = np.ones((rewards.size, nu.size), dtype=bool)
    phi = np.ones(rewards.size) if phi is None else np.asarray(phi, dtype=float)
    return joint_contests(
        nu, rewards=rewards, phi=phi, players=players, caps=np.asarray(caps, dtype=float)
    )


def test_one_server_two_equal_clients_is_theorem_1():
    # ρ_i = (k−1)(Σν − (k−1)ν_i)/(φ(Σν)²)·R = 1·(2 − 1)/4 = 0.25 (paper 003 Eq. 20)
    out = play([1.0, 1.0], [1.0], [np.inf, np.inf])
    np.testing.assert_allclose(out.rho, [[0.25, 0.25]])
    assert out.converged


def test_uncapped_contests_separate():
    # three clients ν = (1, 2, 3), k = 3: C_i = 2(6 − 2ν_i)/36 = (2/9, 1/9, 0)
    out = play([1.0, 2.0, 3.0], [1.0, 4.0], [np.inf] * 3)
    np.testing.assert_allclose(out.rho[0], [2 / 9, 1 / 9, 0.0], atol=1e-12)
    np.testing.assert_allclose(out.rho[1], [8 / 9, 4 / 9, 0.0], atol=1e-12)


def test_a_binding_budget_is_split_and_never_passed():
    # two equal servers want 0.25 + 0.25 from each of two equal clients; each has 0.2:
    # by symmetry 0.1 to each server (each contest capped at 0.1 is a best response: the
    # uncapped answer 0.25 is above the cap and utility is concave)
    out = play([1.0, 1.0], [1.0, 1.0], [0.2, 0.2])
    np.testing.assert_allclose(out.rho, [[0.1, 0.1], [0.1, 0.1]], atol=1e-12)
    assert out.converged


def test_an_unreachable_server_gets_nothing_and_the_other_gets_its_fill():
    players = np.array([[True, True], [False, True]])
    out = play([1.0, 1.0], [1.0, 1.0], [np.inf, np.inf], players=players)
    np.testing.assert_allclose(out.rho[0], [0.25, 0.25])
    assert (out.rho[1] == 0).all()  # one player cannot make a contest


def _utility(r, s, i, rho, rewards, phi, nu):
    others = rho[s].sum() - rho[s, i]
    share = r / (r + others) if r + others > 0 else 0.0
    return rewards[s] * share - phi[s] * nu[i] * r


@settings(max_examples=40)
@given(
    nu=st.lists(st.floats(0.5, 2.0), min_size=2, max_size=5),
    rewards=st.lists(st.floats(0.1, 5.0), min_size=1, max_size=3),
    cap_scale=st.floats(0.05, 3.0),
)
def test_within_budgets_and_each_allocation_a_best_response(nu, rewards, cap_scale):
    nu = np.array(nu)
    rewards = np.array(rewards)
    phi = np.ones(rewards.size)
    caps = cap_scale * np.linspace(0.2, 1.0, nu.size)
    out = play(nu, rewards, caps)
    rho = out.rho
    assert (rho >= 0).all()
    assert (rho.sum(axis=0) <= caps * (1 + 1e-9) + 1e-12).all()
    if not out.converged:
        return
    # independently: client i's allocation to s maximises its utility in s over
    # [0, cap_i − what it gives the others] (bounded scalar search, not the contest solver)
    for s in range(rewards.size):
        for i in range(nu.size):
            room = max(caps[i] - (rho[:, i].sum() - rho[s, i]), 0.0)
            if room <= 1e-12:
                continue
            best = minimize_scalar(
                lambda r, s=s, i=i: -_utility(r, s, i, rho, rewards, phi, nu),
                bounds=(0.0, room),
                method="bounded",
                options={"xatol": 1e-12},
            )
            here = _utility(rho[s, i], s, i, rho, rewards, phi, nu)
            assert here >= -best.fun - 1e-7 * max(1.0, abs(best.fun))
