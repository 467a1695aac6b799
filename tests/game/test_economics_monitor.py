"""The economics columns of real runs: each against the run's own tables, worked again here."""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedgame.game.economics_monitor import ECONOMICS_COLUMNS
from fedgame.model import FedGameModel
from fedgame.scenario.load import validate

#: columns that are numbers in every round (fairness needs a contribution estimate)
ALWAYS_NUMBERS = [c for c in ECONOMICS_COLUMNS if c != "econ_fairness"]


def contest(tiny: dict[str, Any], **game: Any) -> dict[str, Any]:
    data = copy.deepcopy(tiny)
    data["rounds"] = 4
    data["population"]["budget"] = {"epsilon": 100.0, "delta": 1e-5}
    data["population"]["privacy_value"] = {"dist": "uniform", "low": 0.9, "high": 1.1}
    data["incentive"] = {"kind": "qi_dpfl", "lam": 0.01}
    data["policy"] = {"kind": "best_response"}
    data["selection"] = {"kind": "all"}
    data["privacy"] = {"kind": "zcdp_gaussian", "clip": 1.0}
    data["game"] = {"economics": {"regret_sample": 20, **game}}
    return data


def run(data: dict[str, Any], model_cls: type[FedGameModel] = FedGameModel) -> FedGameModel:
    model = model_cls(validate(data))
    while model.running:
        model.step()
    return model


def frames(model: FedGameModel) -> tuple[pd.DataFrame, pd.DataFrame]:
    return model.datacollector.round_frame(), model.datacollector.client_frame()


def test_contest_economics_match_the_runs_tables(tiny):
    model = run(contest(tiny, value_per_point=2.5))
    rounds, clients = frames(model)
    assert rounds[ALWAYS_NUMBERS].notna().all().all()
    assert rounds["econ_fairness"].isna().all()  # nobody estimated contributions
    np.testing.assert_allclose(rounds["econ_server_cost"], rounds["reward_total"], rtol=1e-12)
    np.testing.assert_allclose(rounds["econ_server_cost"], rounds["payments_total"], rtol=1e-12)
    # the game monitor's surplus and the clients table's game utilities, summed
    np.testing.assert_allclose(rounds["econ_client_surplus"], rounds["client_surplus"], atol=1e-12)
    by_round = clients.groupby("round")
    np.testing.assert_allclose(
        rounds["econ_true_cost"], by_round["privacy_cost"].sum().to_numpy(), rtol=1e-12
    )
    np.testing.assert_allclose(rounds["econ_units"], rounds["sum_rho"], rtol=1e-12)
    sellers = by_round["rho"].apply(lambda r: (r > 0).sum()).to_numpy()
    np.testing.assert_array_equal(rounds["econ_sellers"], sellers)
    # value: 2.5 per accuracy point; round 1 starts from the model as built
    start = model.datacollector.model_vars["test_accuracy"][0]  # step 0: the model as built
    acc = np.concatenate([[start], rounds["test_accuracy"]])
    np.testing.assert_allclose(rounds["econ_value"], 2.5 * 100 * np.diff(acc), atol=1e-9)
    np.testing.assert_allclose(
        rounds["econ_welfare"], rounds["econ_value"] - rounds["econ_true_cost"], atol=1e-12
    )
    np.testing.assert_allclose(rounds["econ_cost_to_date"], rounds["econ_server_cost"].cumsum())
    np.testing.assert_allclose(
        rounds["econ_accuracy_per_cost_to_date"],
        100 * (acc[1:] - acc[0]) / rounds["econ_cost_to_date"],
        rtol=1e-9,
    )
    # every delivered client sampled: the largest regret is the monitor's ex-post Nash gap
    assert (rounds["econ_regret_sampled"] == rounds["uploaded"]).all()
    np.testing.assert_allclose(rounds["econ_regret_max"], rounds["nash_gap_max"], atol=1e-12)
    np.testing.assert_allclose(rounds["econ_regret_mean"], rounds["nash_gap_mean"], atol=1e-12)
    assert (rounds["econ_ir_violations"] == 0).all()  # best responses never lose money
    assert rounds["econ_sellers"].dtype == np.int64


def test_a_leader_off_equilibrium_shows_regret(tiny):
    """Followers that play a fixed ρ (policy fixed) against a Theorem-2 reward are not
    best-responding: their regret is the monitor's ex-post gap, and positive."""
    data = contest(tiny)
    data["policy"] = {"kind": "fixed", "rho": 0.05}
    rounds, _ = frames(run(data))
    assert (rounds["econ_regret_max"] > 1e-6).all()
    np.testing.assert_allclose(rounds["econ_regret_max"], rounds["nash_gap_max"], rtol=1e-9)


def test_the_sample_size_bounds_the_search_and_moves_no_other_number(tiny):
    full, _ = frames(run(contest(tiny)))
    few, _ = frames(run(contest(tiny, regret_sample=3)))
    none, _ = frames(run(contest(tiny, regret_sample=0)))
    assert (few["econ_regret_sampled"] == 3).all()
    assert (few["econ_regret_max"] <= full["econ_regret_max"] + 1e-15).all()
    assert (none["econ_regret_sampled"] == 0).all() and (none["econ_regret_max"] == 0).all()
    others = [c for c in full.columns if not c.startswith("econ_regret") and c != "wall_time_s"]
    pd.testing.assert_frame_equal(full[others], none[others])


def test_no_incentive_buys_nothing(tiny):
    data = copy.deepcopy(tiny)
    data["rounds"] = 3
    rounds, _ = frames(run(data))
    assert rounds[ALWAYS_NUMBERS].notna().all().all()
    zero = [c for c in ALWAYS_NUMBERS if c not in ("econ_value", "econ_welfare")]
    assert (rounds[zero] == 0).all().all()
    np.testing.assert_array_equal(rounds["econ_welfare"], rounds["econ_value"])
    assert rounds["econ_fairness"].isna().all()


class Valued(FedGameModel):
    """Every delivered client contributes equally (a stand-in for a Shapley estimate)."""

    def phase_aggregate(self) -> None:
        super().phase_aggregate()
        sent = self.state.selected[self.state.uploaded]
        self.state.contributions = dict.fromkeys(sent.tolist(), 1.0)


def test_fairness_compares_payment_shares_with_the_contribution_estimate(tiny):
    model = run(contest(tiny), Valued)
    rounds, clients = frames(model)
    paid = clients[clients["uploaded"].astype(bool)]
    want = []
    for _, group in paid.groupby("round"):
        shares = group["payment"].to_numpy() / group["payment"].sum()
        want.append(1 - 0.5 * np.abs(shares - 1 / len(group)).sum())
    np.testing.assert_allclose(rounds["econ_fairness"], want, rtol=1e-12)
    assert ((rounds["econ_fairness"] > 0) & (rounds["econ_fairness"] < 1)).all()


def test_an_incentive_that_reports_no_outcome_gets_no_economics(tiny, scratch_registry):
    from fedgame.views import Offer

    class Silent:
        """Pays nothing and reports nothing."""

        def __init__(self, config: object) -> None:
            del config

        def offer(self, market, *, info):
            return Offer(reward=0.0)

        def settle(self, offer, delivered, *, info):
            return {}

    scratch_registry.register("incentive", "_silent")(Silent)
    data = copy.deepcopy(tiny)
    data["rounds"] = 2
    data["incentive"] = {"kind": "_silent"}
    model = run(data)
    assert model.economics is None
    rounds, _ = frames(model)
    assert not [c for c in rounds.columns if c.startswith("econ_")]


@pytest.mark.parametrize("cost", ["linear", "quadratic"])
def test_the_numeric_leader_reports_quadratic_costs(tiny, cost):
    data = contest(tiny)
    data["incentive"] = {"kind": "stackelberg", "cost": cost, "lam": 0.01}
    rounds, clients = frames(run(data))
    by_round = clients.groupby("round")
    np.testing.assert_allclose(
        rounds["econ_true_cost"], by_round["privacy_cost"].sum().to_numpy(), rtol=1e-12
    )
    np.testing.assert_allclose(rounds["econ_regret_max"], rounds["nash_gap_max"], atol=1e-9)
    assert not math.isnan(float(rounds["econ_welfare"].sum()))


def test_a_leader_with_a_belief_is_accounted_at_the_true_values(tiny):
    """The leader prices on ν̂; the true costs in the outcome use the clients' true ν."""
    data = contest(tiny)
    data["population"]["privacy_value"] = {"dist": "uniform", "low": 0.5, "high": 2.0}
    data["incentive"]["belief"] = {"prior": {"median": 3.0, "sd": 0.5}}
    rounds, clients = frames(run(data))
    sold = clients[clients["rho"] > 0]
    true_cost = (sold["privacy_value"] * sold["rho"]).groupby(sold["round"]).sum()
    assert len(true_cost) == len(rounds)
    np.testing.assert_allclose(rounds["econ_true_cost"], true_cost.to_numpy(), rtol=1e-12)
    believed = (sold["nu_believed"] * sold["rho"]).groupby(sold["round"]).sum()
    assert not np.allclose(believed.to_numpy(), true_cost.to_numpy())  # ν̂ is not ν
