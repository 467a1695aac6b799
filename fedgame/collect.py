"""What one round writes: the rounds-table row and the clients table, Mesa's way.

``round_summary`` computes the round's row in one pass over the client columns (phase 10);
plug-ins add columns by declaring ``round_columns``/``client_columns`` (the
``DeclaresRoundColumns`` / ``ReportsClients`` capabilities): a phase returns its round metrics
with its result (``(result, metrics)``, written by the model as the phase ends), a
``ReportsRounds`` plug-in gives them when the round is over, and a privacy mechanism's
``ReportsRelease`` computes them from the round's plan. ``ClientTableCollector`` is a Mesa
``DataCollector``: the rounds table is its model variables, the clients table its agent
variables, recorded as one block of columns per step instead of one reporter call per agent
and attribute.

How much of the clients table is kept is ``output.clients``
(:func:`fedgame.scenario.output.clients_table_mode`): ``all`` (one row per client per round),
``active`` (per round, only the clients the round touched: selected, charged, paid or
reported on by a plug-in's ``{id: value}`` mapping; a column a plug-in gives for every client
as :class:`fedgame.views.ClientValues` is written without making its clients active) or
``none``; the rounds table, the per-round summary, is always
kept. ``auto`` (the default) is ``all`` while ``population.clients x rounds`` is at most
:data:`fedgame.scenario.output.AUTO_ALL_ROWS`, else ``active``.
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
from fedgame.columns import cast_columns
from fedgame.mechanisms.base import (
    DeclaresClientColumns,
    DeclaresRoundColumns,
    ReportsClients,
    ReportsDraw,
    ReportsRounds,
)
from fedgame.privacy.base import ReportsRelease

if TYPE_CHECKING:
    from fedgame.model import FedGameModel
    from fedgame.round_state import RoundState

#: what ``output.clients`` may say the clients table records (``auto`` picks one)
CLIENT_MODES = ("all", "active", "none")

ROUND_COLUMNS = (
    "test_accuracy",
    "test_loss",
    "train_loss",
    "willing",
    "participants",
    "trained",
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
    """Extra columns plug-ins declare (``DeclaresRoundColumns`` / ``ReportsClients`` /
    ``ReportsRelease``)."""
    rounds: list[str] = []
    clients: list[str] = []
    for comp in components:
        if isinstance(comp, DeclaresRoundColumns):
            rounds += [c for c in comp.round_columns if c not in rounds]
        if isinstance(comp, DeclaresClientColumns):
            clients += [c for c in comp.client_columns if c not in clients]
    return rounds, clients


Reporters = list[
    tuple[ReportsRounds | None, ReportsClients | None, ReportsRelease | None, ReportsDraw | None]
]


def reporting_components(components: Iterable[object]) -> list[object]:
    """The components that declare columns (``DeclaresRoundColumns``,
    ``DeclaresClientColumns`` or ``ReportsRelease``)."""
    kinds = DeclaresRoundColumns | DeclaresClientColumns | ReportsRelease
    return [c for c in components if isinstance(c, kinds)]


def reporters_of(components: Iterable[object]) -> Reporters:
    """Each component's declared reporting capabilities, checked once (not each round)."""
    return [
        (
            c if isinstance(c, ReportsRounds) else None,
            c if isinstance(c, ReportsClients) else None,
            c if isinstance(c, ReportsRelease) else None,
            c if isinstance(c, ReportsDraw) else None,
        )
        for c in components
    ]


def gather_metrics(reporters: Reporters, table: ClientTable, state: RoundState) -> None:
    """Write the plug-ins' declared metrics of the round: round metrics into the round's
    ``extra``, client metrics into the table's extra columns (the clients they name are
    touched); a ``ReportsRelease`` mechanism's, from the round's privacy plan (none without
    one); a ``ReportsDraw`` fault model's, from the round's fault draw."""
    extra, plan, faults = state.extra, state.privacy, state.faults
    for round_reporter, client_reporter, release_reporter, draw_reporter in reporters:
        if round_reporter is not None:
            extra.update(round_reporter.round_metrics())
        per_client: dict[str, Any] = {}
        if client_reporter is not None:
            per_client.update(client_reporter.client_metrics())
        if release_reporter is not None and plan is not None:
            rounds, clients = release_reporter.release_metrics(plan)
            extra.update(rounds)
            per_client.update(clients)
        if draw_reporter is not None and faults is not None:
            per_client.update(draw_reporter.draw_metrics(faults))
        table.write_metrics(per_client)


def round_summary(m: FedGameModel) -> dict[str, Any]:
    """The round's row, computed from the client table's columns (meanings, units and dtypes:
    :mod:`fedgame.columns`).

    ``willing`` counts the clients that answered yes, ``trained`` those the server chose and
    the budget admitted (``selected`` is the same count, the sum of the clients table's
    ``selected``); ``participants`` is the old name of ``willing``, kept for one release.
    """
    t = m.table
    eps = t.epsilon_spent
    selected = m.state.selected
    losses = t.train_loss[selected]
    losses = losses[np.isfinite(losses)]
    willing = int(t.participating.sum())
    return {
        "test_accuracy": m.test_accuracy,
        "test_loss": m.test_loss,
        "train_loss": float(losses.sum()) / losses.size if losses.size else math.nan,
        "willing": willing,
        "participants": willing,  # the old name of ``willing``, kept for one release
        "trained": len(selected),
        "selected": len(selected),
        "uploaded": int(m.state.uploaded.sum()),
        "stragglers": int(t.straggled[selected].sum()),
        "failed_links": int((~t.link_up).sum()),  # client-server links (edges: failed_edges)
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
        if not block:
            return []
        ids = self.collector.agent_ids[block["client_id"]].tolist()
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
    copy of the table's columns: every client's (``clients="all"``), the rows the round
    touched (``"active"``) or none (``"none"``). ``get_agent_vars_dataframe()`` is the
    clients table indexed by (Step, AgentID), ``get_agenttype_vars_dataframe(T)`` its rows of
    agent type ``T`` (a behaviour, or ``ClientAgent`` for all), and ``client_frame()`` the
    tidy table with a ``round`` column.
    """

    def __init__(
        self, *, round_extra: Iterable[str] = (), table: ClientTable, clients: str = "all"
    ) -> None:
        names = [*ROUND_COLUMNS, *(c for c in round_extra if c not in ROUND_COLUMNS)]
        super().__init__(model_reporters={name: _summary_reporter(name) for name in names})
        self._round_names = frozenset(names)
        if clients not in CLIENT_MODES:
            raise ValueError(f"clients must be one of {', '.join(CLIENT_MODES)}, not {clients!r}")
        self.table = table
        self.clients = clients
        self.client_columns: tuple[str, ...] = (*CLIENT_COLUMNS, *table.extra_columns)
        self.agent_reporters = {name: name for name in self.client_columns}
        self.blocks: dict[int, dict[str, np.ndarray]] = {}
        self._roster: Any = None
        self._agent_ids: np.ndarray | None = None
        self._agent_records = AgentRecords(self)

    @property
    def agent_ids(self) -> np.ndarray:
        """Mesa ``unique_id`` of each client, by client id (creates the agents on first use)."""
        if self._agent_ids is None:
            if self._roster is None:
                return np.zeros(0, dtype=np.int64)
            self._agent_ids = np.asarray(self._roster.unique_ids(), dtype=np.int64)
        return self._agent_ids

    def collect(self, model: Any) -> None:
        """Record the round's row and a copy of the client columns, at ``model.steps``.

        ``RuntimeError`` when a plug-in returned a round metric that no plug-in declares (it
        would be lost: a column exists only when declared in ``round_columns``)."""
        if self._roster is None:
            self._roster = model.clients
        undeclared = model.extra.keys() - self._round_names
        if undeclared:
            raise RuntimeError(
                f"round {model.steps}: plug-in metrics {sorted(undeclared)} are declared by no "
                "plug-in; add them to the round_columns of the plug-in that returns them"
            )
        for name, reporter in self.model_reporters.items():
            self.model_vars[name].append(reporter(model))
        if self.clients == "all":
            block = self.table.snapshot(self.client_columns)
        elif self.clients == "active":
            block = self.table.snapshot(self.client_columns, self.table.touched())
        else:
            block = {}
        self.blocks[model.steps] = block

    def client_frame(self, *, first_step: int = 1, last_step: int | None = None) -> pd.DataFrame:
        """One row per recorded round (``first_step``..``last_step``) x client: ``round`` then
        the columns."""
        last = max(self.blocks, default=0) if last_step is None else last_step
        steps = [s for s in self.blocks if first_step <= s <= last and self.blocks[s]]
        if not steps:
            return _empty_client_frame(self.client_columns)
        sizes = [len(self.blocks[s]["client_id"]) for s in steps]
        data: dict[str, Any] = {"round": np.repeat(np.asarray(steps, dtype=np.int64), sizes)}
        for name in self.client_columns:
            data[name] = np.concatenate([self.blocks[s][name] for s in steps])
        frame = pd.DataFrame(data)
        for name in ("decline_reason", "behaviour"):
            frame[name] = frame[name].astype(str)
        return cast_columns(frame, "clients")

    def round_frame(self, *, first_step: int = 1, last_step: int | None = None) -> pd.DataFrame:
        """The rounds table of steps ``first_step``..``last_step``, with a ``round`` column."""
        stop = None if last_step is None else last_step + 1
        frame = pd.DataFrame({k: list(v[first_step:stop]) for k, v in self.model_vars.items()})
        frame.insert(0, "round", np.arange(first_step, first_step + len(frame), dtype=np.int64))
        return cast_columns(frame, "rounds")

    def get_agent_vars_dataframe(self) -> pd.DataFrame:
        """The clients table of every recorded step, indexed by (Step, AgentID)."""
        frame = self.client_frame(first_step=0)
        ids = frame["client_id"].to_numpy(dtype=np.int64)
        frame.insert(1, "AgentID", self.agent_ids[ids] if len(ids) else ids)
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


def _empty_client_frame(columns: Iterable[str]) -> pd.DataFrame:
    """A clients table without rows, with the columns and dtypes a full one has."""
    from fedgame.agents.schema import FIELDS

    dtypes = {f.column: f.dtype for f in FIELDS}
    data: dict[str, Any] = {"round": np.zeros(0, dtype=np.int64)}
    for name in columns:
        dtype = dtypes.get(name, float)
        data[name] = np.zeros(0, dtype=str if dtype is object else dtype)
    frame = pd.DataFrame(data)
    for name in ("decline_reason", "behaviour"):
        if name in frame:
            frame[name] = frame[name].astype(str)
    return frame


def _summary_reporter(name: str) -> Any:
    """A model reporter reading one column of the model's round summary (NaN when absent)."""

    def report(model: Any) -> Any:
        if name in model.summary:
            return model.summary[name]
        return model.extra.get(name, math.nan)

    report.__name__ = f"report_{name}"
    return report
