"""The Market section of a sweep report: per-server results over a sweep of market runs.

A market run (``servers:``, :mod:`fedgame.market`) writes one rounds row per round **and
server** (column ``server``), so a sweep's rounds frame holds every server of every run.
Per run and server (:func:`server_metrics`): the final test accuracy, the mean market share
(Σρ delivered to the server over Σρ delivered to all servers, over the rounds where anything
was delivered), the payments (Σ ``payments_total``), the server cost summed over the rounds
it bought anything (paper 003 Eq. 15 is undefined in a round without an upload, so those
rounds are counted apart: ``rounds_bought``). Per run (:func:`market_metrics`): the clients'
mean and largest ε spent at the end (each client has one ledger for all servers, so ε has
no per-server split; the market share is each server's part of the privacy bought), the mean
Herfindahl index, the share of rounds whose leaders' best responses converged (a round
without trade counts as converged) and the rounds with trade. Both are
summarised per grid point (and server) with :func:`fedgame.analysis.summary.aggregate`:
mean and 95% t-interval over the replicates.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fedgame.analysis import figures
from fedgame.analysis.markdown import column_notes, md_table, with_ci
from fedgame.analysis.summary import aggregate

#: per run and server, in table order
SERVER_METRICS = (
    "final_accuracy",
    "market_share",
    "server_payments",
    "server_cost_bought",
    "rounds_bought",
)
#: per run, in table order
MARKET_METRICS = (
    "final_epsilon_mean",
    "final_epsilon_max",
    "hhi_mean",
    "leaders_converged_share",
    "total_payments",
    "rounds_traded",
)
MARKET_NOTE = (
    "Per server and grid point: mean over the replicates with its 95% Student-t interval in "
    "brackets. `market_share` is the server's mean share of the ρ delivered to all servers "
    "(over the rounds where anything was delivered); `server_cost_bought` sums the leader's "
    "cost (QI-DPFL Eq. 15) over the rounds the server bought anything (`rounds_bought`; the "
    "cost is undefined in a round without an upload). ε has no per-server split: every "
    "client has one ledger for all servers, so the clients' ε spent is in the market table."
)


def is_market(rounds: pd.DataFrame) -> bool:
    """Whether the rounds frame holds market runs (one row per round and server)."""
    return "server" in rounds.columns


def _mean_finite(values: pd.Series) -> float:
    kept = values.dropna()
    return float(kept.mean()) if len(kept) else math.nan


def server_metrics(rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per ``run_id`` and ``server`` (module doc)."""
    rows = []
    for (run_id, server), part in rounds.sort_values("round").groupby(
        ["run_id", "server"], sort=False
    ):
        cost = part["server_cost"].dropna() if "server_cost" in part else pd.Series(dtype=float)
        rows.append(
            {
                "run_id": run_id,
                "server": server,
                "final_accuracy": float(part["test_accuracy"].iloc[-1]),
                "market_share": _mean_finite(part["market_share"]),
                "server_payments": float(part["payments_total"].sum()),
                "server_cost_bought": float(cost.sum()) if len(cost) else math.nan,
                "rounds_bought": float(len(cost)),
            }
        )
    return pd.DataFrame(rows)


def market_metrics(rounds: pd.DataFrame) -> pd.DataFrame:
    """One row per ``run_id``: the market's figures (module doc)."""
    rows = []
    for run_id, run in rounds.sort_values("round").groupby("run_id", sort=False):
        per_round = run.groupby("round", sort=True).first()
        hhi = per_round["hhi"].dropna()
        rows.append(
            {
                "run_id": run_id,
                "final_epsilon_mean": float(per_round["epsilon_spent_mean"].iloc[-1]),
                "final_epsilon_max": float(per_round["epsilon_spent_max"].iloc[-1]),
                "hhi_mean": float(hhi.mean()) if len(hhi) else math.nan,
                "leaders_converged_share": float(
                    per_round["leaders_converged"].astype(float).mean()
                ),
                "total_payments": float(run["payments_total"].sum()),
                "rounds_traded": float(len(hhi)),
            }
        )
    return pd.DataFrame(rows)


def market_summary(rounds: pd.DataFrame, keys: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per grid point and server, and per grid point: mean, interval and runs of each metric
    (``aggregate``'s columns)."""
    ids = rounds[[*keys, "run_id", "replicate"]].drop_duplicates("run_id")
    servers = aggregate(ids.merge(server_metrics(rounds), on="run_id"), by=[*keys, "server"])
    market = aggregate(ids.merge(market_metrics(rounds), on="run_id"), by=list(keys))
    return servers, market


def market_section(rounds: pd.DataFrame, out: Path, *, by: Sequence[str] = ()) -> list[str]:
    """The report's Market section: the per-server and market tables, and the per-server
    accuracy and market-share curves (``market.png``); nothing for one-server runs."""
    if not is_market(rounds) or rounds.empty:
        return []
    keys = list(by)
    servers, market = market_summary(rounds, keys)
    names = ", ".join(map(str, rounds["server"].drop_duplicates()))
    lines = ["## Market: per server", "", f"Servers: {names}.", "", MARKET_NOTE, ""]
    lines += [md_table(with_ci(servers, [*keys, "server"], SERVER_METRICS)), ""]
    lines += [column_notes(SERVER_METRICS) + ".", ""]
    lines += ["### Market per grid point", ""]
    lines += [md_table(with_ci(market, keys, MARKET_METRICS)), ""]
    lines += [column_notes(MARKET_METRICS) + ".", ""]
    made = figures.line_panels(
        rounds,
        columns=["test_accuracy", "market_share"],
        path=out / "market.png",
        by=["server", *keys],
        title="Per server: test accuracy and market share",
    )
    if made is not None:
        rel = made.relative_to(out).as_posix()
        lines += [
            "### Per-server test accuracy and market share",
            "",
            "One colour per server, one row of panels per grid point; lines and bands as in "
            "the figures below (each run drawn where a grid point has fewer than 3).",
            "",
            f"![Per-server test accuracy and market share]({rel})",
            "",
        ]
    return lines
