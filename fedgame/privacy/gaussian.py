"""Local Gaussian mechanism with the classic calibration (the foundation's DP baseline)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, PositiveFloat, PositiveInt

from fedgame.privacy.accounting import check_supported
from fedgame.privacy.base import Charge, Charges, PrivacyPlan, clip_rows, gaussian_noise
from fedgame.privacy.calibrate import classic_gaussian_sigma
from fedgame.registry import register
from fedgame.views import ClientView, Response, RoundInfo, column_of, ids_of


@register("privacy", "gaussian")
class ClassicGaussian:
    """Clip each client's update to L2 norm C and add N(0, σ_k² I) before upload.

    Client k spends ε_k = ε_total,k / T and δ_k = δ_total,k / T per participation, where T is
    its planned number of participations (``participations``, default: rounds × the selection
    rule's expected fraction, rounded up); by basic composition T participations spend at most
    (ε_total, δ_total). σ_k = Δ·sqrt(2 ln(1.25/δ_k))/ε_k (Dwork & Roth 2014, Thm A.1), with
    Δ = C for add/remove-one-client adjacency or 2C for replace-one. The theorem assumes
    ε_k < 1; larger per-round ε is allowed with a warning (the bound is then heuristic).
    A policy may ask for another per-round ε in its response.
    """

    placement = "local"
    noise = "gaussian"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        clip: PositiveFloat = 1.0
        participations: PositiveInt | None = None
        adjacency: Literal["add_remove", "replace"] = "add_remove"
        accountant: str = "basic"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = config.accountant
        self.sensitivity = config.clip * (2.0 if config.adjacency == "replace" else 1.0)
        self._warned = False

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_supported(config.accountant, "gaussian", key=f"{key}.accountant")

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        t = self.config.participations or participations
        return epsilon_total / t, delta_total / t

    def _charge(self, epsilon: float, delta: float) -> tuple[Charge, float]:
        sigma = classic_gaussian_sigma(sensitivity=self.sensitivity, epsilon=epsilon, delta=delta)
        z = sigma / self.sensitivity
        return Charge("gaussian", epsilon=epsilon, delta=delta, noise_multiplier=z), sigma

    def _charges(self, epsilon: np.ndarray, delta: np.ndarray) -> tuple[Charges, np.ndarray]:
        """Charges and σ of many releases (the same formula as ``classic_gaussian_sigma``)."""
        valid = (epsilon > 0) & (delta > 0) & (delta < 1)
        if not valid.all():  # let the scalar formula raise its error for the first bad one
            j = int(np.flatnonzero(~valid)[0])
            self._charge(float(epsilon[j]), float(delta[j]))
        sigma = self.sensitivity * np.sqrt(2.0 * np.log(1.25 / delta)) / epsilon
        z = sigma / self.sensitivity
        return Charges("gaussian", epsilon, delta, z), sigma

    def next_charge(self, client: ClientView) -> Charge:
        return self._charge(client.epsilon_round, client.delta_round)[0]

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        """``next_charge`` of every client of ``clients``, as columns."""
        return self._charges(
            column_of(clients, "epsilon_round"), column_of(clients, "delta_round")
        )[0]

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        asked = column_of(responses, "epsilon")
        eps = np.where(np.isfinite(asked), asked, column_of(clients, "epsilon_round"))
        charges, sigmas = self._charges(eps, column_of(clients, "delta_round"))
        eps_max = float(eps.max(initial=0.0))
        if not self._warned and eps_max >= 1.0:
            self._warned = True
            warnings.warn(
                f"classic Gaussian calibration used with per-round epsilon up to {eps_max:.3g} "
                "(the bound assumes epsilon < 1)",
                stacklevel=2,
            )
        ids = tuple(ids_of(clients).tolist())
        return PrivacyPlan(ids, charges, sigmas, self.config.clip)

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        clipped = clip_rows(updates, self.config.clip)
        return clipped + gaussian_noise(
            updates.shape, plan.noise_std, like=updates, generator=generator
        )
