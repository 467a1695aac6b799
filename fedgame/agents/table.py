"""``ClientTable``: every client's state as one numpy column per field (struct of arrays).

The columns are the fields of :mod:`fedgame.agents.schema`. The Mesa ``ClientAgent`` objects
read and write their row through attributes derived from the same list, so user code reads
naturally (``agent.epsilon_spent``) while the model's phases update whole columns at once
(``table.selected[ids] = True``): the per-round cost of the agent layer does not grow with a
Python loop over the population. Views for plug-ins are built from the row when asked for
(no cache to keep in step with the columns); hot paths read columns (``ClientViews.column``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from fedgame.agents.schema import (
    CLIENT_COLUMNS,
    COLUMN_OF,
    FIELDS,
    ROUND_DEFAULTS,
    STATIC_COLUMNS,
    VIEW_FIELDS,
    ClientView,
)
from fedgame.views import ClientValues, ClientViews, Response, Responses, can_afford

__all__ = [
    "CLIENT_COLUMNS",
    "DENSE_ROUND_COLUMNS",
    "ROUND_DEFAULTS",
    "STATIC_COLUMNS",
    "ClientTable",
]

#: scalar converters of the view fields, in ``VIEW_FIELDS`` order
_VIEW_TYPES = {f.name: f.dtype for f in FIELDS if f.view}
#: per-round columns a round writes for (nearly) every client: the faults' draw and the
#: followers' answers; they start each round from their defaults everywhere. The other
#: per-round columns are written only for the round's touched clients (``touch``) and are
#: reset only there, so a round costs no pass over the population for them.
DENSE_ROUND_COLUMNS = (
    "link_up",
    "straggled",
    "participating",
    "decline_reason",
    "response_epsilon",
    "response_rho",
    "response_bid",
)
_SPARSE_ROUND = {k: v for k, v in ROUND_DEFAULTS.items() if k not in DENSE_ROUND_COLUMNS}


class ClientTable:
    """Struct-of-arrays state of ``n`` clients.

    Args:
        population: one array per static column (``STATIC_COLUMNS``, ``label_counts``
            ``[n, classes]``), e.g. a ``Mapping`` or an object with those attributes.
        extra_columns: plug-in client columns (float, NaN when a plug-in reports nothing).
    """

    def __init__(self, population: Any, *, extra_columns: Sequence[str] = ()) -> None:
        get = (
            population.__getitem__
            if isinstance(population, Mapping)
            else population.__getattribute__
        )
        n = len(get("dataset_size"))
        self.size = n
        self.columns: dict[str, np.ndarray] = {"client_id": np.arange(n, dtype=np.int64)}
        for spec in FIELDS:
            if spec.name in ("client_id", "label_counts"):
                continue
            if spec.role == "static":
                value = np.array(get(spec.column), dtype=spec.dtype).reshape(n)
            else:
                dtype = spec.dtype if spec.dtype is not object else object
                value = np.full(n, spec.default, dtype=dtype)
            self.columns[spec.column] = value
        self.label_counts = np.asarray(get("label_counts"), dtype=np.int64).reshape(n, -1)
        self.extra_columns = tuple(extra_columns)
        self.extra = {name: np.full(n, math.nan) for name in self.extra_columns}
        self._static_copies: dict[str, np.ndarray] = {}
        self._touched: list[np.ndarray] = []  # rows this round wrote in the sparse columns
        #: the budget state: bumped whenever ε spent, ε total or δ may have changed
        self.budget_version = 0
        #: the static state: bumped whenever a static column (ε total, δ, ...) may have changed
        self.static_version = 0
        #: name -> {state version: array}, the last two states (``budget_derived``)
        self._budget_cache: dict[str, dict[int, np.ndarray]] = {}
        #: budget state -> the rows whose budget changed from the state before (releases)
        self._budget_rows: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self.size

    def __getattr__(self, name: str) -> np.ndarray:
        """Columns read as attributes: ``table.epsilon_spent`` is the live column."""
        columns = self.__dict__.get("columns")
        if columns is not None and name in columns:
            return columns[name]
        raise AttributeError(f"ClientTable has no column {name!r}")

    # ------------------------------------------------------------------ rounds
    def reset_round(self) -> None:
        """Give every per-round column (and the plug-in columns) its starting value.

        Dense columns are filled; sparse ones (and the plug-in columns) are reset at the rows
        the last round touched, the only rows where they can differ from their defaults.
        """
        for name in DENSE_ROUND_COLUMNS:
            self.columns[name].fill(ROUND_DEFAULTS[name])
        rows = self.touched()
        if rows.size:
            for name, value in _SPARSE_ROUND.items():
                self.columns[name][rows] = value
            for column in self.extra.values():
                column[rows] = math.nan
        self._touched = []

    def touch(self, ids: np.ndarray | Sequence[int]) -> None:
        """Note that this round writes sparse per-round or plug-in columns of ``ids``."""
        self._touched.append(np.asarray(ids, dtype=np.int64).reshape(-1))

    def write_metrics(self, per_client: Mapping[str, Any]) -> None:
        """Write plug-in client columns: a ``ClientValues`` column (every client's value) as
        is; a ``{id: value}`` mapping makes its clients active this round (touched)."""
        undeclared = per_client.keys() - self.extra.keys()
        if undeclared:
            raise RuntimeError(
                f"plug-in client metrics {sorted(undeclared)} are declared by no plug-in; add "
                "them to the client_columns of the plug-in that returns them"
            )
        for name, values in per_client.items():
            if isinstance(values, ClientValues):
                self.extra[name][values.ids] = values.array
            elif values:
                ids = np.fromiter(values.keys(), np.int64, len(values))
                self.touch(ids)
                self.extra[name][ids] = np.fromiter(values.values(), float, len(values))

    def touched(self) -> np.ndarray:
        """The sorted distinct rows touched this round (the round's active clients)."""
        if not self._touched:
            return np.zeros(0, dtype=np.int64)
        parts = self._touched
        rows = np.sort(np.concatenate(parts) if len(parts) > 1 else parts[0])
        if len(rows) > 1:  # drop repeats (sort + compare: cheaper than np.unique's hashing)
            distinct = np.empty(len(rows), dtype=bool)
            distinct[0] = True
            np.not_equal(rows[1:], rows[:-1], out=distinct[1:])
            rows = rows[distinct]
        self._touched = [rows]
        return rows

    def column(self, name: str) -> np.ndarray:
        """The live column of field or column ``name`` (a plug-in column when it is one)."""
        if name in self.extra:
            return self.extra[name]
        if name == "label_counts":
            return self.label_counts
        return self.columns[COLUMN_OF.get(name, name)]

    def snapshot(
        self, columns: Iterable[str], rows: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Copies of ``columns`` (one clients-table block for the round), of every client or
        of ``rows`` only.

        Static columns of every client are copied once and the copy shared by later blocks
        until ``static_changed`` is called (agent attribute setters call it).
        """
        if rows is not None:
            return {name: self.column(name)[rows] for name in columns}
        block = {}
        for name in columns:
            if name in STATIC_COLUMNS or name == "client_id":
                copy = self._static_copies.get(name)
                if copy is None:
                    copy = self._static_copies[name] = self.column(name).copy()
                block[name] = copy
            else:
                block[name] = self.column(name).copy()
        return block

    def static_changed(self) -> None:
        """A static attribute was overwritten: the next snapshot copies them afresh (and a
        budget, ε total or δ, may have changed: a new budget state)."""
        self._static_copies = {}
        self.budget_version += 1
        self.static_version += 1

    # ------------------------------------------------------------------ views
    def view(self, client_id: int) -> ClientView:
        """The frozen view of one client, built from its row."""
        i = int(client_id)
        values: dict[str, Any] = {}
        for name in VIEW_FIELDS:
            if name == "label_counts":
                values[name] = tuple(self.label_counts[i].tolist())
            else:
                raw = self.columns[COLUMN_OF[name]][i]
                values[name] = raw.item() if hasattr(raw, "item") else raw
        return ClientView(**values)

    def views(self, ids: np.ndarray | Sequence[int] | None = None) -> ClientViews:
        """A lazy sequence of views of ``ids`` (default: every client), with column access."""
        if ids is None:
            return ClientViews(self, self.columns["client_id"], everyone=True)
        return ClientViews(self, np.asarray(ids, dtype=np.int64))

    # ------------------------------------------------------------------ responses
    def record_responses(self, responses: Responses, *, fresh: bool = False) -> None:
        """Store the followers' moves of this round (phase 3).

        ``fresh``: the rows still hold the round's defaults (no reason yet), so only the
        stated reasons are written (the round's phase 3 asks each client once).
        """
        ids = responses.ids
        cols = self.columns
        # every client, in order: slices write faster than fancy indexing
        rows = slice(None) if np.array_equal(ids, cols["client_id"]) else ids
        cols["participating"][rows] = responses.participate
        cols["response_epsilon"][rows] = responses.epsilon
        cols["response_rho"][rows] = responses.rho
        cols["response_bid"][rows] = responses.bid
        if fresh:
            positions, reasons = responses.stated_reasons()
            if positions.size:
                cols["decline_reason"][ids[positions]] = reasons
        else:
            cols["decline_reason"][rows] = responses.reason

    def responses(self, ids: np.ndarray | Sequence[int] | None = None) -> Responses:
        """This round's responses of ``ids`` (default: every client), columnar and iterable
        as ``Response`` objects (copies of the columns)."""
        cols = self.columns
        names = ("participating", "response_epsilon", "response_rho", "decline_reason")
        if ids is None:
            return Responses(
                cols["client_id"].copy(),
                *(cols[name].copy() for name in names),
                bid=cols["response_bid"].copy(),
            )
        ids = np.asarray(ids, dtype=np.int64)
        return Responses(ids, *(cols[name][ids] for name in names), bid=cols["response_bid"][ids])

    def response(self, client_id: int) -> Response:
        return self.responses([client_id])[0]

    # ------------------------------------------------------------------ accounting
    def record_release(self, ids: np.ndarray, epsilon_spent: np.ndarray) -> None:
        """Account released updates: ε spent as the clients' accountants now report it."""
        self.touch(ids)
        cols = self.columns
        cols["epsilon_charged"][ids] = epsilon_spent - cols["epsilon_spent"][ids]
        cols["epsilon_spent"][ids] = epsilon_spent
        cols["participations"][ids] += 1
        self.budget_version += 1
        self._budget_rows = {self.budget_version: np.array(ids, dtype=np.int64)}

    def budget_derived(
        self,
        name: str,
        compute: Callable[[], np.ndarray],
        *,
        version: int | None = None,
        static: bool = False,
        rows: Callable[[np.ndarray], np.ndarray] | None = None,
    ) -> np.ndarray | None:
        """A per-client array computed from the budget columns only (ε total, ε spent, δ),
        e.g. the remaining zCDP budget: ``compute()`` runs once per budget state and the
        answer is shared by every reader of that state (read-only: copy before writing).

        ``static``: it reads static columns only (e.g. ρ of ε total), so it lasts until one
        of them changes (``static_version``). ``version``: an earlier state; its answer when
        it was computed and is one of the last two states, else None (it cannot be
        recomputed). ``rows``: the same computation at some rows (client ids), for an
        elementwise ``compute``: when the state before was computed and the only change
        since is one round's releases (:meth:`record_release`), the answer is that state's
        with the released clients' rows recomputed (the same numbers, at the cost of the
        rows that changed instead of every client's).
        """
        states = self._budget_cache.setdefault(("static " if static else "") + name, {})
        current = self.static_version if static else self.budget_version
        if version is not None and version != current:
            return states.get(version)
        found = states.get(current)
        if found is None:
            changed = None if static or rows is None else self._budget_rows.get(current)
            before = states.get(current - 1)
            if rows is not None and changed is not None and before is not None:
                found = before.copy()
                found[changed] = rows(changed)
            else:
                found = np.asarray(compute())
            found.setflags(write=False)
            states[current] = found
            for old in [v for v in states if v < current - 1]:
                del states[old]
        return found

    def settle(self, payments: dict[int, float]) -> None:
        """Phase 9: rewards paid and every client's utility reward − ν·ε_charged.

        Computed at the touched rows: everywhere else reward and ε charged are 0, and so is
        the utility (its default).
        """
        cols = self.columns
        if payments:
            ids = np.fromiter(payments.keys(), np.int64, len(payments))
            self.touch(ids)
            cols["reward"][ids] = np.fromiter(payments.values(), float, len(payments))
        rows = self.touched()
        cols["utility"][rows] = (
            cols["reward"][rows] - cols["privacy_value"][rows] * cols["epsilon_charged"][rows]
        )

    def can_afford_next(self) -> np.ndarray:
        """Whether one more default participation keeps each client within ε_total."""
        cols = self.columns
        return can_afford(
            cols["epsilon_after_next"],
            cols["epsilon_spent"],
            cols["epsilon_round"],
            cols["epsilon_total"],
        )
