"""The ``shapley`` incentive in a running model: the exact estimate's total is the round's
accuracy gain, the reward is split by the clipped values, and the estimate is kept on the
round state."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fedgame.model import FedGameModel
from fedgame.scenario.load import validate


def scenario(tiny, clients=6, **incentive):
    data = copy.deepcopy(tiny)
    data.update(
        rounds=3,
        incentive={"kind": "shapley", "reward": 2.0, "samples": None, **incentive},
        policy={"kind": "fixed", "rho": 0.5},
        selection={"kind": "all"},
        privacy={"kind": "zcdp_gaussian", "clip": 1.0},
    )
    data["population"].update(clients=clients)
    data["population"]["budget"]["epsilon"] = {"dist": "uniform", "low": 20.0, "high": 40.0}
    return validate(data)


def test_exact_values_add_up_to_the_rounds_accuracy_gain_and_split_the_reward(tiny):
    model = FedGameModel(scenario(tiny, estimator="exact"))
    for _ in range(3):
        before = model.test_accuracy
        model.step()
        phi = model.state.contributions
        assert phi is not None
        delivered = model.state.selected[model.state.uploaded]
        assert sorted(phi) == sorted(delivered.tolist())
        # efficiency: Σφ = v(N) − v(∅), the accuracy after the round minus before (fedavg,
        # no momentum, no central noise: the grand coalition's model is the new global one)
        assert sum(phi.values()) == pytest.approx(model.test_accuracy - before, abs=1e-9)
        positive = {i: max(v, 0.0) for i, v in phi.items()}
        total = sum(positive.values())
        for i, v in positive.items():
            want = 2.0 * v / total if total > 0 else 0.0
            assert model.payments.get(i, 0.0) == pytest.approx(want)
        assert model.extra["shapley_evals"] == 2 ** len(delivered)
        assert model.extra["payments_total"] == pytest.approx(2.0 if total > 0 else 0.0)


@pytest.mark.parametrize("estimator", ["tmc", "gtg"])
def test_the_estimators_run_batched_in_a_model(tiny, estimator):
    model = FedGameModel(scenario(tiny, clients=10, estimator=estimator, permutations=5))
    model.step()
    phi = model.state.contributions
    assert phi is not None and len(phi) == int(model.state.uploaded.sum())
    assert all(np.isfinite(list(phi.values())))
    assert model.extra["shapley_evals"] > 0 and model.extra["shapley_s"] >= 0


def test_regret_of_declining_is_the_unpaid_cost(tiny):
    model = FedGameModel(scenario(tiny, estimator="exact"))
    model.step()
    incentive = model.server.incentive
    settlement = model.server.settlement
    out = settlement.outcome
    ids = np.arange(len(model.clients))
    gains = incentive.deviation_gains(
        ids, settlement=settlement, faults=model.state.faults, rng=np.random.default_rng(0)
    )
    nu = model.table.column("privacy_value")
    for j, i in enumerate(out.ids.tolist()):
        cost = nu[i] * 0.5  # φ = 1, c(ρ) = ρ = 0.5
        assert out.true_cost[j] == pytest.approx(cost)
        assert gains[i] == pytest.approx(max(0.0, cost - out.payments[j]))
    assert (gains[np.setdiff1d(ids, out.ids)] == 0).all()


def test_other_incentives_leave_no_contributions(tiny):
    model = FedGameModel(validate(copy.deepcopy(tiny)))
    model.step()
    assert model.state.contributions is None


def test_an_audit_values_contributions_under_any_incentive(tiny):
    data = copy.deepcopy(tiny)
    data["game"] = {"audit_contributions": True}
    model = FedGameModel(validate(data))
    before = model.test_accuracy
    model.step()
    phi = model.state.contributions
    delivered = model.state.selected[model.state.uploaded]
    assert phi is not None and sorted(phi) == sorted(delivered.tolist())
    # exact (at most 5 delivered of uniform k = 5): the values add up to the accuracy gain
    assert sum(phi.values()) == pytest.approx(model.test_accuracy - before, abs=1e-9)
    assert not any(model.payments.values())  # incentive none still pays nothing
