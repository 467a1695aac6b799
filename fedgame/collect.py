"""What one round writes: the rounds-table row and the plug-ins' extra columns.

``round_summary`` computes the round's row in one pass over the clients (phase 10);
``round_reporters`` exposes it to Mesa's DataCollector; plug-ins add columns by declaring
``round_columns``/``client_columns`` and returning values from ``round_metrics``/
``client_metrics``.
"""

from __future__ import annotations

import math
import types
from collections.abc import Callable, Iterable
from copy import deepcopy
from functools import partial
from typing import TYPE_CHECKING, Any

import mesa
import numpy as np
import pandas as pd

from fedgame.agents.table import CLIENT_COLUMNS, ClientTable

if TYPE_CHECKING:
    from fedgame.model import FedGameModel

_SCALARS = (int, float, bool, str, type(None), np.number, np.bool_)

ROUND_COLUMNS = (
    "test_accuracy",
    "test_loss",
    "train_loss",
    "participants",
    "selected",
    "uploaded",
    "stragglers",
    "failed_links",
    "active_clients",
    "epsilon_spent_min",
    "epsilon_spent_mean",
    "epsilon_spent_max",
    "reward_total",
    "withdrawn_budget",
    "aggregation_failed",
    "lr",
    "wall_time_s",
)


def declared_columns(components: Iterable[object]) -> tuple[list[str], list[str]]:
    """Extra columns plug-ins declare (``round_columns`` / ``client_columns`` attributes)."""
    rounds: list[str] = []
    clients: list[str] = []
    for comp in components:
        rounds += [c for c in getattr(comp, "round_columns", ()) if c not in rounds]
        clients += [c for c in getattr(comp, "client_columns", ()) if c not in clients]
    return rounds, clients


def extra_reporter(column: str) -> Callable[[Any], float]:
    return lambda obj: obj.extra.get(column, math.nan)


def round_summary(m: FedGameModel) -> dict[str, Any]:
    """The round's row, computed from the client table's columns."""
    t = m.table
    eps = t.epsilon_spent
    selected = m.state.selected
    losses = t.train_loss[selected]
    losses = losses[np.isfinite(losses)]
    return {
        "test_accuracy": m.test_accuracy,
        "test_loss": m.test_loss,
        "train_loss": float(losses.sum()) / losses.size if losses.size else math.nan,
        "participants": int(t.participating.sum()),
        "selected": len(selected),
        "uploaded": int(m.state.uploaded.sum()),
        "stragglers": int(t.straggled[selected].sum()),
        "failed_links": m.state.failed_links,
        "active_clients": int((t.epsilon_after_next <= t.epsilon_total * (1 + 1e-9)).sum()),
        "epsilon_spent_min": float(eps.min()),
        "epsilon_spent_mean": float(eps.sum()) / eps.size,
        "epsilon_spent_max": float(eps.max()),
        "reward_total": float(sum(m.payments.values())),
        "withdrawn_budget": m.state.withdrawn_budget,
        "aggregation_failed": m.state.aggregation_failed,
        "lr": m.scenario.training.lr_at(m.state.info.round - 1),
    }


class ClientTableCollector(mesa.DataCollector):
    """Mesa's DataCollector, with the client rows recorded as column blocks of the table.

    Model reporters (the rounds table) work as in Mesa. Client agents are recorded by copying
    each column of the ``ClientTable`` once per round (``CLIENT_COLUMNS`` then the plug-in
    columns) instead of calling reporters per agent; ``get_agenttype_vars_dataframe(
    ClientAgent)`` returns the usual ``(Step, AgentID)``-indexed frame and ``client_frame()``
    the tidy table with a ``round`` column.
    """

    def __init__(self, *, model_reporters: dict[str, Any], table: ClientTable) -> None:
        super().__init__(model_reporters=model_reporters)
        self.table = table
        self.client_columns = (*CLIENT_COLUMNS, *table.extra_columns)
        self._client_blocks: dict[int, dict[str, np.ndarray]] = {}
        self._agent_ids: np.ndarray | None = None

    def collect(self, model: Any) -> None:
        if not getattr(self, "_validated", False):  # Mesa validates reporters on first use
            super().collect(model)
        else:
            self._collect_model_vars(model)
        if self._agent_ids is None:
            self._agent_ids = np.array([c.unique_id for c in model.clients], dtype=np.int64)
        self._client_blocks[model.steps] = self.table.snapshot(self.client_columns)

    def _collect_model_vars(self, model: Any) -> None:
        """Mesa's model-reporter step; scalars are stored as they are (Mesa deep-copies
        every value, which only matters for mutable ones)."""
        for var, reporter in self.model_reporters.items():
            if isinstance(reporter, str):
                value = getattr(model, reporter, None)
            elif isinstance(reporter, list):
                value = reporter[0](*reporter[1])
            elif isinstance(reporter, types.LambdaType | partial):
                value = reporter(model)
            else:
                value = reporter()
            if not isinstance(value, _SCALARS):
                value = deepcopy(value)
            self.model_vars[var].append(value)

    def client_frame(self) -> pd.DataFrame:
        """One row per recorded round x client: ``round`` then the client columns."""
        steps = list(self._client_blocks)
        if not steps:
            return pd.DataFrame(columns=["round", *self.client_columns])
        n = len(self.table)
        data: dict[str, Any] = {"round": np.repeat(np.asarray(steps, dtype=np.int64), n)}
        for name in self.client_columns:
            data[name] = np.concatenate([self._client_blocks[s][name] for s in steps])
        frame = pd.DataFrame(data)
        frame["decline_reason"] = frame["decline_reason"].astype(str)
        return frame

    def get_agenttype_vars_dataframe(self, agent_type: type) -> pd.DataFrame:
        from fedgame.agents.client import ClientAgent

        if not issubclass(agent_type, ClientAgent):
            return super().get_agenttype_vars_dataframe(agent_type)
        frame = self.client_frame()
        ids = self._agent_ids if self._agent_ids is not None else np.zeros(0, np.int64)
        frame.insert(1, "AgentID", np.tile(ids, len(self._client_blocks)))
        return frame.rename(columns={"round": "Step"}).set_index(["Step", "AgentID"])


def round_reporters() -> dict:
    """DataCollector model reporters: the round summary's columns, then the wall time."""
    reporters: dict[str, Any] = {
        name: (lambda m, name=name: m.summary[name]) for name in ROUND_COLUMNS[:-1]
    }
    reporters["wall_time_s"] = "round_wall_time"
    return reporters
