"""No incentive: the server offers nothing and pays nothing."""

from __future__ import annotations

from collections.abc import Sequence

from fedgame.registry import register
from fedgame.views import MarketView, Offer, Response, RoundInfo, ids_of


@register("incentive", "none")
class NoIncentive:
    """Reward R_t = 0 every round; clients take part for free (altruistic baseline)."""

    def __init__(self, config: object) -> None:
        del config

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        return Offer(reward=0.0)

    def settle(
        self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo
    ) -> dict[int, float]:
        return dict.fromkeys(ids_of(delivered).tolist(), 0.0)
