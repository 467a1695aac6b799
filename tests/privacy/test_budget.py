"""The one budget path: a round's releases priced together, refused past ε_total, charged."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.errors import BudgetExhausted
from fedgame.privacy.accountants import make_accountant
from fedgame.privacy.base import Charges
from fedgame.privacy.budget import PrivacyBudget


def laplace_budget(totals: list[float]) -> PrivacyBudget:
    n = len(totals)
    return PrivacyBudget(
        make_accountant("basic"), epsilon_total=np.array(totals), delta_total=np.full(n, 1e-5)
    )


def test_a_client_selected_twice_is_priced_for_both_releases() -> None:
    budget = laplace_budget([1.0, 2.0])
    ids = np.array([0, 0, 1, 1])
    one_eps_each = Charges("laplace", noise_multiplier=1.0, size=4)  # each release is 1-DP
    keep = budget.admit(ids, one_eps_each)
    np.testing.assert_array_equal(keep, [True, False, True, True])
    budget.charge(ids[keep], one_eps_each[keep])
    np.testing.assert_allclose(budget.spent, [1.0, 2.0])


def test_a_refused_release_withdraws_the_clients_later_releases() -> None:
    budget = laplace_budget([1.5])
    ids = np.zeros(3, dtype=np.int64)
    costs = Charges("laplace", noise_multiplier=np.array([2.0, 0.5, 4.0]))  # 0.5, 2, 0.25 epsilon
    np.testing.assert_array_equal(budget.admit(ids, costs), [True, False, False])


def test_free_releases_always_pass_and_cost_nothing() -> None:
    budget = laplace_budget([0.1])
    keep = budget.admit(np.array([0, 0]), Charges("none", size=2))
    assert keep.all()
    uniq, spent = budget.charge(np.array([0]), Charges("none", size=1))
    assert uniq.size == 0 and spent.size == 0 and budget.spent[0] == 0.0


def test_charging_past_the_budget_is_an_error_not_a_silent_overspend() -> None:
    budget = laplace_budget([1.0])
    with pytest.raises(BudgetExhausted, match=r"must pass PrivacyBudget\.admit"):
        two_dp = Charges("laplace", noise_multiplier=0.5, size=1)
        budget.charge(np.array([0]), two_dp)
    assert budget.spent[0] == 0.0


def test_exactly_the_planned_releases_fit() -> None:
    budget = laplace_budget([1.0])
    tenth = Charges("laplace", noise_multiplier=10.0, size=1)
    for _ in range(10):
        assert budget.admit(np.array([0]), tenth)[0]
        budget.charge(np.array([0]), tenth)
    assert not budget.admit(np.array([0]), tenth)[0]
    assert budget.remaining()[0] == pytest.approx(0.0, abs=1e-12)


def test_charging_the_admitted_batch_reuses_its_prices_and_matches_charge() -> None:
    ids = np.array([0, 1, 2])
    costs = Charges("laplace", noise_multiplier=np.array([2.0, 4.0, 1.0]))
    fast, slow = laplace_budget([3.0] * 3), laplace_budget([3.0] * 3)
    assert fast.admit(ids, costs).all()
    fast.charge_admitted(np.array([True, False, True]))
    slow.charge(ids[[0, 2]], costs[np.array([0, 2])])
    np.testing.assert_allclose(fast.spent, slow.spent)
    np.testing.assert_allclose(fast.spent, [0.5, 0.0, 1.0])
    with pytest.raises(BudgetExhausted, match="admit first"):
        fast.charge_admitted(np.array([True, True, True]))  # each admission charges once
