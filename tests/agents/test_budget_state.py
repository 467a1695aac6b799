"""Values derived from the budget columns are computed once per budget state of the table
(``ClientTable.budget_derived``) and shared: the same numbers as computing them from the
views, recomputed whenever a budget may have changed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgame.game.monitor import RoundMonitor
from fedgame.game.rules import GameRules
from fedgame.mechanisms.policy.market import rho_left
from fedgame.model import FedGameModel
from fedgame.scenario.load import validate


@pytest.fixture
def model(tiny):
    return FedGameModel(validate(tiny))


def test_computed_once_per_state_and_kept_for_the_last_two(model):
    table, calls = model.table, []

    def compute():
        calls.append(table.budget_version)
        return table.epsilon_spent.copy()

    first = table.budget_derived("spent", compute)
    assert table.budget_derived("spent", compute) is first and len(calls) == 1
    assert not first.flags.writeable  # shared: readers copy before writing
    at_play = table.budget_version
    table.record_release(np.array([0, 2]), np.array([0.25, 0.5]))
    after = table.budget_derived("spent", compute)
    assert len(calls) == 2 and after[0] == 0.25 and first[0] == 0.0
    assert table.budget_derived("spent", compute, version=at_play) is first
    table.record_release(np.array([1]), np.array([0.1]))
    table.budget_derived("spent", compute)
    assert table.budget_derived("spent", compute, version=at_play) is None  # dropped


def test_agent_setters_start_a_new_budget_state(model):
    before = rho_left(model.table.views())
    agent = model.clients[3]
    agent.epsilon_total = agent.epsilon_total * 2  # a static column
    grown = rho_left(model.table.views())
    assert grown[3] > before[3] and np.array_equal(np.delete(grown, 3), np.delete(before, 3))
    agent.epsilon_spent = agent.epsilon_total / 2  # a state column
    assert rho_left(model.table.views())[3] < grown[3]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    spent_share=st.lists(st.floats(0.0, 1.5), min_size=12, max_size=12),
    pick=st.lists(st.integers(0, 11), min_size=1, max_size=12, unique=True),
)
def test_shared_budgets_equal_the_views_own_bit_for_bit(model, spent_share, pick):
    table = model.table  # each example sets every client's ε spent: no state carries over
    ids = np.arange(len(table))
    table.record_release(ids, table.epsilon_total * np.array(spent_share)[: len(table)])
    views = table.views(np.sort(np.array(pick)))
    shared = rho_left(views)
    own = rho_left(list(views))  # a plain sequence of views: converted from its columns
    assert np.array_equal(shared, own)
    assert np.array_equal(rho_left(table.views())[views.ids], shared)


def test_the_round_check_reads_the_budgets_at_play(tiny):
    tiny["incentive"] = {"kind": "qi_dpfl"}
    model = FedGameModel(validate(tiny))
    monitor = RoundMonitor(GameRules(), contest=True, clip=1.0)
    with pytest.raises(RuntimeError, match="at_play"):
        monitor.check(model)
    at_play = rho_left(model.table.views())
    model.step()  # the model notes the state at play every round before its check
    assert np.isfinite(model.monitor.round_metrics()["nash_gap_max"])
    played = model.table.extra["rho_equilibrium"]
    assert np.all(played[np.isfinite(played)] <= at_play[np.isfinite(played)] * (1 + 1e-9))


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    releases=st.lists(
        st.lists(st.tuples(st.integers(0, 11), st.floats(0.0, 1.5)), min_size=1, max_size=6),
        min_size=1,
        max_size=4,
    )
)
def test_after_a_release_only_the_released_rows_are_computed_again(model, releases):
    table = model.table
    table.record_release(np.arange(len(table)), np.zeros(len(table)))
    rho_left(table.views())  # the state before the releases, remembered
    calls: list[int] = []

    def spent_rows(views):
        calls.append(len(views))
        return views.column("epsilon_spent")

    table.views().budget_derived("spent rows", spent_rows)
    for release in releases:
        ids = np.unique([i for i, _ in release])
        share = dict(release)
        spent = np.array([table.epsilon_total[i] * share[i] for i in ids])
        table.record_release(ids, spent)
        calls.clear()
        np.testing.assert_array_equal(
            table.views().budget_derived("spent rows", spent_rows), table.epsilon_spent
        )
        assert calls == [ids.size]  # the released rows only
        # bit for bit what every client's views give (a plain sequence: from its columns)
        assert rho_left(table.views()).tobytes() == rho_left(list(table.views())).tobytes()


def test_rows_give_the_bits_of_the_whole_column_at_scale():
    from fedgame.mechanisms.policy.market import epsilon_to_zcdp_uncached

    rng = np.random.default_rng(1)
    eps = rng.uniform(0.0, 60.0, 100_003)
    delta = rng.uniform(1e-7, 1e-3, eps.size)
    whole = epsilon_to_zcdp_uncached(eps, delta)
    scattered = np.sort(rng.choice(eps.size, 100, replace=False))
    for ids in (scattered, np.arange(eps.size - 7, eps.size)):
        assert epsilon_to_zcdp_uncached(eps[ids], delta[ids]).tobytes() == whole[ids].tobytes()
