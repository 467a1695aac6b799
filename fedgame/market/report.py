"""``fedgame report`` of a market run: per-server curves and market shares.

One figure (``market.png``): each server's test accuracy, reward offered, market share (Σρ it
won over Σρ delivered to all servers) and, for the market, the Herfindahl index and the
clients' mean ε spent; and a table per server: final accuracy, rewards paid, summed server
cost, mean market share, client deliveries.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fedgame.analysis.figures import save
from fedgame.analysis.markdown import md_table
from fedgame.run.store import atomic_write_text


def server_summary(rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per server: final accuracy, Σ payments, Σ server cost, mean market share and
    client share, deliveries, and the rounds its leader's best responses converged in."""
    last = rounds["round"].max()
    rows = []
    for name, part in rounds.groupby("server", sort=False):
        rows.append(
            {
                "server": name,
                "final_accuracy": float(part.loc[part["round"] == last, "test_accuracy"].iloc[0]),
                "payments_total": float(part.get("payments_total", pd.Series(0.0)).sum()),
                "server_cost_sum": float(part.get("server_cost", pd.Series(np.nan)).sum()),
                "market_share_mean": float(part["market_share"].mean()),
                "client_share_mean": float(part["client_share"].mean()),
                "deliveries": int(part["uploaded"].sum()),
            }
        )
    return pd.DataFrame(rows)


def market_figure(rounds: pd.DataFrame, path: Path) -> Path:
    """Four panels: accuracy, reward, market share per server; HHI and mean ε spent."""
    fig = Figure(figsize=(11.0, 7.6), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 2).reshape(-1, 1)
    panels = [
        ("test_accuracy", "test accuracy"),
        ("reward", "reward offered R"),
        ("market_share", "market share (Σρ won)"),
    ]
    for ax, (column, label) in zip(axes[:3, 0], panels):
        for name, part in rounds.groupby("server", sort=False):
            ax.plot(part["round"], part[column], marker=".", label=str(name))
        ax.set_title(label)
        ax.set_xlabel("round")
    axes[0, 0].set_ylim(0, 1)
    axes[2, 0].set_ylim(0, 1.05)
    axes[0, 0].legend(title="server", fontsize="small")
    ax = axes[3, 0]
    per_round = rounds.groupby("round").first()
    ax.plot(per_round.index, per_round["hhi"], color="black", marker=".", label="HHI")
    ax.set_ylim(0, 1.05)
    ax.set_title("Herfindahl index; mean ε spent / max")
    twin = per_round["epsilon_spent_mean"] / max(float(per_round["epsilon_spent_max"].max()), 1e-12)
    ax.plot(per_round.index, twin, color="tab:red", linestyle="--", label="mean ε spent / max")
    ax.legend(fontsize="small")
    ax.set_xlabel("round")
    return save(fig, path)


def market_report(run: Any, out: Path) -> Path:
    """``report.md`` and ``market.png`` of a market run folder (``load_run``'s result)."""
    m = run.manifest
    rounds = run.rounds
    lines = [
        f"# Market report: {m.get('scenario')} / {run.path.name}",
        "",
        f"Folder: `{run.path}`",
        "",
        f"Status: {run.status}; {m.get('rounds_completed')} rounds; seed {m.get('seed')}; "
        f"replicate {m.get('replicate')}; servers: {', '.join(rounds['server'].unique())}.",
        "",
        "## Servers",
        "",
        md_table(server_summary(rounds)),
        "",
    ]
    if "leaders_converged" in rounds:
        share = float(rounds.groupby("round")["leaders_converged"].first().mean())
        lines += [f"Leaders' best responses converged in {share:.0%} of the rounds.", ""]
    market_figure(rounds, out / "market.png")
    lines += ["## Figures", "", "![Per-server curves and market shares](market.png)", ""]
    atomic_write_text(out / "report.md", "\n".join(lines))
    return out / "report.md"
