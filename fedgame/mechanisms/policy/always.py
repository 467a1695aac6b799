"""Always participate: the client takes part whenever it can afford its round's privacy."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedgame.registry import register
from fedgame.views import (
    ClientView,
    MarketView,
    Offer,
    Response,
    Responses,
    can_afford,
    column_of,
    ids_of,
)


@register("policy", "always")
class AlwaysParticipate:
    """Take part at the default per-round privacy level while the budget lasts.

    A client whose remaining budget cannot pay its per-round ε declines with reason ``budget``.
    It chooses no level of its own (``chooses = "default"``): the mechanism's plan sets it.
    """

    chooses = "default"

    def __init__(self, config: object) -> None:
        del config

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        if not me.can_afford_next:
            return Response(me.client_id, participate=False, reason="budget")
        return Response(me.client_id, participate=True, epsilon=me.epsilon_round)

    def respond_all(
        self, offer: Offer, *, clients: Sequence[ClientView], market: MarketView
    ) -> Responses:
        """``respond`` for every client of ``clients`` at once."""
        epsilon_round = column_of(clients, "epsilon_round")
        ok = can_afford(
            column_of(clients, "epsilon_after_next"),
            column_of(clients, "epsilon_spent"),
            epsilon_round,
            column_of(clients, "epsilon_total"),
        )
        eps = np.where(ok, epsilon_round, np.nan)
        return Responses(ids_of(clients), ok, eps, why="budget")
