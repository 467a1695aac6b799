"""Read-only context objects passed between agents and mechanisms.

Mechanisms never see agent objects: they get frozen views of the facts they may use
(``ClientView``, defined with the rest of the client schema in :mod:`fedgame.agents.schema`),
and return frozen decisions. Fields a later mechanism family needs (e.g. ``rho`` for zCDP) are
carried here with neutral defaults so every family speaks the same types.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, TypeVar, overload

import numpy as np

from fedgame.agents.schema import VIEW_FIELDS, ClientView
from fedgame.game.rules import GameRules

if TYPE_CHECKING:
    from fedgame.learning.batched import BatchedLearner
    from fedgame.mechanisms.base import (
        Aggregator,
        FaultModel,
        IncentiveMechanism,
        SelectionPolicy,
    )
    from fedgame.privacy.base import PrivacyMechanism

#: the field names a plug-in may read (``ClientViews.column``)
_VIEW_NAMES = frozenset(VIEW_FIELDS)


class ClientViews(Sequence[ClientView]):
    """A round's views of some clients: a sequence of ``ClientView`` with column access.

    Items are built lazily from the model's client table, so handing every client's view to a
    plug-in costs nothing until it reads them. ``ids`` and
    ``column(name)`` give a plug-in the same facts as numpy arrays without building views
    (``ids_of``/``column_of`` use them when present and fall back to plain sequences). Valid
    for the round it was handed out in.
    """

    __slots__ = ("_everyone", "_ids", "_table")

    def __init__(self, table: Any, ids: np.ndarray, *, everyone: bool = False) -> None:
        self._table = table
        self._ids = ids
        self._everyone = everyone  # ids == arange(len(table)): columns are plain copies

    @property
    def ids(self) -> np.ndarray:
        """Client ids, in order (a copy)."""
        return self._ids.copy()

    def column(self, name: str) -> np.ndarray:
        """The ``ClientView`` field ``name`` of every client here, as an array (a copy).

        Only declared view fields (``VIEW_FIELDS``) can be read: a client's state that its
        agent could not know yet (e.g. this round's straggler draw) is not a view field.

        Raises:
            KeyError: ``name`` is not a ``ClientView`` field (the message lists them).
        """
        if name not in _VIEW_NAMES:
            raise KeyError(
                f"{name!r} is not a client view field; plug-ins may read: {', '.join(VIEW_FIELDS)}"
            )
        column = self._table.column(name)
        return column.copy() if self._everyone else column[self._ids]

    def budget_derived(
        self, name: str, compute: Callable[[ClientViews], np.ndarray], *, static: bool = False
    ) -> np.ndarray:
        """``compute`` of every client's views, a per-client array that depends on the
        budget columns only (ε total, ε spent, δ), at these clients (a copy).

        Computed once per budget state of the model's table and shared by every reader of
        that state (the leader, each behaviour and the round check ask for the same
        remaining budgets): bit for bit what ``compute(self)`` gives, for an elementwise
        ``compute`` (after a round's releases only the released clients' rows are computed
        again). ``static``: ``compute`` reads static columns only (ε total, δ): once
        until one of them changes.
        """
        table = self._table
        full = table.budget_derived(
            name,
            lambda: compute(table.views()),
            static=static,
            rows=lambda changed: compute(table.views(changed)),
        )
        return full.copy() if self._everyone else full[self._ids]

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> ClientView: ...

    @overload
    def __getitem__(self, index: slice | np.ndarray) -> ClientViews: ...

    def __getitem__(self, index: int | slice | np.ndarray) -> ClientView | ClientViews:
        """One view by position, or a sub-sequence (slice, boolean mask or positions)."""
        if isinstance(index, slice | np.ndarray):
            return ClientViews(self._table, self._ids[index])
        return self._table.view(self._ids[index])

    def __iter__(self) -> Iterator[ClientView]:
        view = self._table.view
        return (view(i) for i in self._ids.tolist())

    def __repr__(self) -> str:
        return f"ClientViews({len(self)} clients)"


def can_afford(
    after_next: np.ndarray, spent: np.ndarray, epsilon_round: np.ndarray, total: np.ndarray
) -> np.ndarray:
    """Vectorised ``ClientView.can_afford_next`` (basic composition when ``after_next`` is NaN)."""
    after = np.where(np.isnan(after_next), spent + epsilon_round, after_next)
    return after <= total * (1 + 1e-9)


def ids_of(clients: Sequence[Any]) -> np.ndarray:
    """Client ids of a sequence of views or responses, as an int64 array."""
    ids = getattr(clients, "ids", None)
    if isinstance(ids, np.ndarray):
        return ids
    return np.fromiter((c.client_id for c in clients), np.int64, len(clients))


def column_of(clients: Sequence[Any], name: str, dtype: Any = float) -> np.ndarray:
    """Field ``name`` of every view (or response) in ``clients`` as an array."""
    column = getattr(clients, "column", None)
    if column is not None:
        return np.asarray(column(name), dtype=dtype)
    return np.array([getattr(c, name) for c in clients], dtype=dtype)


#: an incentive's own record of its offer (:attr:`Offer.terms`)
TermsT = TypeVar("TermsT")


@dataclass(frozen=True)
class RoundInfo:
    """Facts about the current round shared by every mechanism."""

    round: int
    rounds: int
    num_clients: int
    test_accuracy: float = float("nan")
    test_loss: float = float("nan")


@dataclass(frozen=True)
class RoundRecord:
    """What everyone observed of a finished round: the reward offered, every client's
    response (``responses``, all clients; those not asked decline with their reason) and the
    ids whose update was delivered."""

    round: int
    reward: float
    responses: Responses
    delivered: np.ndarray


@dataclass(frozen=True)
class MarketView:
    """The public state of the game at a round (what a Stackelberg leader sees).

    ``game`` holds the scenario's game rules (``game:``: complete information, cartel,
    degeneracy thresholds); ``previous`` the record of the last round (None in round 1).
    """

    clients: Sequence[ClientView]
    info: RoundInfo
    game: GameRules = field(default_factory=GameRules)
    previous: RoundRecord | None = None

    @property
    def privacy_values(self) -> np.ndarray:
        return column_of(self.clients, "privacy_value")


@dataclass(frozen=True)
class Offer:
    """The leader's move for a round: a total reward and optional per-client terms.

    ``reward`` is the round's total reward R_t; ``prices`` optional per-client unit prices;
    ``plan`` free-form planner output (e.g. number of clients per round); ``excluded`` ids the
    leader removed (e.g. for feasibility) who must not train this round; ``menu`` a screening
    menu of items (ρ_k, r_k) each client self-selects from (contracts; empty otherwise).
    ``terms`` is the leader's own frozen record of what it fixed when it offered and reads
    again in ``clear``/``settle``/``deviation_gains`` (its players, ν used, budgets left,
    prices...); each incentive defines its own. Followers never see it (:meth:`public`).
    """

    reward: float = 0.0
    prices: Mapping[int, float] = field(default_factory=dict)
    plan: Mapping[str, float] = field(default_factory=dict)
    excluded: frozenset[int] = frozenset()
    menu: tuple[tuple[float, float], ...] = ()
    terms: Any = field(default=None, compare=False, repr=False)

    def public(self) -> Offer:
        """The offer as the followers see it: without the leader's ``terms``."""
        return self if self.terms is None else replace(self, terms=None)

    def terms_as(self, kind: type[TermsT], *, leader: str) -> TermsT:
        """The leader's ``terms``, checked to be ``kind`` (``ValueError`` naming ``leader``
        when the offer is not one it made: a leader settles only its own offers)."""
        if not isinstance(self.terms, kind):
            raise ValueError(
                f"{leader} settles only the offer it made (Offer.terms is "
                f"{type(self.terms).__name__}, not {kind.__name__})"
            )
        return self.terms


@dataclass(frozen=True)
class Response:
    """A follower's move: take part or not, and at which privacy level.

    ``epsilon`` is the per-round privacy loss the client accepts (pure/approximate DP);
    ``rho`` the zCDP budget for zCDP mechanisms (``nan`` when unused); ``bid`` the per-unit
    cost it reports to an auction (``nan`` when it bids nothing).
    """

    client_id: int
    participate: bool
    epsilon: float = float("nan")
    rho: float = float("nan")
    reason: str = ""
    bid: float = float("nan")


class Responses(Sequence[Response]):
    """Followers' moves as columns (what a policy's batched ``respond_all`` returns).

    Iterating yields ``Response`` objects; ``ids`` and ``column(name)`` give the arrays
    (``participate``, ``epsilon``, ``rho``, ``reason``, ``bid``). The reasons may be given in full
    (``reason``: one string per client, or one for all) or as ``why``: the reason of every
    client that does not take part (the others have none). Then the object column of
    reasons is built only when read, and ``stated_reasons`` finds the declines without
    reading it (a round of N batched answers costs no Python-object pass over N).
    """

    __slots__ = ("_ids", "_reason", "_why", "bid", "epsilon", "participate", "rho")

    def __init__(
        self,
        ids: np.ndarray,
        participate: np.ndarray,
        epsilon: np.ndarray | None = None,
        rho: np.ndarray | None = None,
        reason: np.ndarray | str | None = None,
        *,
        why: str | None = None,
        bid: np.ndarray | None = None,
    ) -> None:
        if reason is not None and why is not None:
            raise ValueError("give reason (every client's) or why (the decliners'), not both")
        n = len(ids)
        self._ids = np.asarray(ids, dtype=np.int64)
        self.participate = as_column(participate, n, bool)
        self.epsilon = as_column(epsilon, n, float, math.nan)
        self.rho = as_column(rho, n, float, math.nan)
        self.bid = as_column(bid, n, float, math.nan)
        self._reason = None if reason is None else as_column(reason, n, object)
        self._why = why or None

    @classmethod
    def of(cls, responses: Sequence[Response]) -> Responses:
        """Columns of a list of ``Response`` objects."""
        return cls(
            ids_of(responses),
            column_of(responses, "participate", bool),
            column_of(responses, "epsilon"),
            column_of(responses, "rho"),
            column_of(responses, "reason", object),
            bid=column_of(responses, "bid"),
        )

    @property
    def ids(self) -> np.ndarray:
        return self._ids

    @property
    def reason(self) -> np.ndarray:
        """Every client's reason (``""`` when none), as an object column."""
        if self._reason is None:
            reason = filled_objects(len(self._ids), "")
            if self._why is not None:
                reason[~self.participate] = self._why
            self._reason, self._why = reason, None
        return self._reason

    def stated_reasons(self) -> tuple[np.ndarray, np.ndarray | str]:
        """``(positions, reasons)`` of the responses whose reason is not empty."""
        if self._why is not None:
            return np.flatnonzero(~self.participate), self._why
        if self._reason is None:
            return np.zeros(0, dtype=np.int64), ""
        positions = np.flatnonzero(self._reason.astype(bool))
        return positions, self._reason[positions]

    def column(self, name: str) -> np.ndarray:
        if name == "client_id":
            return self._ids
        return getattr(self, name)

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> Response: ...

    @overload
    def __getitem__(self, index: slice | np.ndarray) -> Responses: ...

    def __getitem__(self, index: int | slice | np.ndarray) -> Response | Responses:
        """One response by position, or a sub-sequence (slice, boolean mask or positions)."""
        if isinstance(index, slice | np.ndarray):
            return Responses(
                self._ids[index],
                self.participate[index],
                self.epsilon[index],
                self.rho[index],
                None if self._reason is None else self._reason[index],
                why=self._why,
                bid=self.bid[index],
            )
        if self._reason is not None:
            reason = str(self._reason[index])
        else:
            reason = "" if self.participate[index] or self._why is None else self._why
        return Response(
            int(self._ids[index]),
            participate=bool(self.participate[index]),
            epsilon=float(self.epsilon[index]),
            rho=float(self.rho[index]),
            reason=reason,
            bid=float(self.bid[index]),
        )

    def __iter__(self) -> Iterator[Response]:
        return (self[i] for i in range(len(self)))


def as_column(values: Any, n: int, dtype: Any, default: Any = None) -> np.ndarray:
    """``values`` (``default`` when None) as an ``[n]`` array: no copy when it already is
    one, filled with the value when it is a scalar."""
    value = default if values is None else values
    if dtype is object and isinstance(value, str):
        return filled_objects(n, value)
    array: np.ndarray = np.asarray(value, dtype=dtype)
    if array.shape == (n,):
        return array
    if array.size == 1:
        if dtype is object:
            return filled_objects(n, array.reshape(()).item())
        return np.full(n, array.reshape(()), dtype=array.dtype)  # faster than a broadcast
    raise ValueError(f"expected {n} values or one, got shape {array.shape}")


def filled_objects(n: int, value: Any) -> np.ndarray:
    """An object column of ``n`` times ``value`` (``np.full`` is several times slower)."""
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


class ClientValues(Mapping[int, float]):
    """``{client id: value}`` backed by two arrays (a plug-in's per-client metric column
    without building a dict); ``ids`` and ``array`` give them directly."""

    __slots__ = ("array", "ids")

    def __init__(self, ids: np.ndarray, values: np.ndarray) -> None:
        self.ids = np.asarray(ids, dtype=np.int64)
        self.array = np.asarray(values, dtype=float)

    def __getitem__(self, client_id: int) -> float:
        hits = np.flatnonzero(self.ids == client_id)
        if not hits.size:
            raise KeyError(client_id)
        return float(self.array[hits[0]])

    def __iter__(self) -> Iterator[int]:
        return iter(self.ids.tolist())

    def __len__(self) -> int:
        return len(self.ids)


class UniformProbabilities(Mapping[int, float]):
    """``{client id: p}`` for every candidate, without building a dict (sorted ``ids``)."""

    __slots__ = ("_ids", "_p", "_sorted")

    def __init__(self, ids: np.ndarray, p: float) -> None:
        self._ids = np.asarray(ids, dtype=np.int64)
        self._p = float(p)
        self._sorted = False  # sorted on first lookup (the model itself never reads it)

    def _sorted_ids(self) -> np.ndarray:
        if not self._sorted:
            self._ids, self._sorted = np.sort(self._ids), True
        return self._ids

    def __getitem__(self, client_id: int) -> float:
        ids = self._sorted_ids()
        j = int(np.searchsorted(ids, client_id))
        if j < len(ids) and ids[j] == client_id:
            return self._p
        raise KeyError(client_id)

    def __iter__(self) -> Iterator[int]:
        return iter(self._sorted_ids().tolist())

    def __len__(self) -> int:
        return len(self._ids)


@dataclass(frozen=True)
class Selection:
    """The server's choice of participants, with optional aggregation weights hints."""

    client_ids: tuple[int, ...]
    probabilities: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class SetupContext:
    """What a plug-in's optional ``prepare(ctx, *, rng)`` hook sees once, before round 1.

    ``graph`` is the client-client topology (networkx, nodes 0..N-1). The run's other
    plug-ins are typed fields, so a mechanism can consult another (LightDP reads the fault
    model's straggler law, a per-client privacy plan reads the selection's participation
    plan, a planner probes the ``learner``); a field is None where the caller (a test, a
    tool) built no such plug-in.
    """

    num_clients: int
    rounds: int
    clients: Sequence[ClientView]
    graph: Any = None
    planned_participations: int = 1
    incentive: IncentiveMechanism | None = None
    selection: SelectionPolicy | None = None
    privacy: PrivacyMechanism | None = None
    aggregation: Aggregator | None = None
    faults: FaultModel | None = None
    #: the run's ``BatchedLearner`` (local solves and loss probes of planners)
    learner: BatchedLearner | None = None
