"""Protocols every plug-in family implements, and the optional capabilities a plug-in declares.

Mechanisms see read-only views (``fedgame.views``), never agent objects, and take every random
draw from a generator passed in by keyword. A plug-in written outside fedgame imports these
through :mod:`fedgame.kit`; docs/plugins.md ("Writing a mechanism") walks through a worked
incentive and policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from fedgame.views import (
    ClientValues,
    ClientView,
    MarketView,
    Offer,
    Response,
    Responses,
    RoundInfo,
    Selection,
    SetupContext,
)

if TYPE_CHECKING:
    import torch

    from fedgame.game.economics import RoundOutcome


class SelectionPolicy(Protocol):
    """Server rule choosing the round's participants among reachable responders.

    ``select`` returns the :class:`Selection`, or ``(selection, metrics)``: the round metrics
    it measured, for the ``round_columns`` it declares (:func:`split_metrics`).
    """

    def select(
        self, candidates: Sequence[ClientView], *, info: RoundInfo, rng: np.random.Generator
    ) -> Selection: ...

    def expected_fraction(self, num_clients: int) -> float:
        """Expected share of clients selected per round (for planning privacy budgets)."""
        ...


class IncentiveMechanism(Protocol):
    """The Stackelberg leader: announces a reward, then pays for delivered work.

    ``settle`` gets back the offer it made (with its ``terms``) and returns a
    :class:`Settlement`, or a plain ``{client id: payment}`` (no metrics, no outcome).
    """

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer: ...

    def settle(
        self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo
    ) -> Settlement | dict[int, float]: ...


@dataclass(frozen=True)
class Settlement:
    """What an incentive's ``settle`` returns (phase 9): the round as the leader closed it.

    ``payments`` by client id (exactly the delivered ids); ``offer`` the offer settled (its
    ``terms`` included, for the deviation search); ``outcome`` the round's purchase (None:
    nothing bought; read by the economics columns when the incentive declares
    :class:`ReportsOutcome`); ``round_metrics`` / ``client_metrics`` the values of the
    incentive's declared ``round_columns`` / ``client_columns`` (the model writes them as
    phase 9 ends; a ``ClientValues`` column does not make its clients active, a plain mapping does).
    """

    payments: Mapping[int, float]
    offer: Offer = field(default_factory=Offer)
    outcome: RoundOutcome | None = None
    round_metrics: Mapping[str, float] = field(default_factory=dict)
    client_metrics: Mapping[str, Mapping[int, float]] = field(default_factory=dict)


def settlement_of(result: Settlement | Mapping[int, float], offer: Offer) -> Settlement:
    """``settle``'s result as a :class:`Settlement` (a plain mapping: payments only)."""
    if isinstance(result, Settlement):
        return result
    return Settlement(dict(result), offer)


@dataclass(frozen=True)
class Cleared:
    """What ``ClearsMarket.clear`` returns: the ``winners`` (client ids) and the ``offer``
    with the terms the clearing fixed (bids, prices, winners), which ``settle`` is given."""

    winners: np.ndarray
    offer: Offer


@dataclass(frozen=True)
class Valuation:
    """What ``ValuesContributions.value_contributions`` returns (phase 8): each sender's
    ``contributions`` and the estimate's ``metrics``; the server hands it to ``settle``."""

    contributions: Mapping[int, float]
    metrics: Mapping[str, float] = field(default_factory=dict)


class ClientPolicy(Protocol):
    """A follower: decides participation and privacy level given the offer.

    ``chooses`` declares the privacy level its responses name (``"default"``, ``"rho"`` or
    ``"epsilon"``): validation checks that the privacy mechanism's noise follows it
    (:mod:`fedgame.privacy.levels`).
    """

    chooses: str

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response: ...


class Aggregator(Protocol):
    """Combines the received client updates [K, P] into one update [P].

    ``clients`` are the senders of the rows of ``updates``; ``dropped`` the selected clients
    whose update never arrived (stragglers), for aggregators that must know (secure
    aggregation); ``rng`` the round's ``masks`` stream and ``faults`` the round's fault draw
    (its failed client-client links), both handed only to aggregators that declare
    :class:`DrawsMasks` (None for the others). Returning ``None`` means the round's
    aggregation failed: the global model is left unchanged and the round is flagged. It may
    return ``(update, metrics)``: the round metrics it measured (:func:`split_metrics`).
    """

    def aggregate(
        self,
        updates: torch.Tensor,
        *,
        clients: Sequence[ClientView],
        dropped: Sequence[ClientView] = (),
        rng: np.random.Generator | None = None,
        faults: FaultDraw | None = None,
    ) -> torch.Tensor | tuple[torch.Tensor | None, Mapping[str, float]] | None: ...


@dataclass(frozen=True)
class FaultDraw:
    """One round's faults: which client-server links are up, who straggles.

    Arrays are indexed by client id. ``failed_edges`` lists client-client links down this
    round; ``details`` carries model-specific facts (e.g. compute times) for logging.
    """

    link_up: np.ndarray
    straggler: np.ndarray
    failed_edges: tuple[tuple[int, int], ...] = ()
    details: Mapping[str, Any] | None = None


class FaultModel(Protocol):
    """Draws the round's link failures and stragglers (``graph``: the client topology)."""

    def draw(
        self,
        clients: Sequence[ClientView],
        *,
        graph: Any,
        info: RoundInfo,
        rng: np.random.Generator,
    ) -> FaultDraw: ...


@runtime_checkable
class Preparable(Protocol):
    """Capability of any plug-in: ``prepare`` is called once before round 1."""

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None: ...


@runtime_checkable
class DeclaresRoundColumns(Protocol):
    """Capability: adds ``round_columns`` to the rounds table. Their values are the metrics
    the plug-in's phase returns with its result (``(result, metrics)``), or, for a plug-in
    that also declares :class:`ReportsRounds`, its ``round_metrics()``."""

    round_columns: tuple[str, ...]


@runtime_checkable
class DeclaresClientColumns(Protocol):
    """Capability: adds ``client_columns`` to the clients table. Their values come with a
    phase's result (a policy's ``respond_all`` may return ``(responses, client_metrics)``), or
    from ``client_metrics()`` (:class:`ReportsClients`) or ``draw_metrics(draw)``
    (:class:`ReportsDraw`)."""

    client_columns: tuple[str, ...]


@runtime_checkable
class ReportsRounds(Protocol):
    """Capability: adds ``round_columns`` to the rounds table (values from ``round_metrics``,
    read once the round is over)."""

    round_columns: tuple[str, ...]

    def round_metrics(self) -> Mapping[str, float]: ...


@runtime_checkable
class ReportsClients(Protocol):
    """Capability: adds ``client_columns`` to the clients table (``{column: {id: value}}``).

    A plain mapping makes its clients active this round (an ``active`` clients table keeps
    their rows); a ``ClientValues`` column (every client's value, e.g. a planned count) is
    written without doing so, so the table stays as small as the memory estimate counts.
    """

    client_columns: tuple[str, ...]

    def client_metrics(self) -> Mapping[str, Mapping[int, float]]: ...


@runtime_checkable
class WeightedSumAggregator(Protocol):
    """Capability of an aggregator: the update is Σ_k w_k u_k / Σ_k w_k with these weights.

    Central noise sizes its sensitivity from them; secure aggregation can wrap such an
    aggregator (its sum decomposes over clients).
    """

    def weights(self, clients: Sequence[ClientView]) -> np.ndarray: ...


@runtime_checkable
class ReportsOutcome(Protocol):
    """Capability of an incentive: ``reports_outcome = True``, its :class:`Settlement`
    carries the round's allocation and payments (``outcome``).

    The outcome is read in phase 10 (collect); the economics columns of the rounds table
    (server cost, client surplus, welfare, IR violations) are computed from it
    (:mod:`fedgame.game.economics`). None: nothing was bought this round.
    """

    reports_outcome: bool


@runtime_checkable
class ClearsMarket(Protocol):
    """Capability of an incentive: it allocates after the bids (an auction).

    ``clear(offer, responses, *, info)`` is called at the end of phase 3 with every client's
    response (bids in ``Responses.bid``) and returns a :class:`Cleared`: the winners' ids and
    the offer with the terms the clearing fixed (the server settles that offer). The model
    makes every other willing client decline with reason ``not allocated`` (it does not
    train). A bare array of winners is read as ``Cleared(winners, offer)``.
    """

    def clear(self, offer: Offer, responses: Responses, *, info: RoundInfo) -> Cleared: ...


@runtime_checkable
class MeasuresDeviation(Protocol):
    """Capability of an incentive: ex-post regret of truthful play, by a deviation search.

    ``deviation_gains(ids, *, settlement, faults, rng)`` returns, for each client in ``ids``
    (a sample of this round's clients), the largest utility gain it could have had by any
    other report or action the family allows (a bid, a menu item, a privacy level), holding
    the others' moves and the leader's rule fixed; 0 where truthful play was a best response.
    Money units. It reads the round from ``settlement`` (the :class:`Settlement` its
    ``settle`` returned, the offer's terms included) and ``faults`` (the round's
    :class:`FaultDraw`, None where there is none), not from state kept on the incentive.
    """

    def deviation_gains(
        self,
        ids: np.ndarray,
        *,
        settlement: Settlement,
        faults: FaultDraw | None,
        rng: np.random.Generator,
    ) -> np.ndarray: ...


@runtime_checkable
class ValuesContributions(Protocol):
    """Capability of an incentive: values the round's delivered updates (phase 8).

    Before the aggregate is applied, the model hands it a
    :class:`~fedgame.learning.coalitions.CoalitionEvaluator` over the delivered updates
    (``evaluator(masks)``: v(S) of coalitions, batched) and their senders' ``ids`` (the
    evaluator's players, in order). It returns a :class:`Valuation` (each sender's estimated
    contribution, e.g. a Shapley value, and the estimate's metrics), a bare ``{id: value}``,
    or None; the model keeps the contributions as ``RoundState.contributions``, and the server
    hands the valuation to the incentive's ``settle`` (keyword ``valuation``; None in a round
    with nothing valued).
    """

    def value_contributions(
        self, evaluator: Any, ids: np.ndarray, *, info: RoundInfo, rng: np.random.Generator
    ) -> Valuation | dict[int, float] | None: ...


@runtime_checkable
class DrawsMasks(Protocol):
    """Capability of an aggregator: it draws from the round's ``masks`` stream (secure
    aggregation's pairwise mask seeds). Only such an aggregator is handed an ``rng`` and the
    round's ``faults`` (which client-client links are down decides whether the masks can be
    recovered); for the others the stream is never derived (a round saves building a
    generator it would not use).
    """

    draws_masks: bool


@runtime_checkable
class StragglerLaw(Protocol):
    """Capability of a fault model: the law of the number of stragglers among ``clients``."""

    def straggler_pmf(self, clients: Sequence[ClientView], *, graph: Any = None) -> np.ndarray: ...


@runtime_checkable
class BoundsStragglers(Protocol):
    """Capability of a fault model: at most ``max_stragglers`` stragglers a round (S_bar)."""

    max_stragglers: int


@runtime_checkable
class ParticipationPlanner(Protocol):
    """Capability of a selection rule: each client's planned releases T_n and budget share."""

    def planned_participations(self, client_id: int) -> int: ...

    def budget_fraction(self, client_id: int) -> float: ...


@runtime_checkable
class ReportsLossBound(Protocol):
    """Capability of a selection rule: released losses bounded by Θ at a round (paper 000)."""

    def loss_bound(self, round_index: int) -> float: ...


@runtime_checkable
class ReportsDraw(Protocol):
    """Capability of a fault model: client columns computed from its round's draw (e.g. each
    client's compute and finish times), asked with the draw when the round is collected; a
    ``ClientValues`` column is written without making its clients active."""

    client_columns: tuple[str, ...]

    def draw_metrics(self, draw: FaultDraw) -> Mapping[str, ClientValues]: ...


@runtime_checkable
class ObservesFaults(Protocol):
    """Capability of any plug-in: told the round's fault draw once uploads are over (phase 7).

    The straggler draw is decided in phase 1 but no agent can know it before the upload; a
    mechanism that must know who straggled (to unmask a secure sum, to measure the noise left
    in the aggregate) receives it here, as an argument, not by reading the fault model.
    """

    def observe_faults(self, draw: FaultDraw, *, info: RoundInfo) -> None: ...


@runtime_checkable
class SelectsK(Protocol):
    """Capability of a selection rule's config: ``k`` clients a round; the memory estimate reads it.

    ``k`` bounds the clients trained at once (draws with replacement may repeat a client).
    """

    @property
    def k(self) -> int: ...
