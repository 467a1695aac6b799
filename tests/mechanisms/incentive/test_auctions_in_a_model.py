"""Posted price and procurement auctions run in a model: who trains, what is paid, the
noise bought, the outcome and deviation capabilities, and incentive compatibility measured."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest

from fedgame.game.auctions import true_unit_cost
from fedgame.game.posted_price import supply
from fedgame.mechanisms.base import ClearsMarket, MeasuresDeviation, ReportsOutcome
from fedgame.model import FedGameModel
from fedgame.scenario.load import validate


def market(tiny: dict[str, Any], incentive: dict, policy: dict, **population: Any) -> dict:
    data = dict(tiny)
    data["incentive"] = incentive
    data["policy"] = policy
    data["selection"] = {"kind": "all"}
    data["privacy"] = {"kind": "zcdp_gaussian", "clip": 1.0}
    data["population"].update(clients=12, straggle_prob=0.0, **population)
    data["network"] = {"faults": {"kind": "independent", "link_failure": 0.0}}
    data["training"].update(local_steps=1, batch_size=8)
    return data


def run(data: dict, rounds: int, each=None) -> FedGameModel:
    data["rounds"] = rounds
    model = FedGameModel(validate(data))
    for _ in range(rounds):
        model.step()
        if each is not None:
            each(model)
    return model


def regret(model: FedGameModel) -> np.ndarray:
    """The round's deviation gains of every client, from the round's settlement."""
    return model.server.incentive.deviation_gains(
        np.arange(12),
        settlement=model.server.settlement,
        faults=model.state.faults,
        rng=np.random.default_rng(0),
    )


@pytest.mark.parametrize("kind", ["threshold_auction", "first_price_auction"])
def test_an_auction_trains_only_its_k_winners_at_the_unit(tiny, kind):
    data = market(tiny, {"kind": kind, "winners": 4, "rho": 0.05, "reserve": 3.0},
                  {"kind": "truthful_bidder"})  # fmt: skip
    seen = []

    def check(model: FedGameModel) -> None:
        t = model.table
        leader = model.server.incentive
        assert isinstance(leader, ClearsMarket | ReportsOutcome | MeasuresDeviation)
        bids = t.response_bid.copy()
        cost = true_unit_cost(t.privacy_value, phi=1.0, unit=0.05, quadratic=False)
        np.testing.assert_allclose(bids[np.isfinite(bids)], cost[np.isfinite(bids)])
        won = t.selected.copy()
        assert won.sum() == 4  # the four lowest bids, everyone has budget for 3 rounds
        assert set(np.flatnonzero(won)) == set(np.argsort(bids)[:4])
        lost = np.isfinite(bids) & ~won
        assert (t.decline_reason[lost] == "not allocated").all()
        assert not t.participating[lost].any()
        # the release is the unit bought: σ_i = sqrt(2/ρ)·C/|D_i| (zcdp_gaussian, C = 1)
        want_std = math.sqrt(2 / 0.05) / t.dataset_size[won]
        np.testing.assert_allclose(t.noise_std[won], want_std)
        price = np.sort(bids)[4] if kind == "threshold_auction" else bids
        want = np.where(won, 0.05 * np.broadcast_to(price, bids.shape), 0.0)
        np.testing.assert_allclose(t.reward, want)
        assert np.all(t.reward[won] >= 0.05 * bids[won] - 1e-12)  # IR at the bid
        out = model.server.settlement.outcome
        np.testing.assert_allclose(out.payments.sum(), t.reward.sum())
        np.testing.assert_allclose(out.true_cost, 0.05 * cost[out.ids])
        np.testing.assert_allclose(out.reported_cost, bids[out.ids])
        gains = regret(model)
        seen.append(gains)
        assert model.extra["winners"] == 4 and model.extra["shading"] == pytest.approx(0.0)

    run(data, 3, check)
    gains = np.concatenate(seen)
    if kind == "threshold_auction":
        assert np.all(gains <= 1e-12)  # truthful bidding is a dominant strategy
    else:
        assert gains.max() > 0  # a truthful first-price winner earns nothing: it regrets


def test_a_shading_bidder_shades_by_its_factor(tiny):
    data = market(tiny, {"kind": "first_price_auction", "winners": 3, "reserve": 3.0},
                  {"kind": "shading_bidder", "factor": 1.5})  # fmt: skip
    model = run(data, 1)
    assert model.extra["shading"] == pytest.approx(0.5)


def test_bidders_without_budget_for_the_unit_decline(tiny):
    data = market(tiny, {"kind": "threshold_auction", "winners": 12, "rho": 0.4},
                  {"kind": "truthful_bidder"},
                  budget={"epsilon": {"dist": "uniform", "low": 5.0, "high": 10.0},
                          "delta": 1e-5})  # fmt: skip
    # ρ(ε = 5..10, δ = 1e-5) is about 0.45..1.5: everyone sells once, some twice, then stops
    counts = []
    run(data, 4, lambda m: counts.append(int(m.table.selected.sum())))
    assert counts[0] == 12 and counts[-1] < counts[0]


def mean_shading(tiny: dict, kind: str, rounds: int) -> float:
    data = market(
        tiny,
        {"kind": kind, "winners": 5, "rho": 0.01, "reserve": 3.0},
        {"kind": "hedge_bidder"},
        budget={"epsilon": {"dist": "constant", "value": 50.0}, "delta": 1e-5},
    )
    shading = []
    run(data, rounds, lambda m: shading.append(m.extra["shading"]))
    return float(np.mean(shading[rounds // 2 :]))


def test_a_learning_bidder_shades_under_first_price_and_not_under_the_threshold_rule(tiny):
    """Incentive compatibility measured: the same Hedge bidders, the same world."""
    first = mean_shading(tiny, "first_price_auction", 30)
    threshold = mean_shading(tiny, "threshold_auction", 30)
    assert first > 0.05
    assert abs(threshold) < 0.03
    assert first > 3 * abs(threshold)


def test_a_posted_price_buys_each_sellers_supply_and_pays_the_price(tiny):
    data = market(tiny, {"kind": "optimal_price", "cap": 0.05, "cost": "quadratic"},
                  {"kind": "seller"})  # fmt: skip

    def check(model: FedGameModel) -> None:
        t = model.table
        price = model.extra["price"]
        assert price > 0
        want = supply(price, t.privacy_value, 0.05, phi=1.0, quadratic=True)
        sold = t.selected
        np.testing.assert_allclose(t.response_rho[sold], want[sold])
        np.testing.assert_allclose(t.reward[sold], price * want[sold])
        std = np.sqrt(2 / want[sold]) / t.dataset_size[sold]
        np.testing.assert_allclose(t.noise_std[sold], std)
        out = model.server.settlement.outcome
        np.testing.assert_allclose(out.true_cost, t.privacy_value[out.ids] * out.units**2)
        gains = regret(model)
        assert np.all(gains <= 1e-12)  # a price taker's supply is its best response

    run(data, 3, check)


def test_a_posted_price_leader_learns_nu_from_the_supply(tiny):
    belief = {"prior": {"median": 2.0, "sd": 1.0}, "obs_sd": 0.05}
    big = {"epsilon": {"dist": "constant", "value": 50.0}, "delta": 1e-5}
    leader = {"kind": "optimal_price", "cost": "quadratic", "belief": belief}
    data = market(tiny, leader, {"kind": "seller"}, budget=big)
    errors = []
    run(data, 4, lambda m: errors.append(m.extra["nu_error"]))
    assert errors[0] > 0.2  # the prior's median is twice the population's
    assert errors[-1] < 0.05  # interior quadratic sellers reveal ν exactly


def test_a_budget_feasible_auction_never_spends_past_its_budget(tiny):
    data = market(tiny, {"kind": "budget_feasible_auction", "budget": 0.1, "rho": 0.05},
                  {"kind": "truthful_bidder"})  # fmt: skip

    def check(model: FedGameModel) -> None:
        t = model.table
        bids = t.response_bid.copy()
        won = t.selected
        k = int(won.sum())
        assert k >= 1
        ordered = np.sort(bids[np.isfinite(bids)])
        assert ordered[k - 1] <= 0.1 / 0.05 / k  # the k*-th bid fits its share of B/ρ
        assert k == len(ordered) or ordered[k] > 0.1 / 0.05 / (k + 1)  # and k* is the largest
        assert t.reward.sum() <= 0.1 * (1 + 1e-12)
        assert np.all(t.reward[won] >= 0.05 * bids[won] - 1e-12)
        gains = regret(model)
        assert np.all(gains <= 1e-12)

    run(data, 3, check)
