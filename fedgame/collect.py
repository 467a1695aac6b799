"""What one round writes: the rounds-table row and the clients table, Mesa's way.

``round_summary`` computes the round's row in one pass over the client columns (phase 10);
plug-ins add columns by declaring ``round_columns``/``client_columns`` (the ``ReportsRounds`` /
``ReportsClients`` capabilities). ``ClientTableCollector`` is a Mesa ``DataCollector``: the
rounds table is its model variables, the clients table its agent variables, recorded as one
block of columns per step instead of one reporter call per agent and attribute.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import mesa
import numpy as np
import pandas as pd

from fedgame.agents.schema import CLIENT_COLUMNS
from fedgame.agents.table import ClientTable
from fedgame.mechanisms.base import ReportsClients, ReportsRounds

if TYPE_CHECKING:
    from fedgame.model import FedGameModel

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
    "degenerate",
    "degenerate_reason",
    "lr",
    "wall_time_s",
)


def declared_columns(components: Iterable[object]) -> tuple[list[str], list[str]]:
    """Extra columns plug-ins declare (``ReportsRounds`` / ``ReportsClients``)."""
    rounds: list[str] = []
    clients: list[str] = []
    for comp in components:
        if isinstance(comp, ReportsRounds):
            rounds += [c for c in comp.round_columns if c not in rounds]
        if isinstance(comp, ReportsClients):
            clients += [c for c in comp.client_columns if c not in clients]
    return rounds, clients


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
        "degenerate": bool(m.monitor.kinds),
        "degenerate_reason": m.monitor.degenerate_reason,
        "lr": m.scenario.training.lr_at(max(m.state.info.round - 1, 0)),
        "wall_time_s": m.round_wall_time,
    }


class AgentRecords(Mapping[int, list[tuple[Any, ...]]]):
    """Mesa's agent-record layout (step -> ``[(step, AgentID, *values), ...]``), built on read.

    ``mesa.batch_run`` reads a collector's agent records in this layout, which
    ``mesa.DataCollector`` documents for its storage; here it is a view over the column blocks,
    materialised only for the steps asked for.
    """

    def __init__(self, collector: ClientTableCollector) -> None:
        self.collector = collector

    def __getitem__(self, step: int) -> list[tuple[Any, ...]]:
        block = self.collector.blocks[step]
        ids = self.collector.agent_ids.tolist()
        columns = [block[name].tolist() for name in self.collector.client_columns]
        return [(step, aid, *row) for aid, *row in zip(ids, *columns)]

    def __iter__(self) -> Iterator[int]:
        return iter(self.collector.blocks)

    def __len__(self) -> int:
        return len(self.collector.blocks)


class ClientTableCollector(mesa.DataCollector):
    """Mesa's DataCollector for a ``FedGameModel``: rounds as model variables, clients as agents.

    ``collect`` is called at step 0 (the model as built) and after every round, as in Mesa, so
    ``get_model_vars_dataframe()`` row *s* is step *s*. ``agent_reporters`` names the clients
    table's columns (``CLIENT_COLUMNS`` then the plug-in columns); each step records them as a
    copy of the table's columns. ``get_agent_vars_dataframe()`` is the clients table indexed by
    (Step, AgentID), ``get_agenttype_vars_dataframe(T)`` its rows of agent type ``T`` (a
    behaviour, or ``ClientAgent`` for all), and ``client_frame()`` the tidy table with a
    ``round`` column.
    """

    def __init__(self, *, round_extra: Iterable[str] = (), table: ClientTable) -> None:
        names = [*ROUND_COLUMNS, *(c for c in round_extra if c not in ROUND_COLUMNS)]
        super().__init__(model_reporters={name: _summary_reporter(name) for name in names})
        self.table = table
        self.client_columns: tuple[str, ...] = (*CLIENT_COLUMNS, *table.extra_columns)
        self.agent_reporters = {name: name for name in self.client_columns}
        self.blocks: dict[int, dict[str, np.ndarray]] = {}
        self.agent_ids = np.zeros(0, dtype=np.int64)
        self._agent_records = AgentRecords(self)

    def collect(self, model: Any) -> None:
        """Record the round's row and a copy of every client column, at ``model.steps``."""
        if not len(self.agent_ids):
            self.agent_ids = np.array([c.unique_id for c in model.clients], dtype=np.int64)
        for name, reporter in self.model_reporters.items():
            self.model_vars[name].append(reporter(model))
        self.blocks[model.steps] = self.table.snapshot(self.client_columns)

    def client_frame(self, *, first_step: int = 1, last_step: int | None = None) -> pd.DataFrame:
        """One row per recorded round (``first_step``..``last_step``) x client: ``round`` then
        the columns."""
        last = max(self.blocks, default=0) if last_step is None else last_step
        steps = [s for s in self.blocks if first_step <= s <= last]
        if not steps:
            return pd.DataFrame(columns=["round", *self.client_columns])
        n = len(self.table)
        data: dict[str, Any] = {"round": np.repeat(np.asarray(steps, dtype=np.int64), n)}
        for name in self.client_columns:
            data[name] = np.concatenate([self.blocks[s][name] for s in steps])
        frame = pd.DataFrame(data)
        for name in ("decline_reason", "behaviour"):
            frame[name] = frame[name].astype(str)
        return frame

    def round_frame(self, *, first_step: int = 1, last_step: int | None = None) -> pd.DataFrame:
        """The rounds table of steps ``first_step``..``last_step``, with a ``round`` column."""
        stop = None if last_step is None else last_step + 1
        frame = pd.DataFrame({k: list(v[first_step:stop]) for k, v in self.model_vars.items()})
        frame.insert(0, "round", np.arange(first_step, first_step + len(frame), dtype=np.int64))
        return frame

    def get_agent_vars_dataframe(self) -> pd.DataFrame:
        """The clients table of every recorded step, indexed by (Step, AgentID)."""
        frame = self.client_frame(first_step=0)
        frame.insert(1, "AgentID", np.tile(self.agent_ids, len(self.blocks)))
        return frame.rename(columns={"round": "Step"}).set_index(["Step", "AgentID"])

    def get_agenttype_vars_dataframe(self, agent_type: type) -> pd.DataFrame:
        """The rows of clients of ``agent_type`` (a subclass of ``ClientAgent``)."""
        from fedgame.agents.client import ClientAgent

        if not issubclass(agent_type, ClientAgent):
            return super().get_agenttype_vars_dataframe(agent_type)
        frame = self.get_agent_vars_dataframe()
        if agent_type is ClientAgent:
            return frame
        return frame[frame["behaviour"] == agent_type.behaviour]


def _summary_reporter(name: str) -> Any:
    """A model reporter reading one column of the model's round summary (NaN when absent)."""

    def report(model: Any) -> Any:
        if name in model.summary:
            return model.summary[name]
        return model.extra.get(name, math.nan)

    report.__name__ = f"report_{name}"
    return report
