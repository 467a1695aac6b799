"""Per-run metrics, t-intervals and equilibrium tables on hand-made frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.analysis.convergence import Criteria
from fedgame.analysis.equilibrium import (
    elasticity,
    equilibrium_table,
    response,
    slope,
    tail_means,
)
from fedgame.analysis.summary import (
    aggregate,
    rounds_to_target,
    run_metrics,
    share_interval,
    t_interval,
)


def test_t_interval_matches_the_worked_value():
    # mean 2, s = 1, n = 3: half-width t_{0.975, 2} / sqrt(3) = 4.302653 / 1.732051
    mean, lo, hi = t_interval([1.0, 2.0, 3.0])
    assert mean == 2.0
    assert hi - mean == pytest.approx(2.484138, abs=1e-6)
    assert mean - lo == pytest.approx(2.484138, abs=1e-6)
    assert all(math.isnan(v) for v in t_interval([])[:1])
    assert math.isnan(t_interval([5.0])[1])


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=20))
def test_t_interval_contains_the_mean(values):
    mean, lo, hi = t_interval(values)
    assert lo <= mean + 1e-9 and mean <= hi + 1e-9
    assert mean == pytest.approx(float(np.mean(values)), abs=1e-6)


def test_rounds_to_target():
    assert rounds_to_target([0.1, 0.5, 0.8, 0.7], target=0.8) == 3.0
    assert math.isnan(rounds_to_target([0.1, 0.2], target=0.8))


def _rounds(with_game: bool) -> pd.DataFrame:
    rows = []
    for n, rep, scale in [(10, 0, 1.0), (10, 1, 1.2), (20, 0, 2.0), (20, 1, 2.2)]:
        for r in range(1, 7):
            row = {
                "population.clients": n,
                "replicate": rep,
                "run_id": f"{n}-{rep}",
                "num_clients": n,
                "round": r,
                "test_accuracy": 0.1 * r,
                "participants": n // 2,
                "uploaded": n // 2,
                "reward_total": scale,
                "epsilon_spent_mean": 0.5 * r,
                "epsilon_spent_max": float(r),
            }
            if with_game:
                row |= {"reward": scale * r, "sum_rho": 0.5 * scale, "nash_gap_max": 0.01}
            rows.append(row)
    return pd.DataFrame(rows)


def test_run_metrics_and_aggregate():
    rounds = _rounds(with_game=True)
    per_run = run_metrics(rounds, target=0.3).set_index("run_id")
    assert per_run.loc["10-0", "final_accuracy"] == pytest.approx(0.6)
    assert per_run.loc["10-0", "rounds_to_target"] == 3.0
    assert per_run.loc["20-1", "total_reward"] == pytest.approx(6 * 2.2)
    assert per_run.loc["20-1", "server_cost"] == pytest.approx(6 * 2.2)
    assert per_run.loc["10-0", "participation_rate"] == pytest.approx(0.5)
    assert per_run.loc["20-0", "reward"] == pytest.approx(12.0)
    ids = rounds[["population.clients", "run_id"]].drop_duplicates()
    table = aggregate(ids.merge(per_run.reset_index()), by=["population.clients"])
    row = table.set_index("population.clients").loc[20]
    assert row["n"] == 2
    assert row["total_reward"] == pytest.approx(6 * 2.1)
    assert row["total_reward_lo"] < row["total_reward"] < row["total_reward_hi"]


def test_run_metrics_epsilon_quantiles_from_clients():
    rounds = _rounds(with_game=False)
    clients = pd.DataFrame(
        {
            "run_id": ["10-0"] * 4,
            "round": [5, 6, 6, 6],
            "client_id": [0, 0, 1, 2],
            "epsilon_spent": [99.0, 1.0, 2.0, 3.0],
        }
    )
    per_run = run_metrics(rounds, clients).set_index("run_id")
    assert per_run.loc["10-0", "epsilon_p50"] == pytest.approx(2.0)
    assert "reward" not in per_run  # absent game columns are left out


def test_tail_means_and_equilibrium_tolerate_missing_columns():
    rounds = _rounds(with_game=True)
    tails = tail_means(rounds, last=2).set_index("run_id")
    assert tails.loc["10-0", "reward"] == pytest.approx((5 + 6) / 2)
    assert tails.loc["10-0", "participation"] == pytest.approx(0.5)
    short = Criteria(min_rounds=3, window=2)
    table = equilibrium_table(rounds, by=["population.clients"], criteria=short)
    table = table.set_index("population.clients")
    assert (table["converged"] == 0.0).all()  # R_t = scale·t grows: never an equilibrium
    assert table["sum_rho"].isna().all()
    steady = rounds.assign(reward=rounds["reward_total"])  # R constant per run
    table = equilibrium_table(steady, by=["population.clients"], criteria=short)
    assert table.set_index("population.clients").loc[20, "sum_rho"] == pytest.approx(1.05)
    assert (table["converged"] == 1.0).all() and (table["converged_round"] == 1.0).all()
    plain = equilibrium_table(_rounds(with_game=False), by=["population.clients"])
    assert "reward" not in plain and "participation" in plain
    assert (plain["converged"] == 0.0).all()  # no game, nothing to settle
    resp = response(table, x="population.clients").set_index("metric")
    assert resp.loc["sum_rho", "slope"] == pytest.approx((1.05 - 0.55) / 10)


def test_slope_and_elasticity():
    assert slope([1, 2, 3], [1, 3, 5]) == pytest.approx(2.0)
    assert math.isnan(slope([1, 1], [1, 2]))
    assert elasticity([10, 20, 40], [5, 20, 80]) == pytest.approx(2.0)
    assert math.isnan(elasticity([0, 1], [1, 2]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=50), st.floats(0.5, 0.999))
def test_share_interval_stays_in_the_unit_interval_and_covers_the_share(flags, level):
    share, lo, hi = share_interval(flags, level=level)
    assert share == pytest.approx(sum(flags) / len(flags))
    assert 0.0 <= lo <= share <= hi <= 1.0
    assert lo < hi  # never degenerate, not even at 0 of n or n of n


def test_aggregate_gives_a_boolean_column_the_share_interval():
    per_run = pd.DataFrame({"g": [1, 1, 1], "ok": [True, False, False], "x": [1.0, 2.0, 3.0]})
    row = aggregate(per_run, by=["g"]).iloc[0]
    assert (row["ok"], row["ok_lo"], row["ok_hi"]) == share_interval([True, False, False])
    assert (row["x"], row["x_lo"], row["x_hi"]) == t_interval([1.0, 2.0, 3.0])
