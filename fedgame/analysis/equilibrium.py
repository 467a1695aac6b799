"""Equilibrium diagnostics across a sweep: how the market settles as the population changes.

For each run, :func:`fedgame.analysis.convergence.detect` finds the first round t* after
which the normalised Nash gap stays small and the reward R and Σρ are stationary; the run's
*equilibrium value* of a per-round quantity is its mean over [t*, T] (the converged
stretch). A run that never converges has no equilibrium values (NaN), only ``converged`` =
False. The quantities are the Stackelberg columns when an incentive writes them (``reward``
R_t, ``sum_rho`` Σρ, ``welfare``, ``server_cost`` (the leader's cost), ``client_surplus``,
``nash_gap_max``, ``nash_gap_norm_max``, ``eq_distance``) plus ones every run has
(``participation`` = participants / clients, ``reward_total`` = payments, and the test
accuracy, as ``stretch_accuracy``: its mean over the converged stretch). Beside them every
run, converged or not, gives ``final_accuracy`` (the last round's test accuracy), named apart
because a stretch that starts early averages accuracies far below the final one. Missing
columns are skipped, so the functions work on any sweep. :func:`tail_means` keeps the plain
mean of the last rounds, for comparison. A mean over rounds of which one has no value (NaN:
e.g. the server cost or ``eq_distance`` of a round without a delivered budget) is NaN, never
a mean over the other rounds (:mod:`fedgame.analysis.totals`).

A converged run's ``trend`` is the growth per round its play settled around (0 when R and Σρ
are stationary as they are; QI-DPFL's discounting leader: about π^(−1/2) − 1,
:mod:`fedgame.analysis.convergence`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fedgame.analysis.convergence import Criteria, detect
from fedgame.analysis.summary import aggregate
from fedgame.analysis.totals import round_mean

#: per-round columns read when present, in display order
EQUILIBRIUM_COLUMNS = (
    "reward",
    "sum_rho",
    "participation",
    "welfare",
    "server_cost",
    "client_surplus",
    "nash_gap_max",
    "nash_gap_norm_max",
    "eq_distance",
    "reward_total",
    "test_accuracy",
)
#: per-run verdict columns of :func:`settled_means`
CONVERGENCE_COLUMNS = ("converged", "converged_round", "stationary_round", "trend")
#: what :func:`settled_means` calls a column's converged-stretch mean, where its own name
#: would mislead (the final accuracy is a column of its own)
STRETCH_NAMES = {"test_accuracy": "stretch_accuracy"}


def with_participation(rounds: pd.DataFrame) -> pd.DataFrame:
    """``rounds`` plus ``participation`` = participants / num_clients (when both exist)."""
    if "participation" in rounds or not {"participants", "num_clients"} <= set(rounds):
        return rounds
    return rounds.assign(participation=rounds["participants"] / rounds["num_clients"])


def tail_means(rounds: pd.DataFrame, *, last: int = 5) -> pd.DataFrame:
    """Per run: the mean of each equilibrium column over the run's last ``last`` rounds."""
    frame = with_participation(rounds)
    cols = [c for c in EQUILIBRIUM_COLUMNS if c in frame]
    tail = frame.sort_values("round").groupby("run_id", sort=False).tail(last)
    means = tail.groupby("run_id", sort=False)[cols].agg(lambda x: round_mean(x).value)
    return means.reset_index()


def settled_means(rounds: pd.DataFrame, criteria: Criteria | None = None) -> pd.DataFrame:
    """Per run: ``converged``, ``converged_round`` (NaN if never), ``stationary_round`` (R
    and Σρ alone stationary from there; NaN if never), ``trend`` (growth per round of the
    converged stretch), the mean of each equilibrium column over the converged stretch (NaN
    if the run never converged; the test accuracy's as ``stretch_accuracy``) and
    ``final_accuracy`` (the last round's, every run)."""
    frame = with_participation(rounds)
    cols = [c for c in EQUILIBRIUM_COLUMNS if c in frame]
    names = [STRETCH_NAMES.get(c, c) for c in cols]
    final = ["final_accuracy"] if "test_accuracy" in frame else []
    rows = []
    for run_id, run in frame.groupby("run_id", sort=False):
        verdict = detect(run, criteria)
        row: dict[str, object] = {
            "run_id": run_id,
            "converged": verdict.converged,
            "converged_round": verdict.round,
            "stationary_round": verdict.stationary_round,
            "trend": verdict.trend,
        }
        stretch = run[run["round"] >= verdict.round] if verdict.converged else run.iloc[:0]
        row |= {
            name: round_mean(stretch[c]).value if len(stretch) else math.nan
            for c, name in zip(cols, names)
        }
        if final:
            row["final_accuracy"] = float(run.sort_values("round")["test_accuracy"].iloc[-1])
        rows.append(row)
    return pd.DataFrame(rows, columns=["run_id", *CONVERGENCE_COLUMNS, *names, *final])


def equilibrium_table(
    rounds: pd.DataFrame,
    *,
    by: Sequence[str],
    criteria: Criteria | None = None,
    level: float = 0.95,
) -> pd.DataFrame:
    """Equilibrium values per group of ``by`` (grid keys): mean and t-interval over replicates.

    ``n`` counts the group's runs and ``<value>_n`` the runs behind each value
    (:func:`~fedgame.analysis.summary.aggregate`): ``converged`` is the share of the n runs
    that converged (Wilson interval, inside [0, 1]), ``converged_round`` the mean round they
    converged at (``stationary_round``, ``trend`` likewise), every equilibrium value the mean
    over the converged runs of their converged-stretch means (:func:`settled_means`; NaN when
    no run of the group converged), and ``final_accuracy`` the mean over all n runs.
    """
    ids = rounds[[*by, "run_id"]].drop_duplicates("run_id")
    per_run = ids.merge(settled_means(rounds, criteria), on="run_id")
    per_run["converged"] = per_run["converged"].astype(bool)  # a share: Wilson interval
    return aggregate(per_run, by=by, level=level)


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``y`` on ``x``: cov(x, y) / var(x); NaN if x is constant.

    >>> round(slope([1, 2, 3], [2, 4, 6]), 12)
    2.0
    """
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    ok = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[ok], ya[ok]
    if xa.size < 2 or np.ptp(xa) == 0:
        return math.nan
    return float(np.polyfit(xa, ya, 1)[0])


def elasticity(x: Sequence[float], y: Sequence[float]) -> float:
    """Log-log slope d ln y / d ln x (constant-elasticity fit); NaN unless x, y > 0.

    >>> round(elasticity([1, 2, 4], [3, 6, 12]), 6)
    1.0
    """
    xa, ya = np.asarray(x, float), np.asarray(y, float)
    if (xa <= 0).any() or (ya <= 0).any():
        return math.nan
    return slope(np.log(xa), np.log(ya))


def response(table: pd.DataFrame, *, x: str, metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """How each metric responds to ``x``, per combination of the other grid keys.

    ``table`` is an :func:`equilibrium_table`; returns rows (other keys, metric) with the value
    at the smallest and largest ``x``, the slope and the elasticity.
    """
    known = [STRETCH_NAMES.get(c, c) for c in EQUILIBRIUM_COLUMNS]
    metrics = metrics or [c for c in (*known, "final_accuracy") if c in table]
    suffixes = ("_lo", "_hi", "_n", "_km_median")
    stat_cols = {"n"} | {f"{m}{s}" for m in table.columns for s in suffixes}
    others = [c for c in table.columns if c not in (x, *stat_cols) and c not in metrics]
    others = [c for c in others if c not in (*EQUILIBRIUM_COLUMNS, *CONVERGENCE_COLUMNS)]
    others = [c for c in others if c not in (*STRETCH_NAMES.values(), "final_accuracy")]
    groups = table.groupby(others, sort=True) if others else [((), table)]
    rows = []
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        group = group.sort_values(x)
        for metric in metrics:
            rows.append(
                {
                    **dict(zip(others, key)),
                    "metric": metric,
                    f"at_min_{x}": float(group[metric].iloc[0]),
                    f"at_max_{x}": float(group[metric].iloc[-1]),
                    "slope": slope(group[x], group[metric]),
                    "elasticity": elasticity(group[x], group[metric]),
                }
            )
    return pd.DataFrame(rows)
