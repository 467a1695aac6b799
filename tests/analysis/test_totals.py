"""Totals over rounds never skip a missing round: fedgame.analysis.totals and its users."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.analysis import compare_incentives, equilibria
from fedgame.analysis.equilibrium import tail_means
from fedgame.analysis.summary import run_metrics
from fedgame.analysis.totals import first_missing_round, round_mean, round_total
from fedgame.run.single import simulate
from fedgame.scenario.load import validate

finite = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
cells = st.one_of(finite, st.just(math.nan))


@settings(max_examples=60, deadline=None)
@given(st.lists(cells, min_size=1, max_size=40), finite)
def test_a_missing_round_is_refused_or_counted_at_the_fill(values, fill):
    x = np.asarray(values)
    missing = int(np.isnan(x).sum())
    refused = round_total(values)
    assert refused.rounds == x.size and refused.missing == missing
    if missing:
        assert math.isnan(refused.value) and refused.refused
        assert math.isnan(round_mean(values).value)
    else:
        assert refused.value == pytest.approx(x.sum()) and not refused.refused
    filled = round_total(values, fill=fill)
    assert not filled.refused and filled.missing == missing
    assert filled.value == pytest.approx(np.where(np.isnan(x), fill, x).sum(), abs=1e-6)
    assert round_mean(values, fill=fill).value == pytest.approx(filled.value / x.size, abs=1e-6)
    first = first_missing_round(values)
    assert first == (int(np.flatnonzero(np.isnan(x))[0]) + 1 if missing else None)


def test_an_empty_run_has_no_mean():
    assert math.isnan(round_mean([]).value) and round_total([]).value == 0.0


@pytest.fixture(scope="module")
def exhausted():
    """A Max-reward QI-DPFL run whose clients spend their ε budget of 1.5 in the first two of
    five rounds: from round 3 on nobody delivers a budget (Σρ = 0) and Eq. 15's cost does not
    exist (NaN)."""
    data = {
        "name": "exhausted",
        "seed": 3,
        "rounds": 5,
        "population": {
            "clients": 12,
            "privacy_value": 1.0,
            "budget": {"epsilon": 1.5, "delta": 1e-5},
            "straggle_prob": 0.0,
        },
        "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "dirichlet", "alpha": 1}},
        "model": {"kind": "logreg"},
        "training": {"local_steps": 2, "batch_size": 8, "lr": 0.1, "device": "cpu"},
        "selection": {"kind": "all"},
        "incentive": {"kind": "max", "dim": 650},
        "policy": {"kind": "best_response"},
        "privacy": {"kind": "zcdp_gaussian"},
        "network": {"faults": {"kind": "none"}},
    }
    return simulate(validate(data))


def test_the_budget_exhausting_run_has_rounds_without_a_cost(exhausted):
    r = exhausted.rounds
    assert list(r["uploaded"]) == [12, 12, 0, 0, 0]
    assert r["server_cost"].iloc[:2].notna().all() and r["server_cost"].iloc[2:].isna().all()
    assert (r["payments_total"].iloc[2:] == 0).all()  # nobody paid: 0, not missing
    assert math.isfinite(r["server_cost"].sum())  # what pandas' skipping sum would report


def test_totals_of_the_exhausted_run_are_refused(exhausted):
    r = exhausted.rounds
    cost = round_total(r["server_cost"])
    assert cost.refused and cost.missing == 3 and first_missing_round(r["server_cost"]) == 3
    table = equilibria(exhausted)
    assert table["cumulative_server_cost"].iloc[:2].notna().all()
    assert table["cumulative_server_cost"].iloc[2:].isna().all()
    cmp = compare_incentives({"max": [exhausted, exhausted]}).iloc[0]
    assert math.isnan(cmp["server_cost_mean"]) and cmp["server_cost_refused"] == 2
    assert cmp["payments_mean"] == pytest.approx(r["payments_total"].iloc[:2].sum())
    frame = r.assign(run_id="a", num_clients=12)
    metrics = run_metrics(frame).iloc[0]
    assert math.isnan(metrics["server_cost"])
    assert math.isnan(tail_means(frame, last=3).iloc[0]["server_cost"])
    assert tail_means(frame, last=3).iloc[0]["reward_total"] == pytest.approx(
        r["reward_total"].iloc[-3:].mean()
    )


def test_run_metrics_sum_a_complete_run():
    frame = pd.DataFrame(
        {
            "run_id": "a",
            "round": [1, 2],
            "test_accuracy": [0.1, 0.2],
            "participants": [1, 1],
            "uploaded": [1, 1],
            "num_clients": 2,
            "reward_total": [1.0, 2.0],
            "server_cost": [0.5, 0.25],
        }
    )
    row = run_metrics(frame).iloc[0]
    assert row["server_cost"] == pytest.approx(0.75) and row["total_reward"] == pytest.approx(3)
