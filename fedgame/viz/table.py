"""The current round's clients as a table: the selected first, then by client id; numbers to 4
significant digits, floating-point noise (below 1e-12 of the column's scale) shown as 0 as the
reports do (:func:`fedgame.viz.data.denoised`). Each client's row is also offered as a
short HTML card (:func:`client_rows`), the network view's tooltip."""

from __future__ import annotations

import html
import math

import pandas as pd

from fedgame.viz.data import client_states, denoised

#: columns shown first (plug-in columns such as ``rho`` or ``payment`` follow when present)
LEADING = (
    "client_id",
    "behaviour",
    "state",
    "decline_reason",
    "epsilon_spent",
    "epsilon_total",
    "epsilon_charged",
    "noise_std",
    "train_loss",
    "reward",
    "utility",
    "privacy_value",
    "dataset_size",
    "emd",
    "straggle_prob",
    "colluder",
)
#: columns the ``state`` column already says
FOLDED = ("round", "participating", "selected", "straggled", "uploaded", "link_up")


def round_table(clients: pd.DataFrame) -> pd.DataFrame:
    """One row per client of the round: its state, budget, noise, payoff and plug-in columns."""
    if clients.empty:
        return pd.DataFrame(columns=list(LEADING))
    frame = clients.assign(state=client_states(clients))
    order = frame.sort_values(["selected", "client_id"], ascending=[False, True])
    rest = [c for c in order.columns if c not in LEADING and c not in FOLDED]
    return four_digits(order[[c for c in LEADING if c in order] + rest])


def four_digits(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` re-indexed from 0, its float columns to 4 significant digits (noise as 0)."""
    shown = frame.reset_index(drop=True)
    for c in shown.columns:
        if shown[c].dtype.kind == "f":
            shown[c] = [float(f"{v:.4g}") for v in denoised(shown[c].to_numpy(float))]
    return shown


def _cell(value: object) -> str:
    """A float to 4 significant digits (NaN as a dash), anything else as ``str``."""
    if isinstance(value, float):
        return "–" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def client_rows(table: pd.DataFrame) -> dict[int, str]:
    """Each client's row of ``table`` (a :func:`round_table`) as an HTML card: ``client 7`` in
    bold, then one ``name: value`` line per column (braces, which ECharts' templates read,
    become parentheses)."""
    out: dict[int, str] = {}
    columns = [c for c in table.columns if c != "client_id"]
    for record in table.to_dict("records"):
        lines = [f"<b>client {record['client_id']}</b>"] + [
            f"{html.escape(c)}: {html.escape(_cell(record[c]))}" for c in columns
        ]
        text = "<br/>".join(lines).replace("{", "(").replace("}", ")")
        out[int(record["client_id"])] = text
    return out
