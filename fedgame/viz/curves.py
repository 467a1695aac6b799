"""Live curves of the rounds table: one small ECharts panel per quantity the run records.

Panels: test accuracy; participants (willing, selected, uploaded); ε spent (min, mean, max);
the leader's reward R_t; Σρ (the zCDP budgets delivered); the Nash gap (max and mean); the
incentive family's own per-round quantities ("mechanism": posted ``price``; auction
``clearing_price`` and ``shading``; the contract menu's lowest and highest payment r_k;
Shapley ``shapley_sum``, whichever the scenario's incentive writes). A panel
whose columns the scenario does not record (no incentive: no R_t, Σρ or Nash gap), or records
only as NaN, is left out. The x axis spans the planned rounds from round 0 on; a y axis starts
at 0 (accuracy spans [0, 1]), so a first point does not autoscale to nothing; the accuracy
line joins the rounds that measured it (``training.eval_every``). Values below
1e-12 of the column's scale are floating-point noise and drawn as 0, as the reports print them
(:func:`fedgame.viz.data.denoised`): a 1e-17 Nash gap is no spike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from fedgame.viz.data import denoised

FONT = 13
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c")


@dataclass(frozen=True)
class Panel:
    """A panel: its title, y label, the columns drawn (with their legend names) and the y
    range (``None`` for data-driven ends). ``joins``: a NaN is a value not measured
    (``training.eval_every``), so the line joins the measured points; elsewhere a NaN is
    a gap in the line."""

    title: str
    ylabel: str
    columns: tuple[tuple[str, str], ...]
    ymax: float | None = None
    joins: bool = False


PANELS = (
    Panel("test accuracy", "accuracy", (("test_accuracy", "accuracy"),), ymax=1.0, joins=True),
    Panel(
        "participants",
        "clients",
        (("participants", "willing"), ("selected", "selected"), ("uploaded", "uploaded")),
    ),
    Panel(
        "ε spent",
        "ε",
        tuple((f"epsilon_spent_{s}", s) for s in ("min", "mean", "max")),
    ),
    Panel("reward R_t", "reward", (("reward", "R_t"),)),
    Panel("Σρ delivered", "Σρ", (("sum_rho", "Σρ"),)),
    Panel("Nash gap", "utility gap", (("nash_gap_max", "max"), ("nash_gap_mean", "mean"))),
    Panel(
        "mechanism",
        "value",
        (
            ("price", "posted price"),
            ("clearing_price", "clearing price"),
            ("shading", "shading"),
            ("menu_pay_low", "lowest r_k"),
            ("menu_pay_high", "highest r_k"),
            ("shapley_sum", "Σφ"),
        ),
    ),
)


def _has_data(rounds: pd.DataFrame, column: str) -> bool:
    return column in rounds and bool(pd.to_numeric(rounds[column], errors="coerce").notna().any())


def panels_for(rounds: pd.DataFrame) -> list[Panel]:
    """The panels with at least one recorded value."""
    return [p for p in PANELS if any(_has_data(rounds, c) for c, _ in p.columns)]


def _skips(values: np.ndarray) -> bool:
    """Whether a round before the last measured one has no value (``training.eval_every``):
    its line then marks the measured rounds, whatever the number of rounds."""
    finite = np.flatnonzero(np.isfinite(values))
    return bool(finite.size and finite.size < finite[-1] + 1)


def _points(x: list[int], values: np.ndarray) -> list[list[Any]]:
    return [[r, None if not math.isfinite(v) else round(float(v), 6)] for r, v in zip(x, values)]


def curve_options(
    rounds: pd.DataFrame, *, rounds_planned: int, clients: int | None = None
) -> dict[str, dict[str, Any]]:
    """The ECharts option of each panel of ``rounds`` (the rounds table so far), by title;
    ``clients`` (N) tops the participants axis."""
    panels = panels_for(rounds)
    clean = {
        c: denoised(pd.to_numeric(rounds[c], errors="coerce").to_numpy(float))
        for p in panels for c, _ in p.columns if _has_data(rounds, c)
    }  # fmt: skip
    x = [int(r) for r in rounds["round"]] if "round" in rounds else list(range(len(rounds)))
    out: dict[str, dict[str, Any]] = {}
    for panel in panels:
        low = min(float(np.nanmin(clean[c])) for c, _ in panel.columns if c in clean)
        ymin = {"min": 0} if not low < 0 else {}
        ymax = panel.ymax if panel.ymax is not None else (
            clients if panel.title == "participants" and clients else None
        )  # fmt: skip
        series = [
            {"type": "line", "name": name, "data": _points(x, clean[c]),
             "showSymbol": len(x) < 40 or (panel.joins and _skips(clean[c])),
             "symbolSize": 6, "connectNulls": panel.joins,
             "lineStyle": {"width": 2 if len(panel.columns) == 1 or name == "mean" else 1.5},
             "color": PALETTE[j % len(PALETTE)], "animation": False}
            for j, (c, name) in enumerate(panel.columns) if c in clean
        ]  # fmt: skip
        out[panel.title] = {
            "animation": False,
            "textStyle": {"fontSize": FONT},
            "title": {"text": panel.title, "left": "center", "top": 0,
                      "textStyle": {"fontSize": 14, "fontWeight": "bold"}},
            "tooltip": {"trigger": "axis", "textStyle": {"fontSize": 12}},
            "legend": {"show": len(series) > 1, "top": 22, "textStyle": {"fontSize": 12},
                       "itemHeight": 8},
            "grid": {"left": 56, "right": 14, "top": 52 if len(series) > 1 else 32,
                     "bottom": 40},
            "xAxis": {"type": "value", "name": "round", "nameLocation": "middle", "nameGap": 24,
                      "min": 0, "max": max(rounds_planned, 1), "minInterval": 1,
                      "axisLabel": {"fontSize": 12}, "nameTextStyle": {"fontSize": FONT}},
            "yAxis": {"type": "value", "name": panel.ylabel, "nameLocation": "middle",
                      "nameGap": 40, **ymin, **({"max": ymax} if ymax else {}),
                      "axisLabel": {"fontSize": 12}, "nameTextStyle": {"fontSize": FONT}},
            "series": series,
        }  # fmt: skip
    return out
