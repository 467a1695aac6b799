"""The current round's clients as a table: the selected first, then by client id; numbers to 4
significant digits."""

from __future__ import annotations

import pandas as pd

from fedgame.viz.data import client_states

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
    shown = order[[c for c in LEADING if c in order] + rest].reset_index(drop=True)
    floats = shown.select_dtypes("float").columns
    shown[floats] = shown[floats].map(lambda v: float(f"{v:.4g}"))
    return shown
