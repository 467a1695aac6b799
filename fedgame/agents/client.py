"""The client agent: a strategic follower with privacy preferences and a privacy budget."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import mesa

from fedgame.views import ClientView, MarketView, Offer, Response

if TYPE_CHECKING:
    from fedgame.model import FedGameModel

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


def client_row(extra_columns: Sequence[str]) -> Callable[[ClientAgent], tuple]:
    """One DataCollector reporter returning a client's whole row as a tuple.

    Columns are ``CLIENT_COLUMNS`` then ``extra_columns`` (plug-in metrics, NaN when unset).
    One C-level ``attrgetter`` per agent instead of one reporter call per column keeps
    collection cheap for thousands of clients; ``fedgame.run.single.tables`` expands the tuple.
    """
    base = operator.attrgetter(*CLIENT_COLUMNS)
    extra = tuple(extra_columns)

    def row(agent: ClientAgent) -> tuple:
        values = base(agent)
        if not extra:
            return values
        return values + tuple(agent.extra.get(c, math.nan) for c in extra)

    row.columns = (*CLIENT_COLUMNS, *extra)  # type: ignore[attr-defined]
    return row


class ClientAgent(mesa.Agent):
    """A data owner deciding each round whether to train and at which privacy level.

    State: dataset size |D_i| and label counts (its EMD to the population, QI-DPFL Eq. 11),
    privacy value ν_i (cost per unit of privacy loss), total budget (ε_total, δ) spent by
    composition, straggle probability and colluder flag. Its decision rule is the scenario's
    ``policy`` plug-in; the agent only stores state and applies outcomes.

    Utility of a round: reward − ν_i·ε_charged, where ε_charged is the increase of its
    accountant's ε this round (the privacy loss it actually incurred).
    """

    model: FedGameModel

    def __init__(
        self,
        model: FedGameModel,
        *,
        client_id: int,
        dataset_size: int,
        label_counts: tuple[int, ...],
        emd: float,
        privacy_value: float,
        epsilon_total: float,
        delta: float,
        epsilon_round: float,
        delta_round: float,
        straggle_prob: float,
        colluder: bool,
    ) -> None:
        super().__init__(model)
        self.client_id = client_id
        self.dataset_size = dataset_size
        self.label_counts = label_counts
        self.emd = emd
        self.privacy_value = privacy_value
        self.epsilon_total = epsilon_total
        self.delta = delta
        self.epsilon_round = epsilon_round
        self.delta_round = delta_round
        self.straggle_prob = straggle_prob
        self.colluder = colluder
        self.epsilon_spent = 0.0
        self.epsilon_after_next = float("nan")
        self.priced_charge: Any = None  # the Charge its epsilon_after_next was priced with
        self.participations = 0
        self.response: Response | None = None
        self._view_key: tuple | None = None
        self._view: ClientView | None = None
        self.reset_round()

    def reset_round(self) -> None:
        """Clear the per-round outcome fields.

        The model calls this for every client once at creation and afterwards only for the
        clients a round touched (selected, paid or given plug-in metrics); link status and
        responses are rewritten for every client each round anyway.
        """
        self.link_up = True
        self.straggled = False
        self.participating = False
        self.decline_reason = ""
        self.selected = False
        self.uploaded = False
        self.noise_std = 0.0
        self.epsilon_charged = 0.0
        self.train_loss = math.nan
        self.reward = 0.0
        self.utility = 0.0
        self.extra: dict[str, float] = {}

    def view(self) -> ClientView:
        """Read-only facts mechanisms may use (cached while the client's state is unchanged)."""
        key = (
            self.epsilon_spent,
            self.participations,
            self.epsilon_after_next,
            self.link_up,
            self.epsilon_round,
        )
        if self._view is None or self._view_key != key:
            self._view_key = key
            self._view = self._make_view()
        return self._view

    def _make_view(self) -> ClientView:
        return ClientView(
            client_id=self.client_id,
            dataset_size=self.dataset_size,
            emd=self.emd,
            privacy_value=self.privacy_value,
            epsilon_total=self.epsilon_total,
            delta=self.delta,
            epsilon_spent=self.epsilon_spent,
            epsilon_round=self.epsilon_round,
            delta_round=self.delta_round,
            straggle_prob=self.straggle_prob,
            colluder=self.colluder,
            reachable=self.link_up,
            participations=self.participations,
            label_counts=self.label_counts,
            epsilon_after_next=self.epsilon_after_next,
        )

    def respond(self, offer: Offer, market: MarketView, me: ClientView | None = None) -> None:
        """Phase 3: the follower's move, by the scenario's policy (``me``: this round's view)."""
        if not self.link_up:
            self.response = Response(self.client_id, participate=False, reason="unreachable")
        elif self.client_id in offer.excluded:
            self.response = Response(self.client_id, participate=False, reason="excluded")
        else:
            me = me if me is not None else self.view()
            self.response = self.model.policy.respond(offer, me=me, market=market)
        self.participating = self.response.participate
        self.decline_reason = self.response.reason

    def record_release(self, *, epsilon_spent: float) -> None:
        """Account one released update: ε spent as its accountant now reports it."""
        self.epsilon_charged = epsilon_spent - self.epsilon_spent
        self.epsilon_spent = epsilon_spent
        self.participations += 1

    def settle(self, *, reward: float) -> None:
        """Phase 9: receive the payment; utility = reward − ν·ε_charged."""
        self.reward = reward
        self.utility = reward - self.privacy_value * self.epsilon_charged
