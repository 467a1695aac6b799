"""Follower policies: best response, learning, budget-aware and fixed ρ."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.game.stackelberg import follower_equilibrium
from fedgame.mechanisms.policy.game import BestResponse, BudgetAware, FixedRho, rho_remaining
from fedgame.mechanisms.policy.learning import Learning, log_gradient_step
from fedgame.privacy.calibrate import zcdp_to_epsilon
from fedgame.run.single import simulate
from fedgame.scenario.load import validate
from fedgame.views import ClientView, MarketView, Offer, RoundInfo


def view(i, nu, *, eps_total=100.0, spent=0.0, participations=0):
    return ClientView(
        i,
        100,
        0.1,
        nu,
        eps_total,
        1e-5,
        spent,
        1.0,
        1e-5,
        0.0,
        False,
        participations=participations,
    )


def market(nus, t=1, **kw):
    return MarketView(
        tuple(view(i, v, **kw) for i, v in enumerate(nus)), RoundInfo(t, 50, len(nus))
    )


def game(tiny, policy):
    tiny["population"]["privacy_value"] = {"dist": "uniform", "low": 0.95, "high": 1.05}
    tiny["population"]["straggle_prob"] = 0.0
    tiny["network"]["faults"]["link_failure"] = 0.0
    tiny["privacy"] = {"kind": "zcdp_gaussian"}
    tiny["incentive"] = {"kind": "qi_dpfl", "dim": 650}
    tiny["selection"] = {"kind": "all"}
    tiny["policy"] = policy
    return validate(tiny)


def test_best_response_plays_theorem1_and_caches_per_round():
    nus = [1.0, 1.2, 0.9, 1.1]
    m, offer = market(nus), Offer(reward=5.0, plan={"phi": 2.0})
    pol = BestResponse(None)
    rho = [pol.respond(offer, me=c, market=m).rho for c in m.clients]
    np.testing.assert_allclose(rho, follower_equilibrium(np.array(nus), reward=5.0, phi=2.0))
    calls = []
    compute = pol.compute
    pol.compute = lambda o, mk: calls.append(1) or compute(o, mk)
    for c in m.clients:
        pol.respond(offer, me=c, market=m)
    assert calls == []  # same round, same offer: cached
    pol.respond(Offer(reward=6.0), me=m.clients[0], market=market(nus, t=2))
    assert calls == [1]


def test_best_response_declines_inactive_and_unaffordable():
    m = market([1.0, 1.0, 5.0])
    offer = Offer(reward=5.0, plan={"phi": 1.0})
    assert BestResponse(None).respond(offer, me=m.clients[2], market=m).reason == "inactive"
    poor = view(0, 1.0, eps_total=0.01)
    m = MarketView((poor, *m.clients[1:]), m.info)
    assert BestResponse(None).respond(offer, me=poor, market=m).reason == "budget"


def test_budget_aware_caps_and_leaves_when_budget_gone():
    # rho(eps_total) for client 0 is about 1e-4: far below its uncapped rho* = 5/4*... so capped.
    clients = (view(0, 1.0, eps_total=0.05), view(1, 1.0), view(2, 1.0))
    m = MarketView(clients, RoundInfo(1, 5, 3))
    offer = Offer(reward=5.0, plan={"phi": 1.0})
    pol = BudgetAware(BudgetAware.Config())
    r0 = pol.respond(offer, me=clients[0], market=m)
    assert r0.participate and r0.rho == pytest.approx(rho_remaining(clients[0]), rel=1e-9)
    spent = view(0, 1.0, eps_total=0.05, spent=0.05)
    gone = MarketView((spent, *clients[1:]), RoundInfo(2, 5, 3))
    assert pol.respond(offer, me=spent, market=gone).reason == "budget"
    # the other two then play the two-player equilibrium
    r1 = pol.respond(offer, me=clients[1], market=gone)
    assert r1.rho == pytest.approx(follower_equilibrium(np.ones(2), reward=5.0, phi=1.0)[0])


def test_budget_aware_clients_leave_over_a_run(tiny):
    tiny["population"]["budget"] = {"epsilon": 0.6, "delta": 1e-5}
    result = simulate(game(tiny, {"kind": "budget_aware", "min_rho": 1e-3}))
    up = result.rounds["uploaded"].to_numpy()
    assert up[0] > 0 and up[-1] < up[0]
    last = result.clients[result.clients["round"] == 3]
    assert (last["decline_reason"] == "budget").any()
    assert (result.clients["epsilon_spent"] <= result.clients["epsilon_total"] + 1e-9).all()


def test_fixed_rho_policy():
    pol = FixedRho(FixedRho.Config(rho=0.2))
    m = market([1.0, 1.0])
    assert pol.respond(Offer(), me=m.clients[0], market=m).rho == 0.2
    tight = view(0, 1.0, eps_total=zcdp_to_epsilon(0.1, delta=1e-5))
    assert pol.respond(Offer(), me=tight, market=m).reason == "budget"


def test_log_gradient_step_is_zero_at_foc():
    # Two clients nu=1, phi=1, R=4: rho* = 1 each, S_-i = 1: R*S_-i/S^2 = 1 = phi*nu.
    assert log_gradient_step(0.25, reward=4.0, rho=1.0, others=1.0, nu=1.0, phi=1.0, eta=0.3) == (
        pytest.approx(0.25)
    )
    assert log_gradient_step(0.25, reward=4.0, rho=0.5, others=1.0, nu=1.0, phi=1.0, eta=0.3) > 0.25


def test_learners_approach_equilibrium_on_fixed_market():
    nus = np.array([0.9, 1.0, 1.1, 1.0, 0.95])
    pol = Learning(Learning.Config(decay=0.0))  # constant step eta = 0.5
    star = follower_equilibrium(nus, reward=3.0, phi=1.0)
    total, dist = np.nan, []
    for t in range(1, 61):
        m = MarketView(
            tuple(view(i, v, participations=t - 1) for i, v in enumerate(nus)), RoundInfo(t, 60, 5)
        )
        offer = Offer(reward=3.0, plan={"phi": 1.0, "sum_rho_prev": total})
        rho = np.array([pol.respond(offer, me=c, market=m).rho for c in m.clients])
        total = rho.sum()
        dist.append(np.abs(rho - star).sum() / star.sum())
    # geometric approach: 0.50 at round 1, ~0.02 at 21, ~0.002 at 60 (eta = 0.5)
    assert dist[0] > 0.3 and dist[-1] < 5e-3 and dist[-1] < dist[20] < 0.05


def test_learning_runs_end_to_end_and_reports_distance(tiny):
    result = simulate(game(tiny, {"kind": "learning"}))
    assert result.rounds["eq_distance"].notna().all()
    assert result.clients["rho_equilibrium"].notna().any()


@pytest.mark.parametrize("policy", ["best_response", "fixed"])
def test_policy_runs_end_to_end(tiny, policy):
    result = simulate(game(tiny, {"kind": policy}))
    assert (result.rounds["uploaded"] > 0).all()
