"""Heatmap of a per-grid-point summary over two swept keys (panels for any further keys).

Each cell is annotated with the mean and, where the summary has it, the 95% interval over the
cell's runs (clipped to the quantity's range); the text colour follows the cell's brightness.
Axes are labelled with the short key name and the full dotted key; tick labels are formatted
values (long ones rotated).
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
    finite = table[value].to_numpy(float)
    norm = Normalize(float(np.nanmin(finite)), float(np.nanmax(finite)))
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
    fig.suptitle(f"{q.name}\nmean over {runs}{interval}", fontsize="medium")
    return fig
