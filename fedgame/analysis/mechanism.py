"""The report's mechanism section: each incentive family's own quantities, read from its columns.

Which columns exist decides what is shown; no family is named in the code. Per round
(:data:`ROUND_COLUMNS`, the families' ``round_columns``): posted price ``price`` and
``nu_error``; auctions ``bids``, ``winners``, ``clearing_price``, ``shading``; contract
``menu_items`` and the menu's ρ_k and r_k range; Shapley ``shapley_sum``, ``shapley_evals``.
A run's report lists them per round (every k-th round past :data:`MAX_ROWS` rounds) and draws
:data:`FIGURE_COLUMNS`; a sweep's report gives each grid point's mean over rounds, averaged over
its runs with 95% intervals. From the clients table: the menu item each client took
(``menu_item``: client-rounds per item and the mean payment of the delivered ones) and, per
client, the mean of each estimate of :data:`CLIENT_PAIRS` (a Shapley value φ_i, a bid) against
the mean of its paired payment over the same rounds (run reports). Definitions:
docs/mechanisms.md, docs/mechanisms-auctions.md, docs/mechanisms-contracts.md.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fedgame.analysis import figures
from fedgame.analysis.markdown import md_table, readable_keys, with_ci
from fedgame.analysis.summary import aggregate

#: the families' per-round columns, in table order
ROUND_COLUMNS = (
    "price",
    "nu_error",
    "bids",
    "winners",
    "clearing_price",
    "shading",
    "menu_items",
    "menu_rho_low",
    "menu_rho_high",
    "menu_pay_low",
    "menu_pay_high",
    "shapley_sum",
    "shapley_evals",
)
#: the per-round columns the figure draws (a menu that does not move is left out)
FIGURE_COLUMNS = ("price", "nu_error", "clearing_price", "shading", "winners", "shapley_sum")
#: (estimate, payment) columns of the clients table compared per client
CLIENT_PAIRS = (("shapley", "reward"), ("bid", "unit_price"))
#: the clients table's column naming the menu item a client took (−1 or NaN: none)
ITEM_COLUMN = "menu_item"
#: a run's per-round table shows at most this many rounds (every k-th, and the last)
MAX_ROWS = 30

#: what each column of :data:`ROUND_COLUMNS` measures (the note lists the present ones)
MEANINGS = {
    "price": "the posted price per unit ρ",
    "nu_error": "the mean |log ν̂ − log ν| of the leader's belief",
    "bids": "the bids received",
    "winners": "the units bought",
    "clearing_price": "the winners' mean price per unit",
    "shading": "the mean b_i/κ_i − 1 over the bidders (0: truthful)",
    "menu_items": "the distinct menu items",
    "menu_rho_low": "the smallest ρ_k on the menu",
    "menu_rho_high": "the largest ρ_k",
    "menu_pay_low": "the smallest r_k",
    "menu_pay_high": "the largest r_k",
    "shapley_sum": "Σ_i φ_i over the delivered clients",
    "shapley_evals": "the coalitions the estimator evaluated",
}


def note(columns: Sequence[str]) -> str:
    """The section's note: what each present column measures."""
    parts = "; ".join(f"`{c}` {MEANINGS[c]}" for c in columns)
    return f"The incentive's own columns (docs/mechanisms*.md): {parts}."


def present_columns(frame: pd.DataFrame, columns: Sequence[str]) -> list[str]:
    """The ``columns`` of ``frame`` with at least one recorded (non-NaN) value."""
    return [
        c
        for c in columns
        if c in frame and bool(pd.to_numeric(frame[c], errors="coerce").notna().any())
    ]


def _sample_rounds(rounds: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Every k-th round (and the last) so that at most about :data:`MAX_ROWS` remain."""
    step = max(1, math.ceil(len(rounds) / MAX_ROWS))
    if step == 1:
        return rounds, 1
    keep = list(range(0, len(rounds), step))
    if keep[-1] != len(rounds) - 1:
        keep.append(len(rounds) - 1)
    return rounds.iloc[keep], step


def items_table(clients: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Per grid point and menu item k: ``took`` (client-rounds that chose k), ``delivered``
    (those whose update arrived) and ``mean_paid`` (their mean payment r_k); empty without a
    ``menu_item`` column."""
    if ITEM_COLUMN not in clients or "reward" not in clients:
        return pd.DataFrame()
    taken = clients[pd.to_numeric(clients[ITEM_COLUMN], errors="coerce") >= 0]
    if taken.empty:
        return pd.DataFrame()
    taken = taken.assign(
        item=taken[ITEM_COLUMN].astype(int),
        delivered=taken["uploaded"].astype(bool) if "uploaded" in taken else True,
    )
    rows = []
    for key, group in taken.groupby([*by, "item"], sort=True, dropna=False):
        key = key if isinstance(key, tuple) else (key,)
        paid = group.loc[group["delivered"], "reward"]
        rows.append(
            {
                **dict(zip([*by, "item"], key)),
                "took": len(group),
                "delivered": int(group["delivered"].sum()),
                "mean_paid": float(paid.mean()) if len(paid) else math.nan,
            }
        )
    return pd.DataFrame(rows)


def client_table(clients: pd.DataFrame) -> pd.DataFrame:
    """Per client: for each pair of :data:`CLIENT_PAIRS` present, the rounds with an estimate
    (``<estimate>_rounds``), the estimate's mean and the paired payment's mean over those
    rounds; empty when no pair is present."""
    pairs = [(e, p) for e, p in CLIENT_PAIRS if p in clients and present_columns(clients, [e])]
    if not pairs:
        return pd.DataFrame()
    out = pd.DataFrame({"client_id": sorted(clients["client_id"].unique())})
    for estimate, payment in pairs:
        valued = clients[clients[estimate].notna()]
        stats = valued.groupby("client_id").agg(
            **{
                f"{estimate}_rounds": (estimate, "size"),
                f"mean_{estimate}": (estimate, "mean"),
                f"mean_{payment}": (payment, "mean"),
            }
        )
        out = out.merge(stats.reset_index(), on="client_id", how="left")
    return out


def _scatter(table: pd.DataFrame, path: Path) -> Path | None:
    """Each client's mean estimate against its mean payment, one panel per pair."""
    pairs = [(e, p) for e, p in CLIENT_PAIRS if f"mean_{e}" in table]
    if not pairs:
        return None
    fig, axes = figures.new_figure(len(pairs))
    for ax, (estimate, payment) in zip(axes.flat, pairs):
        x, y = table[f"mean_{estimate}"], table[f"mean_{payment}"]
        ax.scatter(x, y, s=22)
        for cid, xi, yi in zip(table["client_id"], x, y):
            if math.isfinite(xi) and math.isfinite(yi):
                ax.annotate(str(cid), (xi, yi), fontsize="x-small", alpha=0.6)
        ax.set_xlabel(f"mean {estimate} (rounds it was set)")
        ax.set_ylabel(f"mean {payment} (same rounds)")
        ax.set_title(f"Per client: {estimate} against {payment}", fontsize="medium")
        ax.grid(alpha=0.3)
    return figures.save(fig, path)


def mechanism_section(
    rounds: pd.DataFrame, clients: pd.DataFrame, out: Path, *, by: Sequence[str] = ()
) -> list[str]:
    """Markdown lines of the section and its figures (``mechanism.png`` and, for a run,
    ``mechanism_clients.png`` in ``out``); nothing when no family column has a value."""
    cols = present_columns(rounds, ROUND_COLUMNS)
    items = items_table(clients, by)
    if not cols and items.empty:
        return []
    lines = ["## Mechanism", "", note(cols), ""] if cols else ["## Mechanism", ""]
    if cols and by:
        per_run = rounds.groupby("run_id")[cols].mean().reset_index()
        ids = rounds[[*by, "run_id"]].drop_duplicates("run_id")
        table = aggregate(ids.merge(per_run, on="run_id"), by=list(by))
        lines += ["Mean over each run's rounds, per grid point (95% interval over runs):", ""]
        lines += [md_table(with_ci(table, list(by), cols)), ""]
    elif cols:
        shown, step = _sample_rounds(rounds.sort_values("round"))
        every = f" (every {step}th round and the last)" if step > 1 else ""
        lines += [f"Per round{every}:", "", md_table(shown[["round", *cols]]), ""]
    if not items.empty:
        text = (
            "Menu items taken (`menu_item` in the clients table; item 0 has the largest ρ): "
            "client-rounds that chose each, those delivered, and their mean payment r_k."
        )
        lines += ["### Menu", "", text, "", md_table(readable_keys(items, list(by))), ""]
    drawn = [c for c in FIGURE_COLUMNS if c in cols]
    path = figures.line_panels(
        rounds, columns=drawn, path=out / "mechanism.png", by=by, title="Mechanism per round"
    ) if drawn else None  # fmt: skip
    if path is not None:
        rel = path.relative_to(out).as_posix()
        lines += [f"### Mechanism per round\n\n![Mechanism per round]({rel})\n"]
    if not by:
        per_client = client_table(clients)
        if not per_client.empty:
            text = (
                "Per client: the mean of its estimate over the rounds it was set (a Shapley "
                "value φ_i, a bid per unit) and the mean of what it was paid in those rounds "
                "(`reward`, or `unit_price` per unit for a bid)."
            )
            lines += ["### Per client", "", text, "", md_table(per_client), ""]
            scatter = _scatter(per_client, out / "mechanism_clients.png")
            if scatter is not None:
                rel = scatter.relative_to(out).as_posix()
                lines += [f"![Per client]({rel})", ""]
    return lines
