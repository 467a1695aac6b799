"""Shapley estimators (fedgame.game.shapley) against games whose values are worked out by
hand, the axioms (efficiency, symmetry, null player) and the exact values they estimate."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.game.shapley import (
    all_coalitions,
    exact_shapley,
    gtg_shapley,
    shapley_shares,
    tmc_shapley,
)


class Table:
    """A game given by a table of 2^K values indexed by the coalition's bits; counts calls."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.asarray(values, dtype=float)
        self.calls = 0
        self.rows = 0

    def __call__(self, masks: np.ndarray) -> np.ndarray:
        self.calls += 1
        self.rows += masks.shape[0]
        bits = (masks.astype(np.int64) << np.arange(masks.shape[1])).sum(axis=1)
        return self.values[bits]


def game_of(k: int, v) -> Table:
    return Table(np.array([v(frozenset(np.flatnonzero(m).tolist())) for m in all_coalitions(k)]))


def by_permutations(k: int, v) -> np.ndarray:
    """Shapley values by the definition over all K! orders (independent of exact_shapley)."""
    phi = np.zeros(k)
    for order in itertools.permutations(range(k)):
        seen: set[int] = set()
        for i in order:
            phi[i] += v(frozenset(seen | {i})) - v(frozenset(seen))
            seen.add(i)
    return phi / math.factorial(k)


def test_two_players_worked_by_hand():
    # v(∅) = 0, v(1) = 1, v(2) = 2, v(12) = 4: φ_1 = ½(1 − 0) + ½(4 − 2) = 1.5, φ_2 = 2.5
    table = Table(np.array([0.0, 1.0, 2.0, 4.0]))
    found = exact_shapley(table, 2)
    np.testing.assert_allclose(found.phi, [1.5, 2.5])
    assert table.calls == 1 and found.evaluations == 4


def test_majority_and_glove_games():
    # 3-player majority: v = 1 when |S| >= 2: each 1/3
    maj = game_of(3, lambda s: float(len(s) >= 2))
    np.testing.assert_allclose(exact_shapley(maj, 3).phi, [1 / 3] * 3)
    # glove game: player 0 holds a left glove, 1 and 2 right gloves: φ = (2/3, 1/6, 1/6)
    glove = game_of(3, lambda s: float(0 in s and bool(s & {1, 2})))
    np.testing.assert_allclose(exact_shapley(glove, 3).phi, [2 / 3, 1 / 6, 1 / 6])


games = st.integers(1, 6).flatmap(
    lambda k: st.tuples(st.just(k), st.lists(st.floats(-5, 5), min_size=2**k, max_size=2**k))
)


@settings(max_examples=100, deadline=None)
@given(game=games)
def test_exact_is_the_definition_and_efficient(game):
    k, values = game
    table = Table(np.array(values))
    phi = exact_shapley(table, k).phi

    def v(s):
        return values[sum(1 << i for i in s)]

    np.testing.assert_allclose(phi, by_permutations(k, v), atol=1e-9)
    assert phi.sum() == pytest.approx(values[-1] - values[0], abs=1e-9)


def test_symmetric_players_share_and_a_null_player_gets_nothing():
    # v(S) = (number of players 0..2 in S)²; player 3 adds nothing
    v = lambda s: float(len(s - {3}) ** 2)  # noqa: E731
    phi = exact_shapley(game_of(4, v), 4).phi
    np.testing.assert_allclose(phi[:3], [3.0, 3.0, 3.0])
    assert phi[3] == pytest.approx(0.0)


def test_tmc_without_truncation_converges_to_exact():
    rng = np.random.default_rng(0)
    values = rng.normal(size=2**5)
    values[0] = 0.0
    exact = exact_shapley(Table(values), 5).phi
    table = Table(values)
    found = tmc_shapley(table, 5, permutations=4000, rng=np.random.default_rng(1))
    # standard error of a mean of 4000 marginals of sd < 3: < 0.05
    np.testing.assert_allclose(found.phi, exact, atol=0.15)
    assert found.phi.sum() == pytest.approx(values[-1] - values[0], abs=1e-9)  # each order sums
    # batched: one oracle call per position (plus v(∅), v(N)), not one per coalition
    assert table.calls <= 5 + 1


def test_truncation_skips_evaluations_once_the_prefix_reaches_v_full():
    # an additive game where player 0 carries all the value: after it the prefix equals v(N)
    v = lambda s: float(0 in s)  # noqa: E731
    table = game_of(6, v)
    found = tmc_shapley(table, 6, permutations=50, rng=np.random.default_rng(2), tol=1e-6)
    np.testing.assert_allclose(found.phi, [1, 0, 0, 0, 0, 0])
    untruncated = game_of(6, v)
    tmc_shapley(untruncated, 6, permutations=50, rng=np.random.default_rng(2), tol=0.0)
    assert table.rows < untruncated.rows


def test_gtg_estimates_exact_and_truncates_a_flat_round():
    rng = np.random.default_rng(3)
    weights = rng.uniform(0, 1, 6)
    v = lambda s: float(sum(weights[i] for i in s)) ** 0.5  # noqa: E731
    exact = exact_shapley(game_of(6, v), 6).phi
    found = gtg_shapley(game_of(6, v), 6, rng=np.random.default_rng(4), max_blocks=50, tol=0.0)
    np.testing.assert_allclose(found.phi, exact, atol=0.03)
    assert found.permutations % 6 == 0  # whole guided blocks
    flat = gtg_shapley(game_of(6, lambda s: 1.0), 6, rng=np.random.default_rng(5), tol_round=1e-3)
    assert flat.phi.tolist() == [0.0] * 6 and flat.evaluations == 2


def test_shares_split_the_reward_by_clipped_values():
    np.testing.assert_allclose(shapley_shares(np.array([1.0, 3.0, -2.0]), reward=8.0), [2, 6, 0])
    np.testing.assert_allclose(shapley_shares(np.array([-1.0, 0.0]), reward=8.0), [0, 0])
