"""Heatmap of a per-grid-point summary over two swept keys (panels for any further keys).

Each cell is annotated with the mean and, where the summary has it, the 95% interval over the
cell's runs (clipped to the quantity's range); the text colour follows the cell's brightness.
Axes are labelled with the short key name and the full dotted key; tick labels are formatted
values (long ones rotated).

The colour scale is anchored, so that contrast does not exaggerate differences the intervals
cannot tell apart (:func:`colour_scale`): a quantity with a natural range on both sides
(accuracy, participation: [0, 1]) spans that range; one bounded below (rewards, counts, ε:
[0, ∞)) starts at its bound; the top (and an unbounded bottom) reach the outermost interval
ends, not just the cell means. When the cell means differ by less than the typical interval
width, the title says that the colours show differences smaller than the intervals.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from fedgame.analysis.encoding import format_value, split
from fedgame.analysis.quantities import format_number, key_label, plural, quantity
from fedgame.run.store import atomic_write_bytes


def _axis_label(key: str) -> str:
    short = key_label(key)
    return short if short == key else f"{short}  ({key})"


def _cell_text(mean: float, lo: float, hi: float, *, scale: float, ci: bool) -> str:
    if math.isnan(mean):
        return "–"
    text = format_number(mean, scale=scale, digits=3)
    if ci and not (math.isnan(lo) or math.isnan(hi)):
        lo_t, hi_t = (format_number(v, scale=scale, digits=3) for v in (lo, hi))
        text += f"\n[{lo_t}, {hi_t}]"
    return text


def _draw(
    ax: Axes, table: pd.DataFrame, *, x: str, y: str, value: str, norm: Normalize, ci: bool
) -> Any:
    q = quantity(value)
    grid = table.pivot_table(index=y, columns=x, values=value, aggfunc="mean", dropna=False)
    grid = grid.sort_index().sort_index(axis=1)
    data = grid.to_numpy(float)
    bounds = {
        s: q.clip(
            table.pivot_table(index=y, columns=x, values=f"{value}_{s}", aggfunc="mean")
            .reindex(index=grid.index, columns=grid.columns)
            .to_numpy(float)
        )
        if ci
        else np.full_like(data, math.nan)
        for s in ("lo", "hi")
    }
    image = ax.imshow(data, origin="lower", aspect="auto", cmap="viridis", norm=norm)
    xt = [format_value(v) for v in grid.columns]
    ax.set_xticks(range(grid.shape[1]), xt, rotation=30 if max(map(len, xt)) > 10 else 0)
    ax.set_yticks(range(grid.shape[0]), [format_value(v) for v in grid.index])
    ax.set_xlabel(_axis_label(x))
    ax.set_ylabel(_axis_label(y))
    scale = float(np.nanmax(np.abs(data))) if np.isfinite(data).any() else 1.0
    size = "small" if data.size <= 36 else "x-small"
    for (i, j), mean in np.ndenumerate(data):
        rgba = image.cmap(norm(mean)) if not math.isnan(mean) else (1.0, 1.0, 1.0, 1.0)
        dark = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.55
        lo, hi = float(bounds["lo"][i, j]), float(bounds["hi"][i, j])
        text = _cell_text(mean, lo, hi, scale=scale, ci=ci)
        colour = "white" if dark else "black"
        ax.text(j, i, text, ha="center", va="center", fontsize=size, color=colour)
    return image


def colour_scale(table: pd.DataFrame, value: str) -> tuple[Normalize, str]:
    """The anchored colour scale of ``value`` (module doc) and a note for the title ("" when
    none is needed)."""
    q = quantity(value)
    means = table[value].to_numpy(float)
    ends = [means]
    for side in ("lo", "hi"):
        if f"{value}_{side}" in table:
            ends.append(q.clip(table[f"{value}_{side}"].to_numpy(float)))
    every = np.concatenate(ends)
    every = every[np.isfinite(every)]
    low = q.low if math.isfinite(q.low) else float(every.min())
    high = q.high if math.isfinite(q.high) else float(every.max())
    if not high > low:
        high = low + 1.0
    note = ""
    if f"{value}_lo" in table and f"{value}_hi" in table:
        width = q.clip(table[f"{value}_hi"].to_numpy(float)) - q.clip(
            table[f"{value}_lo"].to_numpy(float)
        )
        width = width[np.isfinite(width)]
        spread = float(np.nanmax(means) - np.nanmin(means))
        if width.size and spread < float(np.median(width)):
            note = "colour differences are smaller than the typical 95% interval"
    return Normalize(low, high), note


def heatmap(
    table: pd.DataFrame,
    *,
    x: str,
    y: str,
    value: str,
    path: str | Path,
    by: Sequence[str] = (),
) -> Path | None:
    """:func:`plot_heatmap` saved to ``path`` (None when ``value`` has no data)."""
    fig = plot_heatmap(table, x=x, y=y, value=value, by=by)
    if fig is None:
        return None
    path = Path(path)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    atomic_write_bytes(path, png.getvalue())  # replaces a link there, never writes through it
    return path


def plot_heatmap(
    table: pd.DataFrame, *, x: str, y: str, value: str, by: Sequence[str] = ()
) -> Figure | None:
    """``value`` over the (``x``, ``y``) grid of ``table`` (one row per grid point, e.g. a
    :func:`fedgame.analysis.summary.summarise` table), one panel per value of ``by``."""
    if value not in table or table[value].isna().all():
        return None
    q = quantity(value)
    panels = split(table, [k for k in by if k in table])
    nx, ny = table[x].nunique(), table[y].nunique()
    width, height = 1.5 + 1.1 * max(nx, 3), 1.2 + 0.75 * max(ny, 3)
    fig = Figure(figsize=(width * len(panels) + 1.2, height + 0.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    norm, note = colour_scale(table, value)
    n = table["n"].astype(int) if "n" in table else pd.Series([1])
    ci = f"{value}_lo" in table and int(n.max()) > 1 and nx * ny <= 36
    for ax, (title, frame) in zip(axes, panels):
        image = _draw(ax, frame, x=x, y=y, value=value, norm=norm, ci=ci)
        ax.set_title(title, fontsize="medium")
    fig.colorbar(image, ax=list(axes), label=q.label)
    runs = (
        f"n = {plural(int(n.iloc[0]), 'run')} per cell" if n.nunique() == 1 else "n per cell varies"
    )
    clipped = f", clipped to {q.range_text}" if q.range_text else ""
    interval = f"; 95% CI in brackets{clipped}" if ci else ""
    scale = f"colours span {format_number(float(norm.vmin or 0.0))} to "
    scale += format_number(float(norm.vmax or 0.0))
    scale += f" ({note})" if note else ""
    fig.suptitle(f"{q.name}\nmean over {runs}{interval}\n{scale}", fontsize="medium")
    return fig
