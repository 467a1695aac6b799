"""No incentive: the server offers nothing and pays nothing."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedgame.game.economics import RoundOutcome
from fedgame.registry import register
from fedgame.views import MarketView, Offer, Response, RoundInfo, ids_of


@register("incentive", "none")
class NoIncentive:
    """Reward R_t = 0 every round; clients take part for free (altruistic baseline).

    It buys nothing: its outcome is None every round (the economics columns are zeros but for
    the value of the accuracy gained), and no report of a client changes what it is paid
    (deviation gains 0).
    """

    def __init__(self, config: object) -> None:
        del config

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        return Offer(reward=0.0)

    def settle(
        self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo
    ) -> dict[int, float]:
        return dict.fromkeys(ids_of(delivered).tolist(), 0.0)

    def outcome(self) -> RoundOutcome | None:
        """Nothing bought, nothing paid."""
        return None

    def deviation_gains(self, ids: np.ndarray, *, rng: np.random.Generator) -> np.ndarray:
        """0 for everyone: the payment is 0 whatever a client does."""
        return np.zeros(np.asarray(ids).size)
