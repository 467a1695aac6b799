"""The ``contract`` incentive and the ``self_select`` policy in a running model: what is
bought is the item's ρ (its noise), what is paid is the item's r, and truthful
self-selection leaves no regret while a client off the menu has some."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from fedgame.game.contracts import item_utilities
from fedgame.mechanisms.incentive.contract import Contract, match_items
from fedgame.model import FedGameModel
from fedgame.run.single import simulate
from fedgame.scenario.load import validate


def scenario(tiny, **policy):
    data = copy.deepcopy(tiny)
    data.update(
        rounds=3,
        incentive={"kind": "contract", "bins": 3, "lam": 0.01},
        policy=policy or {"kind": "self_select"},
        selection={"kind": "all"},
        privacy={"kind": "zcdp_gaussian", "clip": 1.0},
    )
    data["population"]["budget"]["epsilon"] = {"dist": "uniform", "low": 20.0, "high": 40.0}
    return validate(data)


def run(data, rounds=3):
    model = FedGameModel(data)
    spied = []
    original = Contract.settle

    def settle(self, offer, delivered, *, info):
        out = original(self, offer, delivered, info=info)
        spied.append((offer, list(delivered), out.payments))
        return out

    Contract.settle = settle
    try:
        gains = []
        for _ in range(rounds):
            model.step()
            ids = np.arange(len(model.clients))
            gains.append(
                model.server.incentive.deviation_gains(
                    ids,
                    settlement=model.server.settlement,
                    faults=model.state.faults,
                    rng=np.random.default_rng(0),
                )
            )
    finally:
        Contract.settle = original
    return model, spied, gains


def test_self_selecting_clients_buy_items_are_paid_their_reward_and_have_no_regret(tiny):
    model, spied, gains = run(scenario(tiny))
    incentive = model.server.incentive
    assert spied and any(out for _, _, out in spied)
    for offer, delivered, out in spied:
        rho = np.array([i for i, _ in offer.menu])
        reward = np.array([r for _, r in offer.menu])
        assert (np.diff(rho) < 0).all() and (np.diff(reward) < 0).all()  # larger ρ, more pay
        for response in delivered:
            k = int(np.flatnonzero(rho == response.rho)[0])  # exactly an item's ρ
            assert out[response.client_id] == reward[k]
            theta = incentive.nu[response.client_id]
            u = item_utilities([theta], rho, reward)[0]
            assert u[k] >= u.max() - 1e-9 and u[k] >= -1e-9  # IC and IR at its true type
    for g in gains:
        assert (g >= 0).all() and g.max() < 1e-9


def test_the_items_rho_sets_the_noise(tiny):
    model, spied, _ = run(scenario(tiny), rounds=1)
    _, delivered, _ = spied[-1]
    table = model.table
    for response in delivered:
        i = response.client_id
        size = table.column("dataset_size")[i]
        want = math.sqrt(2.0 / (response.rho * size**2))  # zcdp_gaussian, Eq. 10, C = 1
        assert table.column("noise_std")[i] == pytest.approx(want)


def test_a_client_off_the_menu_is_paid_nothing_and_regrets_it(tiny):
    _, spied, gains = run(scenario(tiny, kind="fixed", rho=0.05))
    delivered_any = False
    for (_, delivered, out), g in zip(spied, gains, strict=True):
        for response in delivered:
            delivered_any = True
            assert out[response.client_id] == 0.0
            assert g[response.client_id] > 0.0  # an item (or declining) was better
    assert delivered_any


def test_rounds_and_outcome_report_the_menu_and_the_payments(tiny, tmp_path):
    result = simulate(scenario(tiny), out_dir=tmp_path)
    rounds = result.rounds
    assert (rounds["menu_items"] >= 1).all()
    assert (rounds["menu_rho_low"] <= rounds["menu_rho_high"]).all()
    paid = result.clients.groupby("round")["reward"].sum()
    np.testing.assert_allclose(
        rounds.set_index("round")["payments_total"], paid.reindex(rounds["round"])
    )
    taken = result.clients.dropna(subset=["menu_item"])
    assert not taken.empty and taken["participating"].all()


def test_match_items_finds_exact_items_only():
    items = np.array([1.0, 0.5])
    found = match_items(np.array([0.5, 1.0, 0.7, np.nan]), items)
    assert found.tolist() == [1, 0, -1, -1]


def test_types_and_probabilities_go_together(tiny):
    data = copy.deepcopy(tiny)
    data["incentive"] = {"kind": "contract", "types": [1.0, 2.0]}
    with pytest.raises(Exception, match="probabilities"):
        validate(data)
    data["incentive"] = {"kind": "contract", "types": [2.0, 1.0], "probabilities": [0.5, 0.5]}
    with pytest.raises(Exception, match="increasing"):
        validate(data)


def test_tight_budgets_hold_and_clients_that_cannot_afford_an_item_decline(tiny, tmp_path):
    data = scenario(tiny).model_dump(mode="json", exclude_none=False)
    data["population"]["budget"]["epsilon"] = {"dist": "uniform", "low": 2.0, "high": 9.0}
    data["rounds"] = 4
    result = simulate(validate(data), out_dir=tmp_path)
    clients = result.clients
    assert (clients["epsilon_spent"] <= clients["epsilon_total"] * (1 + 1e-9)).all()
    broke = clients["decline_reason"] == "budget"
    assert broke.any() and not clients.loc[broke, "uploaded"].any()
