"""QI-DPFL incentives end to end on the tiny scenario, and their per-round bookkeeping."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.game.stackelberg import (
    ServerCostParams,
    accuracy_constant,
    follower_equilibrium,
    optimal_reward,
)
from fedgame.mechanisms.incentive.game import CLIENT_COLUMNS, ROUND_COLUMNS, ContestTerms
from fedgame.mechanisms.incentive.qi_dpfl import QiDpfl
from fedgame.run.single import simulate
from fedgame.scenario.load import validate
from fedgame.views import ClientView, MarketView, Offer, Response, RoundInfo, SetupContext


def game_scenario(tiny, **changes):
    tiny["population"]["privacy_value"] = {"dist": "uniform", "low": 0.95, "high": 1.05}
    tiny["population"]["straggle_prob"] = 0.0
    tiny["network"]["faults"]["link_failure"] = 0.0
    tiny["privacy"] = {"kind": "zcdp_gaussian", "clip": 1.0}
    tiny["incentive"] = {"kind": "qi_dpfl", "dim": 650, "lam": 1.0}
    tiny["policy"] = {"kind": "best_response"}
    tiny["selection"] = {"kind": "all"}
    tiny.update(changes)
    return validate(tiny)


def view(i, nu, size=100):
    return ClientView(i, size, 0.1, nu, 10.0, 1e-5, 0.0, 1.0, 1e-5, 0.0, False)


@pytest.mark.parametrize("kind", ["qi_dpfl", "max", "random", "fixed", "stackelberg"])
def test_incentive_runs_and_columns_are_consistent(tiny, kind):
    inc = {"kind": kind, "dim": 650, "lam": 1.0}
    result = simulate(game_scenario(tiny, incentive=inc))
    rounds, clients = result.rounds, result.clients
    assert len(rounds) == 3 and set(ROUND_COLUMNS) <= set(rounds.columns)
    assert set(CLIENT_COLUMNS) <= set(clients.columns)
    for t, row in rounds.set_index("round").iterrows():
        mine = clients[(clients["round"] == t) & clients["uploaded"]]
        assert row["uploaded"] > 0
        assert row["sum_rho"] == pytest.approx(mine["rho"].sum(), rel=1e-12)
        # everyone delivers here (no stragglers, no link failures): payments add up to R
        assert row["payments_total"] == pytest.approx(row["reward"], rel=1e-12)
        assert mine["payment"].to_numpy() == pytest.approx(mine["reward"].to_numpy())
        assert mine["game_utility"].to_numpy() == pytest.approx(
            (mine["payment"] - mine["privacy_value"] * mine["rho"]).to_numpy()
        )
        assert row["server_cost"] == pytest.approx(
            row["server_cost_accuracy"] + row["server_cost_payment"]
        )
        assert row["solver_converged"] == 1.0
    if kind in ("qi_dpfl", "stackelberg", "fixed"):  # best responses to the announced R
        assert rounds["nash_gap_max"].max() < 1e-9


def test_qi_dpfl_reward_is_theorem2_and_grows_by_pi():
    inc = QiDpfl(QiDpfl.Config(phi=0.25, gamma=0.5, discount=0.81, dim=90, lam=1.0))
    inc.prepare(
        SetupContext(num_clients=3, rounds=10, clients=(), planned_participations=10),
        rng=np.random.default_rng(0),
    )
    clients = tuple(view(i, nu, 1) for i, nu in enumerate([2.0, 3.0, 3.0]))
    # test_stackelberg's hand instance: A = 2, R_1* = 2, R_2* = 2/0.9.
    r1 = inc.offer(MarketView(clients, RoundInfo(1, 10, 3)), info=RoundInfo(1, 10, 3))
    r2 = inc.offer(MarketView(clients, RoundInfo(2, 10, 3)), info=RoundInfo(2, 10, 3))
    assert r1.reward == pytest.approx(2.0) and r2.reward == pytest.approx(2 / 0.9)
    assert r1.excluded == frozenset()


def test_infeasible_clients_are_removed_and_excluded():
    inc = QiDpfl(QiDpfl.Config(dim=90))
    inc.prepare(
        SetupContext(num_clients=4, rounds=5, clients=(), planned_participations=5),
        rng=np.random.default_rng(0),
    )
    nu = [1.0, 1.0, 1.0, 5.0]  # (N-1)·5 = 15 >= 8: client 3 breaks Theorem 1's condition
    clients = tuple(view(i, v) for i, v in enumerate(nu))
    info = RoundInfo(1, 5, 4)
    offer = inc.offer(MarketView(clients, info), info=info)
    assert offer.excluded == frozenset({3})
    params = ServerCostParams(gamma=0.5, discount=0.9429, dim=90, rounds=5)
    a = accuracy_constant(np.ones(3), np.full(3, 100.0), phi=1.0, params=params)
    assert offer.reward == pytest.approx(optimal_reward(a, t=1, params=params))
    rho = follower_equilibrium(np.ones(3), reward=offer.reward, phi=1.0)
    settled = inc.settle(offer, [Response(i, True, rho=r) for i, r in enumerate(rho)], info=info)
    assert sum(settled.payments.values()) == pytest.approx(offer.reward)
    metrics, per_client = settled.round_metrics, settled.client_metrics
    assert metrics["removed_for_feasibility"] == 1.0
    assert dict(per_client["removed"]) == {3: 1.0, 0: 0.0, 1: 0.0, 2: 0.0}


def test_payments_are_shares_over_delivered_only():
    inc = QiDpfl(QiDpfl.Config(dim=90))
    inc.prepare(
        SetupContext(num_clients=3, rounds=5, clients=(), planned_participations=5),
        rng=np.random.default_rng(0),
    )
    ids = np.arange(2)
    terms = ContestTerms(ids, ids[:0], np.ones(2), np.full(2, 10.0), np.full(2, np.inf))
    offer = Offer(reward=6.0, terms=terms)
    delivered = [Response(0, True, rho=1.0), Response(1, True, rho=2.0)]
    settled = inc.settle(offer, delivered, info=RoundInfo(1, 5, 3))
    assert settled.payments == pytest.approx({0: 2.0, 1: 4.0})
    assert settled.offer is offer
    np.testing.assert_allclose(settled.outcome.payments, [2.0, 4.0])
    np.testing.assert_allclose(settled.outcome.true_cost, [1.0, 2.0])  # φ·ν·ρ, φ = ν = 1
    with pytest.raises(ValueError, match="ContestTerms"):
        inc.settle(Offer(reward=6.0), delivered, info=RoundInfo(1, 5, 3))


@pytest.mark.parametrize(
    ("changes", "key"),
    [
        ({"gamma": 1.0}, "gamma"),
        ({"gamma": 0.0}, "gamma"),
        ({"discount": 0.0}, "discount"),
        ({"discount": 1.5}, "discount"),
        ({"phi": -1.0}, "phi"),
    ],
)
def test_bad_game_constants_are_scenario_errors(tiny, changes, key):
    from fedgame.errors import ScenarioError

    with pytest.raises(ScenarioError, match=f"incentive.{key}"):
        game_scenario(tiny, incentive={"kind": "qi_dpfl", **changes})


def test_random_reward_lies_in_its_range_and_max_is_high_times_optimum(tiny):
    res = {
        k: simulate(game_scenario(tiny, incentive={"kind": k, "dim": 650}))
        for k in ("qi_dpfl", "random", "max")
    }
    opt = res["qi_dpfl"].rounds["reward"].to_numpy()
    ratio = res["random"].rounds["reward"].to_numpy() / opt
    assert np.all((ratio >= 0.5) & (ratio <= 3.0)) and np.ptp(ratio) > 0
    np.testing.assert_allclose(res["max"].rounds["reward"].to_numpy(), 3.0 * opt)
    cost = {k: r.rounds["server_cost"].sum() for k, r in res.items()}
    assert cost["qi_dpfl"] < cost["random"] and cost["qi_dpfl"] < cost["max"]


def test_stackelberg_quadratic_and_nonconvergence_warning(tiny):
    inc = {"kind": "stackelberg", "dim": 650, "cost": "quadratic", "cap": 0.05}
    result = simulate(game_scenario(tiny, incentive=inc))
    up = result.clients[result.clients["uploaded"]]
    assert (up["rho"] <= 0.05 + 1e-12).all() and result.rounds["nash_gap_max"].max() < 1e-8
    inc = {"kind": "stackelberg", "dim": 650, "max_iter": 1, "warm_start": False}
    with pytest.warns(UserWarning, match="residual"):
        flagged = simulate(game_scenario(tiny, incentive=inc))
    assert (flagged.rounds["solver_converged"] == 0.0).all()
    assert (flagged.rounds["solver_residual"] > 0).all()


def test_dim_defaults_to_the_model_parameter_count(tiny):
    from fedgame.model import FedGameModel
    from fedgame.scenario.load import validate

    tiny["incentive"] = {"kind": "qi_dpfl", "lam": 1.0}
    tiny["policy"] = {"kind": "best_response"}
    tiny["privacy"] = {"kind": "zcdp_gaussian", "clip": 1.0}
    model = FedGameModel(validate(tiny))
    assert model.server.incentive.dim == model.learner.num_params == 650
