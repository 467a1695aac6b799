"""``ClientTable``: every client's state as one numpy column per attribute (struct of arrays).

The Mesa ``ClientAgent`` objects read and write their row of this table through properties,
so agent code reads naturally (``agent.epsilon_spent``) while the model's phases update whole
columns at once (``table.selected[ids] = True``): the per-round cost of the agent layer does
not grow with a Python loop over the population.

Columns reset every round (``ROUND_DEFAULTS``) hold that round's outcome; the others persist.
Frozen ``ClientView`` objects for plug-ins are built on demand from a row and cached until
``invalidate`` is called for that client (the model calls it whenever a field a view shows
changes: ε spent, participations, ε after next, link status, per-round budget).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from fedgame.views import ClientView, ClientViews, Response, Responses, can_afford

#: columns of the clients table (one row per round x client), in order
CLIENT_COLUMNS = (
    "client_id",
    "dataset_size",
    "emd",
    "privacy_value",
    "epsilon_total",
    "delta",
    "epsilon_round",
    "epsilon_spent",
    "straggle_prob",
    "colluder",
    "link_up",
    "participating",
    "decline_reason",
    "selected",
    "straggled",
    "uploaded",
    "noise_std",
    "epsilon_charged",
    "train_loss",
    "reward",
    "utility",
)

#: per-round outcome columns and the value each round starts from
ROUND_DEFAULTS: dict[str, Any] = {
    "link_up": True,
    "straggled": False,
    "participating": False,
    "decline_reason": "",
    "selected": False,
    "uploaded": False,
    "noise_std": 0.0,
    "epsilon_charged": 0.0,
    "train_loss": math.nan,
    "reward": 0.0,
    "utility": 0.0,
    "response_epsilon": math.nan,
    "response_rho": math.nan,
}

#: attributes that stay fixed during a run unless a user overwrites them
STATIC_COLUMNS: dict[str, Any] = {
    "dataset_size": np.int64,
    "emd": float,
    "privacy_value": float,
    "epsilon_total": float,
    "delta": float,
    "epsilon_round": float,
    "delta_round": float,
    "straggle_prob": float,
    "colluder": bool,
}


class ClientTable:
    """Struct-of-arrays state of ``n`` clients.

    Args:
        population: an object with one array per static attribute (``dataset_size``,
            ``label_counts`` ``[n, classes]``, ``emd``, ``privacy_value``, ``epsilon_total``,
            ``delta``, ``epsilon_round``, ``delta_round``, ``straggle_prob``, ``colluder``).
        extra_columns: plug-in client columns (float, NaN when a plug-in reports nothing).
    """

    # static attributes (from the population)
    dataset_size: np.ndarray
    emd: np.ndarray
    privacy_value: np.ndarray
    epsilon_total: np.ndarray
    delta: np.ndarray
    epsilon_round: np.ndarray
    delta_round: np.ndarray
    straggle_prob: np.ndarray
    colluder: np.ndarray
    # per-round outcome (ROUND_DEFAULTS)
    link_up: np.ndarray
    straggled: np.ndarray
    participating: np.ndarray
    decline_reason: np.ndarray
    selected: np.ndarray
    uploaded: np.ndarray
    noise_std: np.ndarray
    epsilon_charged: np.ndarray
    train_loss: np.ndarray
    reward: np.ndarray
    utility: np.ndarray
    response_epsilon: np.ndarray
    response_rho: np.ndarray

    def __init__(self, population: Any, *, extra_columns: Sequence[str] = ()) -> None:
        n = len(population.dataset_size)
        self.size = n
        self.client_id = np.arange(n, dtype=np.int64)
        for name, kind in STATIC_COLUMNS.items():
            setattr(self, name, np.array(getattr(population, name), dtype=kind).reshape(n))
        self.label_counts = np.asarray(population.label_counts, dtype=np.int64).reshape(n, -1)
        self._label_tuples = [tuple(row) for row in self.label_counts.tolist()]
        self.epsilon_spent = np.zeros(n)
        self.epsilon_after_next = np.full(n, math.nan)
        self.participations = np.zeros(n, dtype=np.int64)
        self.extra_columns = tuple(extra_columns)
        self.extra = {name: np.full(n, math.nan) for name in self.extra_columns}
        for name, value in ROUND_DEFAULTS.items():
            dtype: Any = object if isinstance(value, str) else type(value)
            setattr(self, name, np.full(n, value, dtype=dtype))
        self._views = np.full(n, None, dtype=object)
        self._static_copies: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return self.size

    # ------------------------------------------------------------------ rounds
    def reset_round(self) -> None:
        """Give every per-round column (and the plug-in columns) its starting value."""
        for name, value in ROUND_DEFAULTS.items():
            column = getattr(self, name)
            if name == "link_up" and not column.all():
                self.invalidate(np.flatnonzero(~column))  # ``reachable`` shows in their views
            column.fill(value)
        for column in self.extra.values():
            column.fill(math.nan)

    def column(self, name: str) -> np.ndarray:
        """The live column ``name`` (a plug-in column when it is one)."""
        if name in self.extra:
            return self.extra[name]
        if name == "reachable":
            return self.link_up
        return getattr(self, name)

    def snapshot(self, columns: Iterable[str]) -> dict[str, np.ndarray]:
        """Copies of ``columns`` (one clients-table block for the round).

        Columns of static attributes are copied once and the copy shared by later blocks
        until ``static_changed`` is called (the agents' attribute setters call it).
        """
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
        """A static attribute was overwritten: the next snapshot copies them afresh."""
        self._static_copies = {}

    # ------------------------------------------------------------------ views
    def invalidate(self, ids: np.ndarray | Sequence[int] | int) -> None:
        """Forget the cached views of ``ids`` (their visible state changed)."""
        self._views[ids] = None

    def view(self, client_id: int) -> ClientView:
        """The frozen view of one client (cached until ``invalidate``)."""
        view = self._views[client_id]
        if view is None:
            view = self._views[client_id] = self._make_view(int(client_id))
        return view

    def views(self, ids: np.ndarray | Sequence[int] | None = None) -> ClientViews:
        """A lazy sequence of views of ``ids`` (default: every client), with column access."""
        if ids is None:
            return ClientViews(self, self.client_id, everyone=True)
        return ClientViews(self, np.asarray(ids, dtype=np.int64))

    def _make_view(self, i: int) -> ClientView:
        return ClientView(
            client_id=i,
            dataset_size=int(self.dataset_size[i]),
            emd=float(self.emd[i]),
            privacy_value=float(self.privacy_value[i]),
            epsilon_total=float(self.epsilon_total[i]),
            delta=float(self.delta[i]),
            epsilon_spent=float(self.epsilon_spent[i]),
            epsilon_round=float(self.epsilon_round[i]),
            delta_round=float(self.delta_round[i]),
            straggle_prob=float(self.straggle_prob[i]),
            colluder=bool(self.colluder[i]),
            reachable=bool(self.link_up[i]),
            participations=int(self.participations[i]),
            label_counts=self._label_tuples[i],
            epsilon_after_next=float(self.epsilon_after_next[i]),
        )

    # ------------------------------------------------------------------ responses
    def record_responses(self, responses: Responses) -> None:
        """Store the followers' moves of this round (phase 3)."""
        ids = responses.ids
        self.participating[ids] = responses.participate
        self.decline_reason[ids] = responses.reason
        self.response_epsilon[ids] = responses.epsilon
        self.response_rho[ids] = responses.rho

    def responses(self, ids: np.ndarray | Sequence[int]) -> Responses:
        """This round's responses of ``ids`` (columnar, iterable as ``Response`` objects)."""
        ids = np.asarray(ids, dtype=np.int64)
        return Responses(
            ids,
            self.participating[ids],
            self.response_epsilon[ids],
            self.response_rho[ids],
            self.decline_reason[ids],
        )

    def response(self, client_id: int) -> Response:
        return self.responses([client_id])[0]

    # ------------------------------------------------------------------ accounting
    def record_release(self, ids: np.ndarray, epsilon_spent: np.ndarray) -> None:
        """Account released updates: ε spent as the clients' accountants now report it."""
        self.epsilon_charged[ids] = epsilon_spent - self.epsilon_spent[ids]
        self.epsilon_spent[ids] = epsilon_spent
        self.participations[ids] += 1
        self.invalidate(ids)

    def settle(self, payments: dict[int, float]) -> None:
        """Phase 9: rewards paid and every client's utility reward − ν·ε_charged."""
        if payments:
            ids = np.fromiter(payments.keys(), np.int64, len(payments))
            self.reward[ids] = np.fromiter(payments.values(), float, len(payments))
        np.subtract(self.reward, self.privacy_value * self.epsilon_charged, out=self.utility)

    def can_afford_next(self) -> np.ndarray:
        """Whether one more default participation keeps each client within ε_total."""
        return can_afford(
            self.epsilon_after_next, self.epsilon_spent, self.epsilon_round, self.epsilon_total
        )
