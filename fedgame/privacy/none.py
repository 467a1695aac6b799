"""No privacy: updates pass through unchanged and cost nothing."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from fedgame.privacy.accountants import make_accountant
from fedgame.privacy.base import Charges, PrivacyPlan
from fedgame.registry import register
from fedgame.views import ClientView, Response, RoundInfo, ids_of

if TYPE_CHECKING:
    import torch


@register("privacy", "none")
class NoPrivacy:
    """Non-private baseline: no clipping, no noise, ε spent stays 0."""

    placement = "none"
    noise = "none"
    #: no noise at any level: the reference world without DP, where a level buys no noise
    follows = frozenset({"epsilon", "rho"})

    def __init__(self, config: object) -> None:
        del config
        self.accountant = make_accountant("basic")

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros_like(epsilon_total), np.zeros_like(delta_total)

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        return Charges("none", size=len(clients))

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        k = len(clients)
        return PrivacyPlan(tuple(ids_of(clients).tolist()), Charges("none", size=k), np.zeros(k))

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        return updates
