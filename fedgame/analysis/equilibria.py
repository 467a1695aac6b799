"""Per-round Stackelberg diagnostics of runs with a game incentive (QI-DPFL, paper 003).

Reads the columns the ``qi_dpfl`` / ``max`` / ``random`` / ``fixed`` / ``stackelberg``
incentives write (``reward``, ``sum_rho``, ``server_cost*``, ``welfare``, ``nash_gap_*``).
The server cost of a round without a delivered budget (Σρ = 0) is undefined (NaN): a
cumulative or total cost that would include such a round is NaN (refused), never a sum over
the other rounds (:mod:`fedgame.analysis.totals`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fedgame.analysis.totals import round_total
from fedgame.errors import FedGameError

COLUMNS = (
    "reward",
    "sum_rho",
    "server_cost_accuracy",
    "server_cost_payment",
    "server_cost",
    "welfare",
    "nash_gap_max",
    "nash_gap_mean",
    "removed_for_feasibility",
)


def _rounds(run: Any) -> pd.DataFrame:
    rounds = run if isinstance(run, pd.DataFrame) else getattr(run, "rounds", None)
    if rounds is None or "reward" not in rounds or "sum_rho" not in rounds:
        raise FedGameError(
            "equilibria: the run has no 'reward'/'sum_rho' columns (use a Stackelberg incentive "
            "such as qi_dpfl)"
        )
    return rounds


def equilibria(run: Any) -> pd.DataFrame:
    """One row per round: R_t, Σρ, server cost (both terms), welfare, Nash gaps, accuracy.

    ``cumulative_server_cost`` is NaN from the first round whose cost is undefined on.
    ``run``: a :class:`fedgame.analysis.Run`, a ``RunResult`` or a rounds frame.
    """
    rounds = _rounds(run)
    cols = ["round", *(c for c in COLUMNS if c in rounds), "test_accuracy"]
    out = rounds[[c for c in cols if c in rounds]].copy()
    out["cumulative_server_cost"] = out["server_cost"].cumsum(skipna=False)
    return out.reset_index(drop=True)


def compare_incentives(runs: Mapping[str, Sequence[Any]] | Sequence[Any]) -> pd.DataFrame:
    """Mean ± sd over replicates of final accuracy, total server cost and payments per label.

    A replicate whose server cost is undefined in some round has no total (NaN), so the
    label's mean is NaN too; ``server_cost_refused`` counts such replicates. Payments of a
    round without deliveries are 0 (nobody is paid). ``runs``: label → list of runs
    (replicates), or a flat list (labelled by incentive kind from each run's resolved
    scenario).
    """
    if not isinstance(runs, Mapping):
        grouped: dict[str, list[Any]] = {}
        for run in runs:
            kind = (getattr(run, "scenario", {}) or {}).get("incentive", {}).get("kind", "?")
            grouped.setdefault(str(kind), []).append(run)
        runs = grouped
    rows = []
    for label, reps in runs.items():
        acc, cost, paid, gap = [], [], [], []
        for run in reps:
            r = _rounds(run)
            acc.append(float(r["test_accuracy"].iloc[-1]))
            cost.append(round_total(r["server_cost"]).value)
            paid.append(round_total(r["payments_total"]).value if "payments_total" in r else np.nan)
            gap.append(float(r["nash_gap_max"].max()) if "nash_gap_max" in r else np.nan)
        rows.append(
            {
                "label": label,
                "replicates": len(reps),
                "accuracy_mean": np.mean(acc),
                "accuracy_sd": np.std(acc, ddof=1) if len(acc) > 1 else np.nan,
                "server_cost_mean": np.mean(cost),
                "server_cost_sd": np.std(cost, ddof=1) if len(cost) > 1 else np.nan,
                "server_cost_refused": int(np.sum(~np.isfinite(cost))),
                "payments_mean": np.mean(paid),
                "nash_gap_max": np.nanmax(gap) if np.any(np.isfinite(gap)) else np.nan,
            }
        )
    return pd.DataFrame(rows)
