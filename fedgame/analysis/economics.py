"""The report's economics section: what each run bought and paid, from the ``econ_*`` columns.

Per run (:func:`economics_metrics`): the server's total cost (``econ_server_cost`` summed), the
clients' total surplus, the total welfare, the rounds' IR violations summed, the largest and
the mean per-round regret (``econ_regret_max``), the mean payment fairness over the rounds that
have one, and the accuracy points gained per reward unit over the run
(``econ_accuracy_per_cost_to_date`` of the last round). A sweep's report averages them per grid
point with 95% intervals; a run's report lists them. The figure draws the cost to date, the
welfare, the regret and the fairness per round. Runs that bought and paid nothing (``none``)
get no section. Definitions: docs/economics.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from fedgame.analysis import figures
from fedgame.analysis.markdown import denoise, md_table, with_ci
from fedgame.analysis.quantities import quantity
from fedgame.analysis.summary import aggregate

#: per-run metrics of the section, in table order
METRICS = (
    "econ_total_cost",
    "econ_total_surplus",
    "econ_total_welfare",
    "econ_ir_total",
    "econ_regret_worst",
    "econ_regret_typical",
    "econ_fairness_mean",
    "econ_points_per_cost",
)
#: the per-round columns the figure draws
FIGURE_COLUMNS = ("econ_cost_to_date", "econ_welfare", "econ_regret_max", "econ_fairness")

NOTE = (
    "From the rounds table's `econ_*` columns (docs/economics.md): `econ_total_cost` is Σ "
    "payments over the run, `econ_total_surplus` Σ (payment − true privacy cost), "
    "`econ_total_welfare` Σ (value of the accuracy gained − true privacy cost) with the value "
    "set by `game.economics.value_per_point`, `econ_ir_total` the client-rounds with negative "
    "surplus, `econ_regret_worst` / `econ_regret_typical` the largest and the mean over rounds "
    "of the round's largest sampled deviation gain, `econ_fairness_mean` the mean payment "
    "fairness (– without a contribution estimate), `econ_points_per_cost` the accuracy points "
    "gained over the run per reward unit paid (0 when nothing was paid)."
)


def has_economics(rounds: pd.DataFrame) -> bool:
    """Whether the runs wrote the economics columns and some run bought or paid anything
    (a run under ``incentive: none`` writes zeros: no section)."""
    if "econ_server_cost" not in rounds or "econ_units" not in rounds:
        return False
    bought = rounds[["econ_server_cost", "econ_units"]].fillna(0.0).to_numpy()
    return bool((bought != 0).any())


def economics_metrics(rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per ``run_id`` with :data:`METRICS` (module doc)."""
    rows = []
    for run_id, run in rounds.sort_values("round").groupby("run_id", sort=False):
        fairness = run["econ_fairness"].dropna()
        regret = run["econ_regret_max"]
        rows.append(
            {
                "run_id": run_id,
                "econ_total_cost": float(run["econ_server_cost"].sum()),
                "econ_total_surplus": float(run["econ_client_surplus"].sum()),
                "econ_total_welfare": float(run["econ_welfare"].sum()),
                "econ_ir_total": float(run["econ_ir_violations"].sum()),
                "econ_regret_worst": float(regret.max()) if regret.notna().any() else math.nan,
                "econ_regret_typical": float(regret.mean()) if regret.notna().any() else math.nan,
                "econ_fairness_mean": float(fairness.mean()) if len(fairness) else math.nan,
                "econ_points_per_cost": float(run["econ_accuracy_per_cost_to_date"].iloc[-1]),
            }
        )
    return pd.DataFrame(rows)


def economics_section(rounds: pd.DataFrame, out: Path, *, by: Sequence[str] = ()) -> list[str]:
    """Markdown lines of the section and its figure (``economics.png`` in ``out``); nothing
    when the runs have no economics columns."""
    if not has_economics(rounds):
        return []
    per_run = economics_metrics(rounds)
    lines = ["## Economics", "", NOTE, ""]
    if by:
        ids = rounds[[*by, "run_id"]].drop_duplicates("run_id")
        table = aggregate(ids.merge(per_run, on="run_id"), by=list(by))
        lines += [md_table(with_ci(table, list(by), METRICS)), ""]
    else:
        values = (
            per_run[list(METRICS)].iloc[0] if len(per_run) == 1 else per_run[list(METRICS)].mean()
        )
        table = pd.DataFrame(
            {
                "metric": list(METRICS),
                "value": np.asarray(values, dtype=float),
                "measures": [quantity(m).label for m in METRICS],
            }
        )
        lines += [md_table(table), ""]
    path = figures.line_panels(
        denoise(rounds, ["econ_regret_max"]),  # a gap of 1e-17 is rounding, drawn as 0
        columns=list(FIGURE_COLUMNS),
        path=out / "economics.png",
        by=by,
        title="Economics per round",
    )
    if path is not None:
        rel = path.relative_to(out).as_posix()
        lines += [f"### Economics per round\n\n![Economics per round]({rel})\n"]
    return lines
