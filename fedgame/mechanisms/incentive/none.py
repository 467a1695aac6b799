"""No incentive: the server offers nothing and pays nothing."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fedgame.mechanisms.base import FaultDraw, Settlement
from fedgame.registry import register
from fedgame.views import MarketView, Offer, Response, RoundInfo, ids_of


@register("incentive", "none")
class NoIncentive:
    """Reward R_t = 0 every round; clients take part for free (altruistic baseline).

    It buys nothing: its settlement's outcome is None every round (the economics columns are
    zeros but for the value of the accuracy gained), and no report of a client changes what
    it is paid (deviation gains 0). It keeps no state.
    """

    reports_outcome = True

    def __init__(self, config: object) -> None:
        del config

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        return Offer(reward=0.0)

    def settle(self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo) -> Settlement:
        """Nothing bought, nothing paid: 0 to every delivered client, no outcome."""
        return Settlement(dict.fromkeys(ids_of(delivered).tolist(), 0.0), offer)

    def deviation_gains(
        self,
        ids: np.ndarray,
        *,
        settlement: Settlement,
        faults: FaultDraw | None = None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """0 for everyone: the payment is 0 whatever a client does."""
        return np.zeros(np.asarray(ids).size)
