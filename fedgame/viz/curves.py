"""Live curves of the rounds table: one small panel per quantity the run records.

Panels: test accuracy; participants (willing, selected, uploaded); ε spent (min-max band and
mean); the leader's reward R_t; Σρ (the zCDP budgets delivered); the Nash gap (max and mean).
A panel whose columns the scenario does not record (no incentive: no R_t, Σρ or Nash gap), or
records only as NaN, is left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator


@dataclass(frozen=True)
class Panel:
    """A panel: its title, y label and the columns drawn (the first ``band`` pair as a band)."""

    title: str
    ylabel: str
    columns: tuple[str, ...]
    band: tuple[str, str] | None = None


PANELS = (
    Panel("test accuracy", "accuracy", ("test_accuracy",)),
    Panel("participants", "clients", ("participants", "selected", "uploaded")),
    Panel(
        "ε spent (min-max, mean)",
        "ε",
        ("epsilon_spent_mean",),
        band=("epsilon_spent_min", "epsilon_spent_max"),
    ),
    Panel("reward R_t", "reward", ("reward",)),
    Panel("Σρ delivered", "Σρ", ("sum_rho",)),
    Panel("Nash gap", "utility gap", ("nash_gap_max", "nash_gap_mean")),
)


def _has_data(rounds: pd.DataFrame, column: str) -> bool:
    return column in rounds and bool(pd.to_numeric(rounds[column], errors="coerce").notna().any())


def panels_for(rounds: pd.DataFrame) -> list[Panel]:
    """The panels with at least one recorded value."""
    return [p for p in PANELS if any(_has_data(rounds, c) for c in (*p.columns, *(p.band or ())))]


def curves_figure(rounds: pd.DataFrame, *, rounds_planned: int) -> Figure:
    """The panels of ``rounds`` (the rounds table so far) against the round (2 per row, 3
    from five panels on)."""
    panels = panels_for(rounds)
    columns = 2 if len(panels) <= 4 else 3
    rows = max(1, -(-len(panels) // columns))
    fig = Figure(figsize=(7.5, 2.3 * rows), layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False).ravel()
    x = rounds["round"].to_numpy() if "round" in rounds else np.arange(len(rounds))
    for ax, panel in zip(axes, panels):
        if panel.band is not None and all(_has_data(rounds, c) for c in panel.band):
            low, high = (pd.to_numeric(rounds[c], errors="coerce") for c in panel.band)
            ax.fill_between(x, low, high, alpha=0.25, label="min-max")
        for column in panel.columns:
            if _has_data(rounds, column):
                values = pd.to_numeric(rounds[column], errors="coerce").to_numpy(float)
                ax.plot(x, values, marker="." if len(x) < 40 else None, label=column)
        ax.set_title(panel.title, fontsize=9)
        ax.set_ylabel(panel.ylabel, fontsize=8)
        ax.set_xlim(0, max(rounds_planned, 1))
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.tick_params(labelsize=7)
        if len(panel.columns) + (panel.band is not None) > 1:
            ax.legend(fontsize=6, frameon=False)
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    for ax in axes[-columns:]:
        ax.set_xlabel("round", fontsize=8)
    return fig
