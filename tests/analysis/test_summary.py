"""Per-run metrics, t-intervals and equilibrium tables on hand-made frames."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.analysis import summary
from fedgame.analysis.convergence import Criteria
from fedgame.analysis.equilibrium import (
    elasticity,
    equilibrium_table,
    response,
    slope,
    tail_means,
)
from fedgame.analysis.stats import t_interval
from fedgame.analysis.summary import (
    aggregate,
    kaplan_meier_median,
    rounds_to_target,
    run_metrics,
    share_interval,
)


def test_there_is_one_t_interval():
    assert not hasattr(summary, "t_interval") or summary.t_interval is t_interval
    import fedgame.analysis as fa

    assert fa.t_interval is t_interval


def test_t_interval_matches_the_worked_value():
    # mean 2, s = 1, n = 3: half-width t_{0.975, 2} / sqrt(3) = 4.302653 / 1.732051
    iv = t_interval([1.0, 2.0, 3.0])
    assert iv.mean == 2.0 and iv.n == 3
    assert iv.high - iv.mean == pytest.approx(2.484138, abs=1e-6)
    assert iv.mean - iv.low == pytest.approx(2.484138, abs=1e-6)
    assert math.isnan(t_interval([]).mean)
    assert math.isnan(t_interval([5.0]).low)


@settings(max_examples=30, deadline=None)
@given(st.lists(st.floats(-1e3, 1e3), min_size=2, max_size=20))
def test_t_interval_contains_the_mean(values):
    iv = t_interval(values)
    assert iv.low <= iv.mean + 1e-9 and iv.mean <= iv.high + 1e-9
    assert iv.mean == pytest.approx(float(np.mean(values)), abs=1e-6)


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
    assert (table["converged"] == 0.0).all()  # R_t = scale·t grows, Σρ does not follow
    assert (table["sum_rho_n"] == 0).all() and (table["final_accuracy_n"] == 2).all()
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
    iv = t_interval([1.0, 2.0, 3.0])
    assert (row["x"], row["x_lo"], row["x_hi"]) == (iv.mean, iv.low, iv.high)
    assert row["x_n"] == 3 and row["ok_n"] == 3


def test_every_value_says_how_many_runs_stand_behind_it():
    """equilibrium_table said n = 4 while Σρ averaged the 3 converged runs."""
    per_run = pd.DataFrame(
        {"g": [1] * 4, "sum_rho": [1.0, 1.2, 1.1, math.nan], "final_accuracy": [0.7] * 4}
    )
    row = aggregate(per_run, by=["g"]).iloc[0]
    assert row["n"] == 4 and row["sum_rho_n"] == 3 and row["final_accuracy_n"] == 4
    assert row["sum_rho"] == pytest.approx(1.1)


def test_rounds_to_target_is_censored_at_the_horizon():
    """The report read "17 [1, 55.1]" from the 2 of 4 runs that reached the target in a
    20-round horizon: now the count is kept, the interval stays inside [1, 20], and the
    Kaplan-Meier median is the round by which half the runs reached it (NaN, beyond the
    horizon, while fewer than half did)."""
    per_run = pd.DataFrame(
        {
            "g": [1] * 4,
            "rounds_to_target": [4.0, 20.0, math.nan, math.nan],
            "rounds_run": [20.0] * 4,
        }
    )
    row = aggregate(per_run, by=["g"]).iloc[0]
    assert row["rounds_to_target"] == pytest.approx(12.0) and row["rounds_to_target_n"] == 2
    raw = t_interval([4.0, 20.0])
    assert raw.low < 1 and raw.high > 20  # what the interval was before clipping
    assert row["rounds_to_target_lo"] == 1.0 and row["rounds_to_target_hi"] == 20.0
    assert row["rounds_to_target_km_median"] == 20.0  # half reached it by round 20
    assert math.isnan(kaplan_meier_median([4.0, math.nan, math.nan, math.nan], [20.0] * 4))
    assert kaplan_meier_median([4.0, 20.0, 7.0, math.nan], [20.0] * 4) == 7.0
    # a run cut short (diverged at round 5) leaves the risk set early
    assert kaplan_meier_median([math.nan, 6.0, 8.0], [5.0, 20.0, 20.0]) == 6.0  # S(6) = 1/2


def test_run_metrics_keep_the_horizon_of_each_run():
    rounds = _rounds(with_game=False)
    per_run = run_metrics(rounds, target=0.55).set_index("run_id")
    assert (per_run["rounds_run"] == 6.0).all() and (per_run["rounds_to_target"] == 6.0).all()
    assert run_metrics(rounds, target=0.9)["rounds_to_target"].isna().all()
