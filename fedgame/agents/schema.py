"""The one field list of a client: every column, view field and agent attribute derives from it.

Two frozen dataclasses, split by audience, hold every client fact with its metadata:

* :class:`ClientView`: what plug-ins may know about a client at a round (the agent-knowable
  facts). Mechanisms get these and nothing else.
* :class:`ClientRecord`: the rest of the clients table: the round's outcome (selected,
  straggled, uploaded, noise, reward, ...) and bookkeeping no mechanism may condition on.

Each field's ``metadata`` says its ``role``: ``static`` (drawn when the population is built
and fixed unless a user overwrites it), ``state`` (evolves over the run) or ``round`` (reset
to ``default`` every round); its numpy ``dtype``; the table ``column`` when it differs from the
name; and whether it is ``written`` to ``clients.parquet``. The struct-of-arrays
:class:`fedgame.agents.table.ClientTable`, the Mesa agent attributes
(:class:`fedgame.agents.client.ClientAgent`), the DataCollector's client columns and the
population builder all read these lists; adding a client attribute is one line here (plus,
for a static one, how the population draws it).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

Role = Literal["static", "state", "round"]


def col(
    role: Role,
    dtype: Any,
    default: Any = dataclasses.MISSING,
    *,
    initial: Any = None,
    column: str | None = None,
    written: bool = True,
    doc: str = "",
    unit: str = "",
) -> Any:
    """A dataclass field carrying its client-table metadata.

    ``default`` is the dataclass default (and the table's starting value); ``initial`` a
    starting value for a field the dataclass requires (e.g. ε spent starts at 0). ``doc`` and
    ``unit`` (empty: a count of nothing, a flag, an id or a pure number) go to the column
    dictionary (:mod:`fedgame.columns`).
    """
    start = default if initial is None else initial
    meta = {
        "role": role,
        "dtype": dtype,
        "initial": start,
        "column": column,
        "written": written,
        "doc": doc,
        "unit": unit,
    }
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ClientView:
    """What the server and mechanisms may know about one client at a round.

    ``epsilon_round``/``delta_round``: the default per-participation budget (its total split
    over planned participations); ``epsilon_spent``: what its accountant reports so far;
    ``epsilon_after_next``: what it would report after one more default participation.
    """

    client_id: int = col("static", np.int64, doc="client id, 0..N-1")
    dataset_size: int = col(
        "static", np.int64, doc="number of local training samples |D_i|", unit="samples"
    )
    emd: float = col(
        "static",
        float,
        doc="label skew: EMD (L1 distance) of its label mix to the population's, in [0, 2]",
    )
    privacy_value: float = col(
        "static", float, doc="ν_i, cost per unit of privacy loss", unit="cost per unit ε"
    )
    epsilon_total: float = col("static", float, doc="ε_total, the whole run's budget", unit="ε")
    delta: float = col(
        "static", float, doc="δ_total, at which ε spent is reported", unit="probability"
    )
    epsilon_spent: float = col(
        "state", float, initial=0.0, doc="ε spent (accountant, at δ)", unit="ε"
    )
    epsilon_round: float = col("static", float, doc="default per-participation ε", unit="ε")
    delta_round: float = col("static", float, doc="default per-participation δ", unit="probability")
    straggle_prob: float = col(
        "static", float, doc="chance to miss the upload deadline", unit="probability"
    )
    colluder: bool = col("static", bool, doc="colludes: shares its noise with the server")
    reachable: bool = col(
        "round", bool, True, column="link_up", doc="its client-server link is up this round"
    )
    participations: int = col(
        "state", np.int64, 0, written=False, doc="rounds it released in", unit="rounds"
    )
    label_counts: tuple[int, ...] = col(
        "static", np.int64, (), written=False, doc="per class", unit="samples"
    )
    epsilon_after_next: float = col(
        "state", float, math.nan, written=False, doc="ε after one more default release", unit="ε"
    )

    @property
    def epsilon_remaining(self) -> float:
        return max(self.epsilon_total - self.epsilon_spent, 0.0)

    @property
    def can_afford_next(self) -> bool:
        """Whether one more default participation keeps ε spent within ε_total.

        ``epsilon_after_next`` is the accountant's ε after that participation; when unknown
        (nan) the basic-composition estimate ε_spent + ε_round is used.
        """
        after = self.epsilon_after_next
        if after != after:
            after = self.epsilon_spent + self.epsilon_round
        return after <= self.epsilon_total * (1 + 1e-9)


@dataclass(frozen=True)
class ClientRecord:
    """The clients-table facts that are not part of any view (outcomes and bookkeeping)."""

    behaviour: str = col(
        "static",
        object,
        "",
        doc="its agent type, a behaviour of population.behaviours (the policy kind by default)",
    )
    participating: bool = col(
        "round", bool, False, doc="answered the offer with yes (willing to take part)"
    )
    decline_reason: str = col(
        "round",
        object,
        "",
        doc="why it declined (budget, unreachable, excluded, ...); empty otherwise",
    )
    selected: bool = col(
        "round",
        bool,
        False,
        doc="chosen by the server and admitted by the privacy budget: it trained",
    )
    straggled: bool = col("round", bool, False, doc="missed the upload deadline")
    uploaded: bool = col("round", bool, False, doc="its update reached the server")
    noise_std: float = col(
        "round",
        float,
        0.0,
        doc="std of the noise per coordinate of its update",
        unit="parameter units",
    )
    epsilon_charged: float = col(
        "round", float, 0.0, doc="increase of ε spent this round", unit="ε"
    )
    train_loss: float = col("round", float, math.nan, doc="mean local minibatch loss", unit="nats")
    reward: float = col("round", float, 0.0, doc="payment received this round", unit="reward units")
    utility: float = col("round", float, 0.0, doc="reward − ν·ε_charged", unit="reward units")
    response_epsilon: float = col(
        "round", float, math.nan, written=False, doc="ε it asked", unit="ε"
    )
    response_rho: float = col(
        "round", float, math.nan, written=False, doc="ρ it asked", unit="ρ (zCDP)"
    )
    response_bid: float = col(
        "round", float, math.nan, written=False, doc="per-unit cost it bid", unit="reward units"
    )


@dataclass(frozen=True)
class FieldSpec:
    """One client field as the table sees it."""

    name: str
    column: str
    role: Role
    dtype: Any
    default: Any
    written: bool
    view: bool
    doc: str
    unit: str = ""


def _specs() -> tuple[FieldSpec, ...]:
    out = []
    for cls, view in ((ClientView, True), (ClientRecord, False)):
        for f in dataclasses.fields(cls):
            meta = f.metadata
            default = None if meta["initial"] is dataclasses.MISSING else meta["initial"]
            column = meta["column"] or f.name
            out.append(
                FieldSpec(f.name, column, meta["role"], meta["dtype"], default,
                          meta["written"], view, meta["doc"], meta["unit"])
            )  # fmt: skip
    return tuple(out)


#: every client field, views first
FIELDS: tuple[FieldSpec, ...] = _specs()
#: the facts a plug-in may read about a client: exactly the fields of ``ClientView``
VIEW_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(ClientView))
#: table column of each field name (``reachable`` is stored as ``link_up``)
COLUMN_OF: dict[str, str] = {f.name: f.column for f in FIELDS}
#: per-round columns and the value each round starts from
ROUND_DEFAULTS: dict[str, Any] = {f.column: f.default for f in FIELDS if f.role == "round"}
#: static columns drawn when the population is built, with their dtype
STATIC_COLUMNS: dict[str, Any] = {
    f.column: f.dtype
    for f in FIELDS
    if f.role == "static" and f.name not in ("client_id", "label_counts")
}
#: columns of the clients table (one row per round x client), in order
CLIENT_COLUMNS: tuple[str, ...] = tuple(f.column for f in FIELDS if f.written)
