"""Local Gaussian mechanism under ρ-zCDP with the client's chosen budget (QI-DPFL, paper 003)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

from fedgame import reads
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.base import Charges, PrivacyPlan, clip_rows, gaussian_noise
from fedgame.privacy.calibrate import zcdp_to_epsilon
from fedgame.registry import Example, register
from fedgame.views import ClientView, Response, RoundInfo, column_of, ids_of

if TYPE_CHECKING:
    import torch


@register("privacy", "zcdp_gaussian", reads=reads.CHARGES)
class ZcdpGaussian:
    """Clip each update to L2 norm C, add N(0, σ_i² I) with σ_i² = 2C²/(ρ_i·|D_i|²).

    Paper 003 Eq. 10 (sensitivity 2C/|D_i|, Corollary 1). ρ_i is the budget in the client's
    response (``Response.rho``, chosen in the Stackelberg game); a response without one
    (``nan``) uses the fixed ``rho``. Each release is charged ρ_i to the ``zcdp`` accountant,
    which composes over the client's rounds (note 003 §2, §8 item 4): the release is a Gaussian
    of multiplier z = 1/sqrt(2ρ_i) (ρ = 1/(2z²), Bun & Steinke Prop. 1.6). ``next_charges``
    (the price clients see) uses the fixed ``rho``; the default per-round ε stored on clients
    is the ε of one such release at the client's δ (zCDP budgets add up in ρ, not in ε).
    """

    placement = "local"
    noise = "gaussian"
    follows = frozenset({"rho"})
    example = Example({"rho": 2.0})

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        clip: PositiveFloat = Field(
            1.0, description="L2 clipping norm C (sensitivity 2C/|D_i|, paper 003 Eq. 10)"
        )
        rho: PositiveFloat = Field(
            0.1, description="zCDP budget rho per release when the response names none"
        )
        accountant: str = Field(
            "zcdp",
            description="accountant plug-in that prices every release (fedgame list accountant)",
        )

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = make_accountant(config.accountant)

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_describes(config.accountant, "gaussian", key=f"{key}.accountant")

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        delta_round = np.asarray(delta_total, dtype=float) / participations
        eps = [zcdp_to_epsilon(self.config.rho, delta=float(d)) for d in delta_total]
        return np.array(eps, dtype=float), delta_round

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        z = 1.0 / math.sqrt(2.0 * self.config.rho)
        return Charges("gaussian", noise_multiplier=z, delta=column_of(clients, "delta_round"))

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        asked = column_of(responses, "rho")
        rho = np.where(np.isfinite(asked) & (asked > 0), asked, self.config.rho)
        sizes = np.maximum(column_of(clients, "dataset_size"), 1.0)
        sigma = np.sqrt(2.0 * self.config.clip**2 / (rho * sizes**2))  # Eq. 10
        z = 1.0 / np.sqrt(2.0 * rho)  # σ / Δ with Δ = 2C/|D_i|
        ids = tuple(ids_of(clients).tolist())
        charges = Charges("gaussian", noise_multiplier=z, delta=column_of(clients, "delta_round"))
        return PrivacyPlan(ids, charges, sigma, self.config.clip)

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        clipped = clip_rows(updates, self.config.clip)
        return clipped + gaussian_noise(
            updates.shape, plan.noise_std, like=updates, generator=generator
        )
