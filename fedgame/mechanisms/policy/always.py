"""Always participate: the client takes part whenever it can afford its round's privacy."""

from __future__ import annotations

from fedgame.registry import register
from fedgame.views import ClientView, MarketView, Offer, Response


@register("policy", "always")
class AlwaysParticipate:
    """Take part at the default per-round privacy level while the budget lasts.

    A client whose remaining budget cannot pay its per-round ε declines with reason ``budget``.
    """

    def __init__(self, config: object) -> None:
        del config

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        if not me.can_afford_next:
            return Response(me.client_id, participate=False, reason="budget")
        return Response(me.client_id, participate=True, epsilon=me.epsilon_round)
