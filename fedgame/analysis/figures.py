"""Figures as PNG files (matplotlib's object API with the Agg canvas; no pyplot state).

Each function takes tidy frames (a sweep's or a run's, with ``run_id``), draws one figure,
saves it to ``path`` and returns the path, or None when the frame lacks the columns it needs.
Bands are 95% t-intervals over the runs in a group (replicates).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fedgame.analysis.equilibrium import with_participation
from fedgame.analysis.summary import t_interval


def _figure(ncols: int = 1, *, width: float = 6.0, height: float = 4.0) -> tuple[Figure, list]:
    fig = Figure(figsize=(width * ncols, height), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path


def _label(by: Sequence[str], key: object) -> str:
    key = key if isinstance(key, tuple) else (key,)
    return ", ".join(f"{k.split('.')[-1]}={v}" for k, v in zip(by, key))


def _groups(frame: pd.DataFrame, by: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    if not by:
        return [("all runs", frame)]
    return [(_label(by, k), g) for k, g in frame.groupby(list(by), sort=True)]


def _band(ax: object, frame: pd.DataFrame, column: str, *, label: str) -> None:
    """Mean over runs per round with a 95% t-interval band."""
    stats = [(r, *t_interval(g[column].astype(float).tolist())) for r, g in frame.groupby("round")]
    r, mean, lo, hi = (np.asarray(v, float) for v in zip(*stats))
    (line,) = ax.plot(r, mean, label=label)  # type: ignore[attr-defined]
    if np.isfinite(lo).any():
        ax.fill_between(r, lo, hi, alpha=0.2, color=line.get_color())  # type: ignore[attr-defined]


def curves(
    rounds: pd.DataFrame,
    *,
    column: str,
    path: str | Path,
    by: Sequence[str] = (),
    ylabel: str | None = None,
) -> Path | None:
    """One line (mean ± 95% CI over runs) per group of ``by``, ``column`` against round."""
    if column not in rounds or rounds[column].isna().all():
        return None
    fig, (ax,) = _figure()
    for label, group in _groups(rounds, by):
        _band(ax, group, column, label=label)
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel or column)
    if by:
        ax.legend(fontsize="small")
    return _save(fig, path)


def accuracy_curves(
    rounds: pd.DataFrame, *, path: str | Path, by: Sequence[str] = ()
) -> Path | None:
    """Test accuracy per round, one band per mechanism (or other grid key)."""
    return curves(rounds, column="test_accuracy", path=path, by=by, ylabel="test accuracy")


def participation_curves(
    rounds: pd.DataFrame, *, path: str | Path, by: Sequence[str] = ()
) -> Path | None:
    """Participants / clients per round."""
    frame = with_participation(rounds)
    return curves(frame, column="participation", path=path, by=by, ylabel="participation rate")


def trajectories(
    rounds: pd.DataFrame,
    *,
    path: str | Path,
    by: Sequence[str] = (),
    columns: Sequence[str] = ("reward", "sum_rho"),
) -> Path | None:
    """Side-by-side trajectories (reward R_t and Σρ by default) of the columns present."""
    present = [c for c in columns if c in rounds and rounds[c].notna().any()]
    if not present:
        return None
    fig, axes = _figure(len(present))
    for ax, col in zip(axes, present):
        for label, group in _groups(rounds, by):
            _band(ax, group, col, label=label)
        ax.set_xlabel("round")
        ax.set_ylabel(col)
    if by:
        axes[0].legend(fontsize="small")
    return _save(fig, path)


def heatmap(table: pd.DataFrame, *, x: str, y: str, value: str, path: str | Path) -> Path | None:
    """``value`` over a 2-D grid (``table``: one row per (x, y), e.g. a summary's means)."""
    if value not in table or table[value].isna().all():
        return None
    grid = table.pivot_table(index=y, columns=x, values=value, aggfunc="mean").sort_index()
    fig, (ax,) = _figure(width=6.5, height=4.5)
    image = ax.imshow(grid.to_numpy(float), origin="lower", aspect="auto", cmap="viridis")
    ax.set_xticks(range(grid.shape[1]), [str(v) for v in grid.columns])
    ax.set_yticks(range(grid.shape[0]), [str(v) for v in grid.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    for (i, j), v in np.ndenumerate(grid.to_numpy(float)):
        ax.text(j, i, f"{v:.3g}", ha="center", va="center", color="white", fontsize="small")
    fig.colorbar(image, ax=ax, label=value)
    return _save(fig, path)


def epsilon_cdf(clients: pd.DataFrame, *, path: str | Path, by: Sequence[str] = ()) -> Path | None:
    """Empirical CDF of the clients' ε spent at the end of each run, per group of ``by``."""
    if clients.empty or "epsilon_spent" not in clients:
        return None
    last = clients.groupby("run_id")["round"].transform("max")
    final = clients[clients["round"] == last]
    fig, (ax,) = _figure()
    for label, group in _groups(final, by):
        eps = np.sort(group["epsilon_spent"].to_numpy(float))
        ax.step(eps, np.arange(1, eps.size + 1) / eps.size, where="post", label=label)
    ax.set_xlabel("ε spent at the end of the run")
    ax.set_ylabel("fraction of clients")
    if by:
        ax.legend(fontsize="small")
    return _save(fig, path)
