"""Read-only context objects passed between agents and mechanisms.

Mechanisms never see agent objects: they get frozen views of the facts they may use, and
return frozen decisions. Fields a later mechanism family needs (e.g. ``rho`` for zCDP) are
carried here with neutral defaults so every family speaks the same types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ClientView:
    """What the server and mechanisms may know about one client at a round.

    ``epsilon_round``/``delta_round``: the default per-participation budget (its total split
    over planned participations); ``epsilon_spent``: what its accountant reports so far.
    """

    client_id: int
    dataset_size: int
    emd: float
    privacy_value: float
    epsilon_total: float
    delta: float
    epsilon_spent: float
    epsilon_round: float
    delta_round: float
    straggle_prob: float
    colluder: bool
    reachable: bool = True
    participations: int = 0
    label_counts: tuple[int, ...] = ()
    epsilon_after_next: float = float("nan")

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
class RoundInfo:
    """Facts about the current round shared by every mechanism."""

    round: int
    rounds: int
    num_clients: int
    test_accuracy: float = float("nan")
    test_loss: float = float("nan")


@dataclass(frozen=True)
class MarketView:
    """The public state of the game at a round (what a Stackelberg leader sees)."""

    clients: tuple[ClientView, ...]
    info: RoundInfo

    @property
    def privacy_values(self) -> np.ndarray:
        return np.array([c.privacy_value for c in self.clients], dtype=float)


@dataclass(frozen=True)
class Offer:
    """The leader's move for a round: a total reward and optional per-client terms.

    ``reward`` is the round's total reward R_t; ``prices`` optional per-client unit prices;
    ``plan`` free-form planner output (e.g. number of clients per round); ``excluded`` ids the
    leader removed (e.g. for feasibility) who must not train this round.
    """

    reward: float = 0.0
    prices: Mapping[int, float] = field(default_factory=dict)
    plan: Mapping[str, float] = field(default_factory=dict)
    excluded: frozenset[int] = frozenset()


@dataclass(frozen=True)
class Response:
    """A follower's move: take part or not, and at which privacy level.

    ``epsilon`` is the per-round privacy loss the client accepts (pure/approximate DP);
    ``rho`` the zCDP budget for zCDP mechanisms (``nan`` when unused).
    """

    client_id: int
    participate: bool
    epsilon: float = float("nan")
    rho: float = float("nan")
    reason: str = ""


@dataclass(frozen=True)
class Selection:
    """The server's choice of participants, with optional aggregation weights hints."""

    client_ids: tuple[int, ...]
    probabilities: Mapping[int, float] = field(default_factory=dict)


@dataclass(frozen=True)
class SetupContext:
    """What a plug-in's optional ``prepare(ctx, *, rng)`` hook sees once, before round 1.

    ``graph`` is the client-client topology (networkx, nodes 0..N-1); ``components`` maps each
    scenario component path (e.g. ``"network.faults"``) to its plug-in instance, so a mechanism
    can consult another (LightDP reads the fault model's straggler distribution).
    """

    num_clients: int
    rounds: int
    clients: tuple[ClientView, ...]
    graph: Any
    components: Mapping[str, Any]
    planned_participations: int
