"""Equilibrium diagnostics across a sweep: how the market settles as the population changes.

For each run the *equilibrium value* of a per-round quantity is its mean over the last
``last`` rounds (the tail, after the leader's reward and the followers' ρ have settled). The
quantities are the Stackelberg columns when an incentive writes them (``reward`` R_t,
``sum_rho`` Σρ, ``welfare``, ``nash_gap_max``) plus ones every run has (``participation`` =
participants / clients, ``reward_total`` = payments, ``test_accuracy``). Missing columns are
skipped, so the functions work on any sweep.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from fedgame.analysis.summary import aggregate

#: per-round columns read when present, in display order
EQUILIBRIUM_COLUMNS = (
    "reward",
    "sum_rho",
    "participation",
    "welfare",
    "nash_gap_max",
    "reward_total",
    "test_accuracy",
)


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
    return tail.groupby("run_id", sort=False)[cols].mean().reset_index()


def equilibrium_table(
    rounds: pd.DataFrame, *, by: Sequence[str], last: int = 5, level: float = 0.95
) -> pd.DataFrame:
    """Equilibrium values per group of ``by`` (grid keys): mean and t-interval over replicates."""
    ids = rounds[[*by, "run_id"]].drop_duplicates("run_id")
    per_run = ids.merge(tail_means(rounds, last=last), on="run_id")
    return aggregate(per_run, by=by, level=level)


def slope(x: Sequence[float], y: Sequence[float]) -> float:
    """Least-squares slope of ``y`` on ``x``: cov(x, y) / var(x); NaN if x is constant.

    >>> slope([1, 2, 3], [2, 4, 6])
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
    metrics = metrics or [c for c in EQUILIBRIUM_COLUMNS if c in table]
    stat_cols = {"n"} | {f"{m}{s}" for m in table.columns for s in ("_lo", "_hi")}
    others = [c for c in table.columns if c not in (x, *stat_cols) and c not in metrics]
    others = [c for c in others if c not in EQUILIBRIUM_COLUMNS]
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
