"""Figures as PNG files (matplotlib's object API on the Agg canvas; no pyplot state).

Each function takes tidy frames (a sweep's or a run's, with ``run_id``) and the swept keys
``by``, draws one figure, saves it to ``path`` and returns the path, or None when the frame
lacks the columns it needs. Line plots draw one line per grid point (all swept keys, see
:mod:`fedgame.analysis.encoding`): the mean over the grid point's runs (replicates) per round,
and a band with the 95% Student-t interval over those same runs, clipped to the range the
quantity can take (:mod:`fedgame.analysis.quantities`). A grid point with fewer than
``MIN_BAND_RUNS`` (3) runs has no mean and band: its runs are drawn one by one, thin, in its
colour (with 2 runs t_{0.975,1} = 12.7 makes a band that swamps every line). The number of
runs n is in the title (or in each label when grid points differ). Rounds are integer ticks.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from fedgame.analysis.encoding import GridEncoding
from fedgame.analysis.equilibrium import with_participation
from fedgame.analysis.heatmap import heatmap, plot_heatmap
from fedgame.analysis.quantities import Quantity, plural, quantity
from fedgame.analysis.summary import interval_table
from fedgame.run.store import atomic_write_bytes

#: runs a grid point needs for a mean line with a 95% band; with fewer, each run is drawn
MIN_BAND_RUNS = 3

__all__ = [
    "accuracy_curves",
    "curves",
    "epsilon_cdf",
    "heatmap",
    "participation_curves",
    "plot_epsilon_cdf",
    "plot_heatmap",
    "plot_lines",
    "trajectories",
]


def new_figure(panels: int, quantities: int = 1) -> tuple[Figure, np.ndarray]:
    """A constrained-layout figure on the Agg canvas and its axes, indexed [panel, quantity].

    One quantity: the panels wrap in rows of three, sharing both axes. Several quantities:
    one row per panel, one column per quantity (each column sharing its y axis).
    """
    rows, cols = (panels, quantities) if quantities > 1 else (math.ceil(panels / 3), min(panels, 3))
    fig = Figure(figsize=(4.8 * cols + 0.4, 3.4 * rows + 1.4), layout="constrained")
    FigureCanvasAgg(fig)
    grid = fig.subplots(rows, cols, squeeze=False, sharex=True, sharey=quantities == 1 or "col")
    if quantities > 1:
        return fig, grid
    for ax in grid.flat[panels:]:
        fig.delaxes(ax)
    for ax in grid.flat[max(panels - cols, 0) : panels]:  # nothing below: show the round ticks
        ax.xaxis.set_tick_params(labelbottom=True)
    return fig, grid.reshape(-1, 1)[:panels]


def save(fig: Figure, path: str | Path) -> Path:
    """Write ``fig`` as a PNG at ``path`` (parent folders created; written atomically)."""
    path = Path(path)
    png = io.BytesIO()
    fig.savefig(png, format="png", dpi=110)
    atomic_write_bytes(path, png.getvalue())  # replaces a link there, never writes through it
    return path


def runs_per_point(frame: pd.DataFrame, keys: Sequence[str]) -> pd.Series:
    """Number of distinct runs per grid point (one value for an unswept frame)."""
    if "run_id" not in frame:
        return pd.Series([1])
    if not keys:
        return pd.Series([frame["run_id"].nunique()])
    return frame.groupby(list(keys), sort=True)["run_id"].nunique()


def _n_text(counts: pd.Series, *, swept: bool) -> tuple[str, bool]:
    """(subtitle about n, whether each label must carry its own n)."""
    if counts.nunique() > 1:
        few = counts.min() < MIN_BAND_RUNS
        note = f"; under {MIN_BAND_RUNS} runs each run is drawn" if few else ""
        return f"mean and 95% CI over the runs of each grid point (n per line){note}", True
    n = int(counts.iloc[0])
    if n < 2:
        return ("one run per grid point (no interval)" if swept else "one run"), False
    where = "per grid point" if swept else "in all"
    if n < MIN_BAND_RUNS:
        return f"each of the n = {n} runs {where} drawn (too few for an interval)", False
    return f"mean and 95% CI over n = {n} runs {where}", False


def _bounds_text(q: Quantity) -> str:
    return f", CI clipped to {q.range_text}" if q.range_text else ""


def _limit_to_range(ax: Axes, q: Quantity) -> None:
    """Keep the y axis inside the quantity's range (plus a 2% margin)."""
    y0, y1 = ax.get_ylim()
    pad = 0.02 * (y1 - y0)
    ax.set_ylim(max(y0, q.low - pad), min(y1, q.high + pad))


def _label_axes(ax: Axes, p: int, panels: int, *, xlabel: str, ylabel: str, wrap: bool) -> None:
    """Axis labels on the outer panels only (panel ``p`` of ``panels``; rows of 3 if ``wrap``)."""
    bottom = p + 3 >= panels if wrap else p == panels - 1
    ax.set_xlabel(xlabel if bottom else "")
    ax.set_ylabel(ylabel if not wrap or p % 3 == 0 else "")


def draw_runs(ax: Axes, runs: pd.DataFrame, column: str, *, label: str, style: dict) -> None:
    """One grid point with too few runs for an interval: each run's line, thin, the first
    one labelled."""
    for i, (_, run) in enumerate(runs.dropna(subset=[column]).groupby("run_id", sort=True)):
        run = run.sort_values("round")
        thin = {**style, "linewidth": 1.1, "alpha": 0.85}
        ax.plot(run["round"], run[column], label=label if i == 0 else "_nolegend_", **thin)


def draw_band(
    ax: Axes, runs: pd.DataFrame, column: str, *, label: str, style: dict, alpha: float = 0.2
) -> None:
    """One grid point: mean per round over its runs, with the clipped 95% t-interval; each
    run instead when it has fewer than ``MIN_BAND_RUNS`` (and more than one)."""
    if "run_id" in runs and 1 < runs["run_id"].nunique() < MIN_BAND_RUNS:
        draw_runs(ax, runs, column, label=label, style=style)
        return
    q = quantity(column)
    stats = interval_table(runs.dropna(subset=[column]), column, by=["round"])
    if stats.empty:
        return
    rounds = stats["round"].to_numpy(float)
    ax.plot(rounds, stats["mean"], label=label, **style)
    lo, hi = q.clip(stats["lo"].to_numpy()), q.clip(stats["hi"].to_numpy())
    if np.isfinite(lo).any():
        ax.fill_between(rounds, lo, hi, alpha=alpha, color=style["color"], linewidth=0)


def _legend(fig: Figure, enc: GridEncoding) -> None:
    """One legend for the whole figure, under the panels (when there is more than a line)."""
    entries: dict[str, Artist] = {}
    for ax in fig.axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if len(entries) < 2:
        return
    hues = len(enc.values[enc.line_keys[0]]) if enc.line_keys else 1
    ncols = hues if len(enc.line_keys) > 1 else min(len(entries), 5)
    fig.legend(
        list(entries.values()),
        list(entries),
        loc="outside lower center",
        ncols=ncols,
        title=", ".join(enc.names[k] for k in enc.line_keys) or None,
        fontsize="small",
    )


def plot_lines(
    rounds: pd.DataFrame, *, columns: Sequence[str], by: Sequence[str] = (), title: str
) -> Figure | None:
    """``columns`` against round: a panel per column and per combination of the panel keys,
    one line per grid point; None when no column has data."""
    present = [c for c in columns if c in rounds and rounds[c].notna().any()]
    if not present:
        return None
    enc = GridEncoding.of(rounds, by)
    counts = runs_per_point(rounds, enc.keys)
    subtitle, n_in_label = _n_text(counts, swept=bool(enc.keys))
    panels = enc.panels(rounds)
    dotted = False  # some line marks the rounds its quantity was measured in
    fig, axes = new_figure(len(panels), len(present))
    for p, (row, (panel_title, frame)) in enumerate(zip(axes, panels)):
        for ax, column in zip(row, present):
            lines = list(enc.lines(frame))
            alpha = 0.2 if len(lines) <= 2 else 0.12 if len(lines) <= 4 else 0.07
            for point, runs in lines:
                label = enc.label(point)
                if n_in_label:
                    label += f" (n={runs['run_id'].nunique()})"
                sparse = column in EVALUATED and measured_between(runs, column)
                dotted |= sparse
                # the encoding's own markers, where it has them, mark every point already
                style = {**(MEASURED_DOTS if sparse else {}), **enc.style(point)}
                draw_band(ax, runs, column, label=label, style=style, alpha=alpha)
            q = quantity(column)
            names = [q.name] if len(present) > 1 else []
            ax.set_title(" | ".join(t for t in (*names, panel_title) if t), fontsize="medium")
            _label_axes(ax, p, len(panels), xlabel="round", ylabel=q.label, wrap=len(present) == 1)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.grid(alpha=0.3)
    for row in axes:  # after all panels are drawn: shared limits cover every panel's data
        for ax, column in zip(row, present):
            _limit_to_range(ax, quantity(column))
    bands = len(present) == 1 and counts.max() >= MIN_BAND_RUNS
    bounds = _bounds_text(quantity(present[0])) if bands else ""
    note = "\ndots: the rounds it was measured in; lines join them" if dotted else ""
    fig.suptitle(f"{title}\n{subtitle}{bounds}{note}", fontsize="medium")
    _legend(fig, enc)
    return fig


#: the line style of a quantity measured in some rounds only (``training.eval_every``)
MEASURED_DOTS = {"marker": "o", "markersize": 3.5}
#: the columns ``training.eval_every`` leaves NaN in the rounds between evaluations
EVALUATED = ("test_accuracy", "test_loss")


def measured_between(rounds: pd.DataFrame, column: str) -> bool:
    """Whether ``column`` is measured in some rounds only: NaN in a round that comes
    before one where it is measured, in some run (and server, in a market's frame;
    ``training.eval_every`` leaves the rounds in between NaN). Rounds after a run's last
    value (a run cut short) do not count."""
    if column not in rounds or "round" not in rounds:
        return False
    keys = [k for k in ("run_id", "server") if k in rounds]
    frame = rounds.sort_values([*keys, "round"])
    measured = frame[column].notna()
    backwards = measured[::-1]
    if keys:
        after_last = backwards.groupby([frame[k][::-1] for k in keys], dropna=False).cummax()[::-1]
    else:
        after_last = backwards.cummax()[::-1]
    return bool((~measured & after_last).any())


def line_panels(
    rounds: pd.DataFrame,
    *,
    columns: Sequence[str],
    path: str | Path,
    by: Sequence[str] = (),
    title: str,
) -> Path | None:
    """:func:`plot_lines` saved to ``path`` (None when there is nothing to draw)."""
    fig = plot_lines(rounds, columns=columns, by=by, title=title)
    return None if fig is None else save(fig, path)


def curves(
    rounds: pd.DataFrame, *, column: str, path: str | Path, by: Sequence[str] = ()
) -> Path | None:
    """``column`` per round, one line (mean ± 95% CI over runs) per grid point of ``by``."""
    if column not in rounds:
        return None
    title = f"{quantity(column).name} per round"
    return line_panels(rounds, columns=[column], path=path, by=by, title=title)


def accuracy_curves(
    rounds: pd.DataFrame, *, path: str | Path, by: Sequence[str] = ()
) -> Path | None:
    """Test accuracy per round, one line per grid point."""
    return curves(rounds, column="test_accuracy", path=path, by=by)


def participation_curves(
    rounds: pd.DataFrame, *, path: str | Path, by: Sequence[str] = ()
) -> Path | None:
    """Participants / clients per round, one line per grid point."""
    return curves(with_participation(rounds), column="participation", path=path, by=by)


def trajectories(
    rounds: pd.DataFrame,
    *,
    path: str | Path,
    by: Sequence[str] = (),
    columns: Sequence[str] = ("reward", "sum_rho"),
) -> Path | None:
    """Side-by-side trajectories (reward R_t and Σρ by default) of the columns present."""
    return line_panels(rounds, columns=columns, path=path, by=by, title="Market per round")


def epsilon_cdf(clients: pd.DataFrame, *, path: str | Path, by: Sequence[str] = ()) -> Path | None:
    """:func:`plot_epsilon_cdf` saved to ``path`` (None without an ``epsilon_spent`` column)."""
    fig = plot_epsilon_cdf(clients, by=by)
    return None if fig is None else save(fig, path)


def plot_epsilon_cdf(clients: pd.DataFrame, *, by: Sequence[str] = ()) -> Figure | None:
    """Empirical CDF of the clients' ε spent at the end of each run, pooled per grid point."""
    if clients.empty or "epsilon_spent" not in clients:
        return None
    last = clients.groupby("run_id")["round"].transform("max")
    final = clients[clients["round"] == last]
    enc = GridEncoding.of(final, by)
    panels = enc.panels(final)
    fig, axes = new_figure(len(panels))
    for p, ((ax,), (panel_title, frame)) in enumerate(zip(axes, panels)):
        for point, group in enc.lines(frame):
            eps = np.sort(group["epsilon_spent"].to_numpy(float))
            label = f"{enc.label(point)} (n={group['run_id'].nunique()})"
            steps = np.arange(eps.size + 1) / eps.size
            ax.step(np.r_[eps[:1], eps], steps, where="post", label=label, **enc.style(point))
        ax.set_title(panel_title, fontsize="medium")
        xlabel = "ε spent by the end of the run (privacy loss ε)"
        _label_axes(ax, p, len(panels), xlabel=xlabel, ylabel="fraction of clients", wrap=True)
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    counts = runs_per_point(final, enc.keys)
    if not enc.keys and counts.iloc[0] == 1:
        over = f"the run's {len(final)} clients"
    else:
        n = int(counts.iloc[0])
        runs = f"n = {plural(n, 'run')}" if counts.nunique() == 1 else "n runs (per line)"
        over = f"the clients of {runs}" + (" per grid point" if enc.keys else "")
    fig.suptitle(f"Privacy loss spent per client\nempirical CDF over {over}", fontsize="medium")
    _legend(fig, enc)
    return fig
