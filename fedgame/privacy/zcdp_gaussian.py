"""Local Gaussian mechanism under ρ-zCDP with the client's chosen budget (QI-DPFL, paper 003)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, PositiveFloat

from fedgame.privacy.accounting import check_supported
from fedgame.privacy.base import Charge, PrivacyPlan, clip_rows, gaussian_noise
from fedgame.privacy.calibrate import zcdp_gaussian_sigma, zcdp_to_epsilon
from fedgame.registry import register
from fedgame.views import ClientView, Response, RoundInfo


@register("privacy", "zcdp_gaussian")
class ZcdpGaussian:
    """Clip each update to L2 norm C, add N(0, σ_i² I) with σ_i² = 2C²/(ρ_i·|D_i|²).

    Paper 003 Eq. 10 (sensitivity 2C/|D_i|, Corollary 1). ρ_i is the budget in the client's
    response (``Response.rho``, chosen in the Stackelberg game); a response without one
    (``nan``) uses the fixed ``rho``. Each release is charged ρ_i to the ``zcdp`` accountant,
    which composes over the client's rounds (note 003 §2, §8 item 4). ``next_charge`` (the budget
    check) uses the fixed ``rho``; the default per-round ε stored on clients is the ε of one
    such release at the client's δ (zCDP budgets add up in ρ, not in ε).
    """

    placement = "local"
    noise = "gaussian"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        clip: PositiveFloat = 1.0
        rho: PositiveFloat = 0.1
        accountant: str = "zcdp"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = config.accountant

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_supported(config.accountant, "gaussian", key=f"{key}.accountant")

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        eps = [zcdp_to_epsilon(self.config.rho, delta=float(d)) for d in delta_total]
        return np.array(eps, dtype=float), np.asarray(delta_total, dtype=float)

    def _charge(self, rho: float, dataset_size: int) -> tuple[Charge, float]:
        sigma = zcdp_gaussian_sigma(clip=self.config.clip, rho=rho, dataset_size=dataset_size)
        z = 1.0 / math.sqrt(2.0 * rho)  # σ / Δ with Δ = 2C/|D_i|
        return Charge("gaussian", noise_multiplier=z, rho=rho), sigma

    def next_charge(self, client: ClientView) -> Charge:
        return self._charge(self.config.rho, max(client.dataset_size, 1))[0]

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        charges, sigmas = [], []
        for c, r in zip(clients, responses):
            rho = r.rho if math.isfinite(r.rho) and r.rho > 0 else self.config.rho
            charge, sigma = self._charge(rho, max(c.dataset_size, 1))
            charges.append(charge)
            sigmas.append(sigma)
        ids = tuple(c.client_id for c in clients)
        return PrivacyPlan(ids, tuple(charges), np.array(sigmas, dtype=float), self.config.clip)

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        clipped = clip_rows(updates, self.config.clip)
        return clipped + gaussian_noise(
            updates.shape, plan.noise_std, like=updates, generator=generator
        )
