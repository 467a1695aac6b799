"""Boundedly rational followers: learn the zCDP budget from aggregate feedback.

A learning client does not know the others' privacy values ν_j (note 003 §8 item 15). After
each round the server broadcasts the total delivered budget Σρ (``Offer.plan["sum_rho_prev"]``);
a client that delivered last round infers the others' total S_-i = Σρ - ρ_i, otherwise it takes
S_-i = Σρ. It then takes a projected gradient step on its realised utility of last round, in
log space and relative to its marginal cost:

    m = R·S_-i / (S²·φ·ν_i) - 1     (relative marginal utility, 0 at Theorem 1's FOC, Eq. 21)
    x ← x·exp(η·clip(m, -1, 1)),    ρ_i = x·R_t

where x = ρ_i/R (equilibrium budgets are proportional to R, Theorem 1, so x is what is learned
while R_t grows). For diagnostics only, the policy also computes the complete-information
equilibrium ρ* and records per round ``learning_distance`` = Σ|ρ - ρ*| / Σρ* over the players,
and per client ``rho_equilibrium`` and ``eq_distance`` = |ρ_i - ρ_i*| / max ρ*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

from fedgame.mechanisms.policy.game import _Cached, rho_remaining
from fedgame.registry import register
from fedgame.views import ClientView, MarketView, Offer, Response


def log_gradient_step(
    x: float, *, reward: float, rho: float, others: float, nu: float, phi: float, eta: float
) -> float:
    """One learning step on x = ρ/R from last round's (R, ρ, S_-i); see the module docstring.

    The relative marginal utility m uses the derivative of Eq. 16 with linear cost (Eq. 21).
    """
    total = rho + others
    if others <= 0 or total <= 0:
        return x * math.exp(eta)  # alone last round: any positive budget wins everything
    m = reward * others / (total**2 * phi * nu) - 1.0
    return x * math.exp(eta * min(max(m, -1.0), 1.0))


@dataclass
class _State:
    x: float
    rho: float = 0.0
    reward: float = 0.0
    participations: int = 0


@register("policy", "learning")
class Learning(_Cached):
    """Projected log-gradient ascent on realised utility from the broadcast Σρ (bounded info)."""

    round_columns = ("learning_distance",)
    client_columns = ("rho_equilibrium", "eq_distance")

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        eta: float = Field(0.5, gt=0, le=2)
        init: PositiveFloat = 0.5
        rho_min: PositiveFloat = 1e-12

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.config = config
        self.state: dict[int, _State] = {}
        self._played: dict[int, float] = {}
        self._round = -1

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        if market.info.round != self._round:
            self._round, self._played = market.info.round, {}
        star = self.equilibrium_for(offer, market)
        if offer.reward <= 0 or me.client_id not in star:
            return Response(me.client_id, participate=False, reason="no_reward")
        phi = float(offer.plan.get("phi", 1.0))
        n = max(len(star), 2)
        st = self.state.get(me.client_id)
        if st is None:  # start at init × the homogeneous-ν equilibrium share, own ν only
            st = _State(x=self.config.init * (n - 1) / (n**2 * phi * me.privacy_value))
            self.state[me.client_id] = st
        else:
            total = float(offer.plan.get("sum_rho_prev", math.nan))
            delivered = me.participations > st.participations
            if math.isfinite(total) and st.reward > 0:
                others = total - st.rho if delivered else total
                st.x = log_gradient_step(
                    st.x,
                    reward=st.reward,
                    rho=st.rho if delivered else st.x * st.reward,
                    others=max(others, 0.0),
                    nu=me.privacy_value,
                    phi=phi,
                    eta=self.config.eta,
                )
        st.x = min(max(st.x, self.config.rho_min / offer.reward), 1.0 / (phi * me.privacy_value))
        rho = st.x * offer.reward
        st.rho, st.reward, st.participations = rho, offer.reward, me.participations
        self._played[me.client_id] = rho
        if rho > rho_remaining(me):
            return Response(me.client_id, participate=False, reason="budget")
        return Response(me.client_id, participate=True, rho=rho)

    def _distances(self) -> tuple[float, dict[int, float], dict[int, float]]:
        star = self._value
        ids = [i for i in star if i in self._played]
        if not ids:
            return math.nan, {}, {}
        rho = np.array([self._played[i] for i in ids])
        ref = np.array([star[i] for i in ids])
        scale = max(float(ref.max()), 1e-300)
        dist = float(np.abs(rho - ref).sum() / max(ref.sum(), 1e-300))
        return (
            dist,
            dict(zip(ids, ref.tolist())),
            dict(zip(ids, (np.abs(rho - ref) / scale).tolist())),
        )

    def round_metrics(self) -> dict[str, float]:
        return {"learning_distance": self._distances()[0]}

    def client_metrics(self) -> dict[str, dict[int, float]]:
        _, ref, dist = self._distances()
        return {"rho_equilibrium": ref, "eq_distance": dist}
