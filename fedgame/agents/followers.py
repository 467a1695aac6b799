"""Phase 3 of a round: the followers answer the leader's offer, agent type by agent type."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedgame.agents.table import ClientTable
from fedgame.round_state import AgentGroup
from fedgame.views import MarketView, Offer, Responses, ids_of


def ask(
    groups: Sequence[AgentGroup],
    table: ClientTable,
    clients: Sequence[object],
    offer: Offer,
    market: MarketView,
) -> None:
    """Record every reachable, non-excluded client's answer to ``offer`` in ``table``.

    The followers get the offer without the leader's ``terms`` (:meth:`Offer.public`).
    Unreachable clients decline (``unreachable``), clients the leader excluded decline
    (``excluded``); the others are asked, a whole agent type at once when its policy answers
    in batch (``respond_all`` over the table's views), else one agent at a time. A type that
    answers for other clients than it was asked is an error.
    """
    offer = offer.public()  # the leader's terms are its own
    eligible = table.link_up.copy()
    if offer.excluded:
        excluded = np.fromiter(offer.excluded, np.int64, len(offer.excluded))
        table.decline_reason[excluded] = "excluded"
        eligible[excluded] = False
    everyone = bool(eligible.all())
    if not everyone:
        table.decline_reason[~table.link_up] = "unreachable"
    for group in groups:
        ids = group.ids if everyone else group.ids[eligible[group.ids]]
        if len(ids) == 0:
            continue
        if group.batched:
            # ids are sorted and distinct: all N of them are every client (plain copies)
            views = table.views() if len(ids) == len(table) else table.views(ids)
            answered = group.agent_type.policy.respond_all(offer, clients=views, market=market)
            if isinstance(answered, tuple):  # (responses, the policy's client columns)
                answered, per_client = answered
                table.write_metrics(per_client)
            responses = answered
        else:
            agents = [clients[i] for i in ids.tolist()]
            responses = Responses.of([a.respond(offer, market) for a in agents])  # type: ignore[attr-defined]
        if not np.array_equal(ids_of(responses), ids):
            raise RuntimeError(
                f"{group.agent_type.__name__} answered for other clients than it was asked"
            )
        table.record_responses(responses, fresh=True)
