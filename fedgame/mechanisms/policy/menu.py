"""Followers that self-select from a screening menu (contracts, :mod:`fedgame.game.contracts`).

The offer's ``menu`` lists items (ρ_k, r_k); ``plan["phi"]`` is φ and ``plan["quadratic"]``
picks c(ρ) = ρ²/2 instead of ρ. Client i, of type θ_i = φ·ν_i, takes the item it can afford
(ρ_k ≤ its remaining budget) with the largest r_k − θ_i·c(ρ_k) and declines when that is
below 0 (Laffont & Martimort 2002 §2.3: truthful self-selection is what the menu's IC
constraints make optimal).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict

from fedgame import reads
from fedgame.game.contracts import Cost, self_select
from fedgame.mechanisms.policy.market import rho_left
from fedgame.registry import Example, register
from fedgame.views import ClientView, MarketView, Offer, Response, Responses, column_of, ids_of


@register("policy", "self_select", reads=(reads.PRIVACY_VALUE, *reads.BUDGET))
class SelfSelect:
    """Takes the menu item of largest utility within its budget, or declines.

    Declines with reason ``budget`` when no item is affordable (or the offer has no menu)
    and ``menu`` when every affordable item gives a negative utility. Chooses ρ
    (``chooses = "rho"``): the item's ρ sets the noise.

    Clients table: ``menu_item``, the index in ``Offer.menu`` of the item taken (NaN when
    the client declined).
    """

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

    chooses = "rho"
    example = Example({}, needs={"incentive": {"kind": "contract", "bins": 2, "lam": 0.01}})
    client_columns = ("menu_item",)

    def __init__(self, config: Config) -> None:
        del config

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        return self.respond_all(offer, clients=(me,), market=market)[0][0]

    def respond_all(
        self, offer: Offer, *, clients: Sequence[ClientView], market: MarketView
    ) -> tuple[Responses, dict[str, dict[int, float]]]:
        """Every client of ``clients`` at once, with the ``menu_item`` each one took."""
        ids = ids_of(clients)
        rho = np.array([item for item, _ in offer.menu], dtype=float)
        reward = np.array([r for _, r in offer.menu], dtype=float)
        phi = float(offer.plan.get("phi", 1.0))
        cost: Cost = "quadratic" if offer.plan.get("quadratic", 0.0) else "linear"
        theta = phi * column_of(clients, "privacy_value")
        left = rho_left(clients)
        index, _ = self_select(theta, rho, reward, left=left, cost=cost)
        take = index >= 0
        afford = (rho.size > 0) & (left >= (rho.min() if rho.size else math.inf) * (1 - 1e-12))
        reason = np.where(take, "", np.where(afford, "menu", "budget")).astype(object)
        chosen = np.where(take, rho[np.maximum(index, 0)] if rho.size else math.nan, math.nan)
        taken = dict(zip(ids[take].tolist(), index[take].astype(float).tolist(), strict=True))
        return Responses(ids, take, rho=chosen, reason=reason), {"menu_item": taken}
