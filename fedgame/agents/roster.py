"""``ClientRoster``: the model's client agents, created when something first needs them.

A round never touches the agent objects of batched behaviours: the model asks each agent type
through its policy's ``respond_all`` over the table's columns. So creating a million Mesa agents
(about 8 s and 450 MB on the reference machine, most of it Mesa's registration in weak-keyed
sets) is deferred until user code asks for an agent: ``model.clients[i]``, iterating
``model.clients``, ``model.agents``, ``model.agents_by_type``, ``model.network`` or an agent
id in the DataCollector's agent frame. Then every client agent is created at once, in
client-id order, so ``agents_by_type`` always lists every client of a type. A population with a
behaviour that answers agent by agent creates its agents when the model is built.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, overload

import numpy as np

if TYPE_CHECKING:
    from fedgame.agents.client import ClientAgent
    from fedgame.agents.table import ClientTable


class ClientRoster(Sequence["ClientAgent"]):
    """Client agents in client-id order, created together on first use.

    Args:
        model: the Mesa model the agents belong to.
        table: the client table (agent ``i`` is row ``i``; its ``behaviour`` column names the
            agent type).
        types: agent type of each behaviour label.
    """

    def __init__(
        self,
        model: Any,
        table: ClientTable,
        types: Mapping[str, type[ClientAgent]],
    ) -> None:
        self._model = model
        self._table = table
        self._types = dict(types)
        self._agents: list[ClientAgent] | None = None

    @property
    def created(self) -> bool:
        """Whether the agent objects exist yet."""
        return self._agents is not None

    def materialise(self) -> list[ClientAgent]:
        """Create every client agent (once, in client-id order) and return them."""
        if self._agents is None:
            types, model, table = self._types, self._model, self._table
            labels = table.behaviour.tolist()
            self._agents = [
                types[label](model, client_id=cid, table=table) for cid, label in enumerate(labels)
            ]
        return self._agents

    def unique_ids(self) -> np.ndarray:
        """Every client agent's Mesa ``unique_id``, in client-id order (creates the agents)."""
        return np.fromiter((a.unique_id for a in self.materialise()), np.int64, len(self))

    def __len__(self) -> int:
        return len(self._table)

    @overload
    def __getitem__(self, index: int) -> ClientAgent: ...

    @overload
    def __getitem__(self, index: slice) -> list[ClientAgent]: ...

    def __getitem__(self, index: int | slice) -> ClientAgent | list[ClientAgent]:
        return self.materialise()[index]

    def __iter__(self) -> Iterator[ClientAgent]:
        return iter(self.materialise())

    def __repr__(self) -> str:
        state = "created" if self.created else "not created yet"
        return f"ClientRoster({len(self)} client agents, {state})"
