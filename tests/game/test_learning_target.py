"""The learning rules' target (exact expected-delivery equilibrium) and AdaHedge's pieces."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.game.contest import contest_equilibrium, exact_expected_share
from fedgame.game.learning import (
    MAX_EXACT_PLAYERS,
    adaptive_rate,
    expected_best_responses,
    expected_delivery_equilibrium,
    hedge_weights,
    mixability_gap,
)


def test_two_players_worked_value():
    # nu = 1, phi = 1, R = 3, p = (0.5, 0.9). S_-1 = rho_2 w.p. 0.9 (else 0), so the first-order
    # conditions are R*p_2*rho_2/T^2 = 1 and R*p_1*rho_1/T^2 = 1, T = rho_1 + rho_2:
    # rho_1 = (p_2/p_1)*rho_2 = 1.8*rho_2, T = 2.8*rho_2, 3*0.9*rho_2 = 7.84*rho_2^2.
    rho = expected_delivery_equilibrium([1.0, 1.0], reward=3.0, p=[0.5, 0.9])
    assert rho[1] == pytest.approx(2.7 / 7.84, rel=1e-9)
    assert rho[0] == pytest.approx(1.8 * 2.7 / 7.84, rel=1e-9)
    ce = contest_equilibrium([1.0, 1.0], reward=3.0, p=[0.5, 0.9])
    assert np.abs(ce - rho).sum() > 0.1  # the certainty equivalent is another profile


@settings(max_examples=15)
@given(st.lists(st.floats(0.5, 2.0), min_size=2, max_size=6), st.floats(0.5, 5.0))
def test_full_delivery_is_theorem_1(nu, reward):
    rho = expected_delivery_equilibrium(nu, reward=reward, phi=1.3)
    assert rho == pytest.approx(contest_equilibrium(nu, reward=reward, phi=1.3), abs=1e-9)


def _exact_utility(rho, i, nu, p, reward):
    return p[i] * (reward * exact_expected_share(rho, p)[i] - nu[i] * rho[i])


@settings(max_examples=15)
@given(
    st.lists(st.tuples(st.floats(0.5, 2.0), st.floats(0.5, 1.0)), min_size=2, max_size=5),
    st.floats(0.5, 5.0),
)
@example(  # undamped Gauss-Seidel sweeps 2-cycled here (player 0 entering and leaving)
    players=[
        (1.8621996689933047, 0.5),
        (1.6965621105846582, 0.5),
        (1.4278210548512964, 0.5),
        (0.6875, 0.9765625),
        (0.8125, 0.875),
    ],
    reward=1.0,
)
@example(  # undamped sweeps ended with a best-response gap of 0.0064 here
    players=[
        (1.27289730559654, 1.0),
        (1.5099087683271242, 1.0),
        (0.9429, 0.8148279910709715),
        (0.5625, 0.875),
        (0.5625, 0.875),
    ],
    reward=1.0,
)
@example(  # a best-response gap of 1.4e-9 at Σρ = 1.6: within the solver's tolerance
    players=[
        (0.6674530140537471, 0.974667307574373),
        (1.6965621105846582, 0.5),
        (1.8621996689933047, 0.5),
        (0.8117598386090102, 0.85),
    ],
    reward=2.456516154824953,
)
def test_no_player_gains_by_deviating_in_the_exact_game(players, reward):
    """Checked with contest.exact_expected_share, an independent enumeration."""
    nu = np.array([v for v, _ in players])
    p = np.array([q for _, q in players])
    rho = expected_delivery_equilibrium(nu, reward=reward, p=p)
    # the solver's guarantee: every best-response gap below 1e-9·Σρ
    assert expected_best_responses(rho, nu, reward=reward, phi=1.0, p=p) == pytest.approx(
        rho, abs=1e-9 * max(rho.sum(), 1e-300)
    )
    for i in range(nu.size):
        here = _exact_utility(rho, i, nu, p, reward)
        if rho[i] == 0:  # out: the supremum as rho_i -> 0+ wins R when every rival straggles
            alone = np.prod([1 - p[j] for j in range(nu.size) if j != i and rho[j] > 0])
            here = p[i] * reward * alone
        scale = rho.sum()
        for factor in (0.0, 0.9, 0.99, 1.01, 1.1, 1e-4, 1e-2):
            moved = rho.copy()
            moved[i] = factor * rho[i] if rho[i] > 0 else factor * scale
            assert _exact_utility(moved, i, nu, p, reward) <= here + 1e-9


def test_stragglers_raise_the_exact_budgets_above_the_certainty_equivalent():
    nu, p = np.linspace(0.8, 1.2, 10), np.full(10, 0.8)
    exact = expected_delivery_equilibrium(nu, reward=3.0, p=p)
    ce = contest_equilibrium(nu, reward=3.0, p=p)
    assert exact.sum() > ce.sum()  # E[rho/(rho+S)] is convex in S
    assert np.abs(exact - ce).sum() / exact.sum() == pytest.approx(0.052, abs=0.002)


def test_too_many_players_for_enumeration():
    with pytest.raises(ScenarioError, match="players"):
        expected_delivery_equilibrium(np.ones(MAX_EXACT_PLAYERS + 1), reward=1.0, p=0.9)


def test_follow_the_leader_weights_and_zero_gaps():
    cumulative = np.array([[1.0, 3.0, 3.0], [0.0, 1.0, 2.0]])
    w = hedge_weights(cumulative, [math.inf, 1.0])
    assert w[0] == pytest.approx([0.0, 0.5, 0.5])
    assert w[1] == pytest.approx(np.exp([0.0, 1.0, 2.0]) / np.exp([0.0, 1.0, 2.0]).sum())
    same = np.full((2, 3), 0.4)  # every expert earns the same: nothing to mix
    assert mixability_gap(w, same, [math.inf, 1.0]) == pytest.approx([0.0, 0.0], abs=1e-12)
    assert adaptive_rate([0.0, 2.0], 4)[0] == math.inf
    assert adaptive_rate([0.0, 2.0], 4)[1] == pytest.approx(math.log(4) / 2)


@settings(max_examples=20)
@given(st.integers(0, 2**16), st.integers(2, 12), st.integers(5, 80))
def test_adahedge_regret_is_at_most_twice_the_gap(seed, experts, rounds):
    """de Rooij et al. (2014), Lemma 3 with η_t = ln K/Δ_(t−1): regret ≤ 2Δ_T; and Δ_T grows
    like sqrt(T ln K) for payoffs in [−1, 1] (Thm 6: Δ ≤ sqrt(L ln K) + (4/3 ln K + 2), in
    loss ranges of 2)."""
    rng = np.random.default_rng(seed)
    payoffs = rng.uniform(-1.0, 1.0, size=(rounds, experts)) + rng.uniform(-0.5, 0.5, experts)
    payoffs = np.clip(payoffs, -1.0, 1.0)
    cumulative, gap, earned = np.zeros((1, experts)), np.zeros(1), 0.0
    for u in payoffs:
        eta = adaptive_rate(gap, experts)
        w = hedge_weights(cumulative, eta)
        earned += float(w[0] @ u)
        gap += mixability_gap(w, u[None, :], eta)
        cumulative += u
    regret = float(cumulative.max()) - earned
    assert regret <= 2.0 * gap[0] + 1e-9
    log_k = math.log(experts)
    assert gap[0] <= 2.0 * math.sqrt(2.0 * rounds * log_k) + 2.0 * (4.0 / 3.0 * log_k + 2.0)
