"""Per-run metrics and per-grid-point summaries with 95% t-intervals over replicates.

Pure pandas: every function takes frames (``Sweep.rounds`` / ``Sweep.clients`` or a single
run's tables with ``run_id`` added) and returns a new frame. Columns that a scenario does not
produce (e.g. ``nash_gap_max`` without a Stackelberg incentive) are simply left out.

Counts are honest: :func:`aggregate` gives, beside each value, ``<metric>_n``, the runs
behind that number (a run without a value, e.g. one that never reached the target accuracy
or never converged, is not one of them). ``rounds_to_target`` is a time to an event that
some runs never see within their horizon: it is *censored* at the run's last round
(``rounds_run``), summarised as the mean over the runs that reached the target with its
interval clipped to [1, horizon], ``rounds_to_target_n`` of them (printed "k of n
reached"), and the Kaplan-Meier median ``rounds_to_target_km_median`` (NaN while fewer
than half reached it: the median lies beyond the horizon).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

from fedgame.analysis.stats import t_interval
from fedgame.analysis.totals import round_total

#: optional per-round columns summarised when present: column -> how a run is reduced
OPTIONAL_FINAL = ("reward", "sum_rho", "welfare", "nash_gap_max", "server_utility")
#: times to an event, censored at a per-run horizon column: metric -> horizon column
CENSORED = {"rounds_to_target": "rounds_run"}


def share_interval(flags: Sequence[bool], *, level: float = 0.95) -> tuple[float, float, float]:
    """Share of True ``flags`` and its two-sided Wilson score interval (inside [0, 1]).

    With p̂ = k/n and z the normal quantile at (1 + level)/2: centre (p̂ + z²/2n)/(1 + z²/n),
    half-width z·sqrt(p̂(1 − p̂)/n + z²/4n²)/(1 + z²/n) (Wilson 1927; Agresti & Coull 1998).
    A t-interval on 0/1 values leaves [0, 1] for small n; this one does not, and it is not
    degenerate at k = 0 or n. NaN bounds with no flags.

    >>> tuple(round(v, 4) for v in share_interval([True, False, False]))
    (0.3333, 0.0615, 0.7923)
    """
    x = np.asarray(list(flags), dtype=bool)
    n = int(x.size)
    if n == 0:
        return math.nan, math.nan, math.nan
    p = float(x.mean())
    z = float(stats.norm.ppf((1 + level) / 2))
    scale = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / scale
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / scale
    return p, max(0.0, min(p, centre - half)), min(1.0, max(p, centre + half))  # no rounding out


def interval_table(
    frame: pd.DataFrame, column: str, *, by: Sequence[str], level: float = 0.95
) -> pd.DataFrame:
    """Per group of ``by``: ``n``, ``mean``, ``lo``, ``hi`` of ``column`` (vectorised t-interval).

    The same interval as :func:`fedgame.analysis.stats.t_interval` (NaN bounds where n < 2),
    for many groups at once,
    e.g. ``by=["round"]`` over a grid point's replicates.
    """
    g = frame.groupby(list(by), sort=True)[column]
    out = g.agg(n="count", mean="mean", sd="std").reset_index()
    n = out["n"].to_numpy(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = stats.t.ppf((1 + level) / 2, np.where(n >= 2, n - 1, np.nan))
        half = t * out["sd"].to_numpy(float) / np.sqrt(n)
    out["lo"] = out["mean"] - half
    out["hi"] = out["mean"] + half
    return out.drop(columns="sd")


def kaplan_meier_median(times: Sequence[float], horizons: Sequence[float]) -> float:
    """Kaplan-Meier median of event ``times`` (NaN: censored at the run's ``horizons``).

    The survival curve S(t) = Π_{t_j ≤ t} (1 − d_j/r_j) over the event times t_j (d_j events,
    r_j runs still at risk: neither an event nor censored before t_j, Kaplan & Meier 1958);
    the median is the first t with S(t) ≤ 1/2, NaN when S stays above (fewer than half of the
    runs saw the event within their horizon).

    >>> kaplan_meier_median([3, 5, float("nan"), float("nan")], [20, 20, 20, 20])
    5.0
    >>> kaplan_meier_median([3, float("nan"), float("nan")], [20, 20, 20])
    nan
    """
    t = np.asarray(times, dtype=float)
    h = np.asarray(horizons, dtype=float)
    end = np.where(np.isnan(t), h, t)
    survival = 1.0
    for when in np.unique(t[~np.isnan(t)]):
        at_risk = int(np.sum(end >= when))
        events = int(np.sum(t == when))
        survival *= 1.0 - events / at_risk
        if survival <= 0.5:
            return float(when)
    return math.nan


def rounds_to_target(accuracy: Sequence[float], *, target: float) -> float:
    """First round (1-based) whose accuracy reaches ``target``; NaN if none does.

    >>> rounds_to_target([0.2, 0.5, 0.85, 0.9], target=0.8)
    3.0
    """
    for i, acc in enumerate(accuracy, start=1):
        if acc >= target:
            return float(i)
    return math.nan


def run_metrics(
    rounds: pd.DataFrame, clients: pd.DataFrame | None = None, *, target: float = 0.8
) -> pd.DataFrame:
    """One row per ``run_id``: final accuracy, rounds to ``target``, reward, cost, ε, participation.

    ``rounds_to_target`` is NaN for a run that never reached ``target``; ``rounds_run`` (the
    run's last round) is its horizon, where such a run is censored. ``server_cost`` is the
    ``server_cost`` column summed when present, else the total payments (``reward_total``
    summed); a total with an undefined round is NaN (refused, see
    :mod:`fedgame.analysis.totals`), never a sum over the other rounds. ε quantiles come from
    the clients' final-round ``epsilon_spent``.
    """
    rows = []
    for run_id, run in rounds.sort_values("round").groupby("run_id", sort=False):
        last = run.iloc[-1]
        n = run.get("num_clients", np.nan)
        row = {
            "run_id": run_id,
            "final_accuracy": float(last["test_accuracy"]),
            "rounds_to_target": rounds_to_target(run["test_accuracy"].tolist(), target=target),
            "rounds_run": float(last["round"]),
            "total_reward": round_total(run.get("reward_total", pd.Series([0.0]))).value,
            "final_epsilon_mean": float(last.get("epsilon_spent_mean", np.nan)),
            "final_epsilon_max": float(last.get("epsilon_spent_max", np.nan)),
            "participation_rate": float((run["participants"] / n).mean()),
            "upload_rate": float((run["uploaded"] / n).mean()),
        }
        cost = run["server_cost"] if "server_cost" in run else run.get("reward_total")
        row["server_cost"] = round_total(cost).value if cost is not None else math.nan
        for col in OPTIONAL_FINAL:
            if col in run and run[col].notna().any():
                row[col] = float(run[col].dropna().iloc[-1])
        rows.append(row)
    out = pd.DataFrame(rows)
    if clients is not None and not clients.empty and "epsilon_spent" in clients:
        final = clients[clients["round"] == clients.groupby("run_id")["round"].transform("max")]
        q = final.groupby("run_id")["epsilon_spent"].quantile([0.1, 0.5, 0.9]).unstack()
        q.columns = ["epsilon_p10", "epsilon_p50", "epsilon_p90"]
        out = out.merge(q.reset_index(), on="run_id", how="left")
    return out


def aggregate(per_run: pd.DataFrame, *, by: Sequence[str], level: float = 0.95) -> pd.DataFrame:
    """Mean and t-interval of every numeric column of ``per_run`` per group of ``by``; a
    boolean column is a share of runs, with its Wilson interval (:func:`share_interval`).

    Output columns: ``by``, ``n`` (runs in the group), then per metric ``<metric>``,
    ``<metric>_lo``, ``<metric>_hi`` and ``<metric>_n`` (the runs with a value: NaN values are
    dropped). A censored time (``CENSORED``: ``rounds_to_target``, with its horizon
    ``rounds_run``) is averaged over the runs that saw the event, its interval clipped to
    [1, the group's longest horizon], and gains ``<metric>_km_median`` (module doc).
    """
    metrics = [
        c
        for c in per_run.columns
        if c not in (*by, "run_id", "replicate") and pd.api.types.is_numeric_dtype(per_run[c])
    ]
    rows = []
    groups = per_run.groupby(list(by), sort=True, dropna=False) if by else [((), per_run)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        row = dict(zip(by, key))
        row["n"] = len(group)
        for col in metrics:
            if pd.api.types.is_bool_dtype(per_run[col]):
                stat = share_interval(group[col].tolist(), level=level)
                count = len(group)
            else:
                iv = t_interval(group[col].astype(float).tolist(), level)
                stat, count = (iv.mean, iv.low, iv.high), iv.n
            row[col], row[f"{col}_lo"], row[f"{col}_hi"] = stat
            row[f"{col}_n"] = count
            horizon_col = CENSORED.get(col)
            if horizon_col is not None and horizon_col in group:
                horizon = group[horizon_col].astype(float)
                top = float(horizon.max())
                row[f"{col}_lo"] = min(max(row[f"{col}_lo"], 1.0), top)
                row[f"{col}_hi"] = min(max(row[f"{col}_hi"], 1.0), top)
                row[f"{col}_km_median"] = kaplan_meier_median(group[col].tolist(), horizon.tolist())
        rows.append(row)
    return pd.DataFrame(rows)


def summarise(sweep: object, *, target: float = 0.8, clients: bool = True) -> pd.DataFrame:
    """Summary per grid point of a loaded sweep (mean and 95% CI over replicates)."""
    rounds = sweep.rounds  # type: ignore[attr-defined]
    keys = list(sweep.keys)  # type: ignore[attr-defined]
    per_run = run_metrics(rounds, sweep.clients if clients else None, target=target)  # type: ignore[attr-defined]
    ids = rounds[[*keys, "run_id", "replicate"]].drop_duplicates("run_id")
    return aggregate(ids.merge(per_run, on="run_id"), by=keys)
