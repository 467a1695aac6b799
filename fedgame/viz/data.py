"""What the dashboard's views read, from a live model or from a finished run.

Both sources (:class:`fedgame.viz.live.DashboardModel`, :class:`fedgame.viz.replay.ReplayModel`)
are Mesa models offering :class:`DashboardData`; the views never look at anything else.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import networkx as nx
import numpy as np
import pandas as pd

#: a client's state in the current round, in the order the network legend lists them
STATES = (
    "uploaded",
    "straggled",
    "link down",
    "out of budget",
    "willing, not selected",
    "declined",
    "no round yet",
)


@runtime_checkable
class DashboardData(Protocol):
    """The data of a dashboard: rounds so far, the current round's clients, the topology."""

    steps: int
    running: bool
    #: seconds the latest round took to simulate (0 for a replay)
    step_seconds: float

    @property
    def title(self) -> str:
        """A short name (the scenario's)."""
        ...

    @property
    def rounds_planned(self) -> int:
        """How many rounds the run has (or had)."""
        ...

    @property
    def settings(self) -> dict[str, Any]:
        """The scenario as plain data, every default filled in (``scenario.resolved.yaml``)."""
        ...

    @property
    def notice(self) -> str:
        """Something the user should know (a setting that was not applied), or ``""``."""
        ...

    @property
    def graph(self) -> nx.Graph:
        """The client-client topology (nodes are client ids)."""
        ...

    @property
    def positions(self) -> dict[int, np.ndarray]:
        """Where the network view draws each client (:func:`fedgame.viz.network.layout`)."""
        ...

    def history(self) -> pd.DataFrame:
        """The rounds table so far (a ``round`` column, one row per recorded round)."""
        ...

    def current_clients(self) -> pd.DataFrame:
        """The clients table of the latest recorded round (empty before the first round)."""
        ...


def client_states(clients: pd.DataFrame) -> pd.Series:
    """Each client's state this round (one of :data:`STATES`), first match wins:
    uploaded, straggled (selected, update lost), link down, out of budget, willing but not
    selected, declined. Rows of step 0 (no round played) are ``no round yet``."""
    if clients.empty:
        return pd.Series([], dtype=object)
    conditions = [
        (clients["selected"] & clients["uploaded"]).to_numpy(bool),
        (clients["selected"] & clients["straggled"]).to_numpy(bool),
        (~clients["link_up"].astype(bool)).to_numpy(bool),
        (clients["decline_reason"] == "budget").to_numpy(bool),
        clients["participating"].to_numpy(bool),
    ]
    state = np.select(conditions, list(STATES[:5]), default=STATES[5]).astype(object)
    if "round" in clients:
        state[(clients["round"] == 0).to_numpy()] = STATES[6]
    return pd.Series(state, index=clients.index, dtype=object)


def denoised(values: np.ndarray) -> np.ndarray:
    """``values`` with floating-point noise set to 0 by the reports' rule
    (:func:`fedgame.analysis.quantities.is_noise`): ``|v| < 1e-12 · max(1, max |values|)``.

    >>> denoised(np.array([2e-18, 0.3, np.nan])).tolist()[:2]
    [0.0, 0.3]
    """
    out = np.array(values, dtype=float)
    finite = np.abs(out[np.isfinite(out)])
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    out[np.abs(out) < 1e-12 * scale] = 0.0
    return out


def budget_left(clients: pd.DataFrame) -> np.ndarray:
    """The fraction of each client's ε budget not yet spent, in [0, 1]."""
    total = clients["epsilon_total"].to_numpy(float)
    spent = clients["epsilon_spent"].to_numpy(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        left = np.where(np.isfinite(total) & (total > 0), 1.0 - spent / total, 1.0)
    return np.clip(np.nan_to_num(left, nan=1.0), 0.0, 1.0)


def _dist(value: Any) -> str:
    """``U(20, 60)`` for a uniform distribution, the number for a constant, else its name."""
    if not isinstance(value, dict):
        return str(value)
    kind = value.get("dist")
    if kind == "constant":
        return f"{value.get('value'):g}"
    if kind == "uniform":
        return f"U({value.get('low'):g}, {value.get('high'):g})"
    return str(kind)


def settings_line(tree: dict[str, Any]) -> str:
    """The main settings of a resolved scenario in one line (what the knobs set)."""
    pop = tree.get("population", {})
    parts = [f"N = {pop.get('clients')}", f"T = {tree.get('rounds')}"]
    selection = tree.get("selection", {})
    parts.append(f"selection {selection.get('kind')}" + (
        f" (k = {selection['k']})" if "k" in selection else ""
    ))  # fmt: skip
    parts.append(f"straggle {_dist(pop.get('straggle_prob'))}")
    faults = tree.get("network", {}).get("faults", {})
    if "link_failure" in faults:
        parts.append(f"link failure {faults['link_failure']:g}")
    incentive = tree.get("incentive", {})
    gamma = f" (γ = {incentive['gamma']:g})" if "gamma" in incentive else ""
    parts.append(f"incentive {incentive.get('kind')}{gamma}")
    parts.append(f"ε budget {_dist(pop.get('budget', {}).get('epsilon'))}")
    parts.append(f"seed {tree.get('seed')}")
    return " · ".join(parts)
