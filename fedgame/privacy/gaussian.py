"""``gaussian``: local Gaussian mechanism, one calibrated release per participation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.base import Charges, PrivacyPlan, clip_rows, gaussian_noise
from fedgame.privacy.calibrate import analytic_gaussian_multipliers
from fedgame.privacy.levels import chosen_rho, following_rho
from fedgame.registry import register
from fedgame.scenario.planning import max_round_epsilon
from fedgame.views import ClientView, Response, RoundInfo, column_of, ids_of

if TYPE_CHECKING:
    import torch

Calibration = Literal["analytic", "classic"]
#: calibrations whose bound is a tail argument proven only for ε < 1
CLASSIC_TYPE = frozenset({"classic", "lightdp"})


def check_classic(
    calibration: str, allow_loose: bool, scenario: Any, *, participations: int | None, key: str
) -> None:
    """Refuse a classic-type bound where per-round ε reaches 1 unless the scenario allows it.

    The classic σ = Δ·sqrt(2 ln(1.25/δ))/ε (Dwork & Roth 2014, Thm A.1) is a theorem only for
    ε < 1; above it the guarantee is not proven (and fails for large ε). The accountant still
    reports the exact ε of the noise actually added, so budgets hold either way.
    """
    if calibration not in CLASSIC_TYPE or allow_loose:
        return
    eps = max_round_epsilon(scenario, participations)
    if eps >= 1.0:
        raise ScenarioError(
            f"{key}.calibration",
            calibration,
            f"its bound holds only for per-round epsilon < 1, and it reaches {eps:.3g} here "
            "(epsilon_total / planned participations); use calibration: analytic (exact for "
            f"every epsilon) or set {key}.allow_loose_classic: true",
        )


def classic_multipliers(epsilon: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """z = sqrt(2 ln(1.25/δ))/ε per release (Dwork & Roth 2014, Thm A.1)."""
    return np.sqrt(2.0 * np.log(1.25 / delta)) / epsilon


@register("privacy", "gaussian", reads=reads.CHARGES)
class GaussianMechanism:
    """Clip each client's update to L2 norm C and add N(0, σ_k² I) before upload.

    Client k spends ε_k = ε_total,k / T and δ_k = δ_total,k / T per participation, where T is
    its planned number of participations (``participations``, default: rounds × the selection
    rule's expected fraction, rounded up), so by basic composition T participations spend at
    most (ε_total, δ_total). ``calibration``:

    * ``analytic`` (default): the smallest σ making one release (ε_k, δ_k)-DP, from the exact
      privacy profile of the Gaussian mechanism (Balle & Wang 2018, Thm 8); valid for every ε.
    * ``classic``: σ_k = Δ·sqrt(2 ln(1.25/δ_k))/ε_k (Dwork & Roth 2014, Thm A.1), a theorem only
      for ε_k < 1: refused at validation when per-round ε reaches 1 unless
      ``allow_loose_classic: true``.

    Δ = C for add/remove-one-client adjacency or 2C for replace-one. A policy may ask for
    another per-round ε in its response. Whatever the calibration, each release is accounted
    by its noise multiplier z = σ/Δ (the ``basic`` accountant charges the exact ε of that noise
    at δ_k), so the reported ε spent is never below what the noise gives. A response that
    chooses a zCDP budget ρ (the QI-DPFL followers) gets exactly that: z = 1/sqrt(2ρ)
    (:mod:`fedgame.privacy.levels`), whatever the calibration.
    """

    placement = "local"
    noise = "gaussian"
    follows = frozenset({"epsilon", "rho"})

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        clip: PositiveFloat = Field(1.0, description="L2 norm C each update is clipped to")
        participations: PositiveInt | None = Field(
            None,
            description=(
                "planned releases T each client's budget is split over (default: rounds x "
                "expected selected fraction)"
            ),
        )
        adjacency: Literal["add_remove", "replace"] = Field(
            "add_remove",
            description="neighbouring datasets: add_remove (sensitivity C) or replace (2C)",
        )
        calibration: Calibration = Field(
            "analytic",
            description=(
                "analytic (exact Gaussian profile, any epsilon) or classic (Dwork-Roth bound, "
                "epsilon < 1)"
            ),
        )
        allow_loose_classic: bool = Field(
            False,
            description=(
                "allow the classic bound where a per-round epsilon reaches 1 (not a proven "
                "guarantee)"
            ),
        )
        accountant: str = Field(
            "basic",
            description="accountant plug-in that prices every release (fedgame list accountant)",
        )

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = make_accountant(config.accountant)
        self.sensitivity = config.clip * (2.0 if config.adjacency == "replace" else 1.0)

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_describes(config.accountant, "gaussian", key=f"{key}.accountant")
        check_classic(
            config.calibration,
            config.allow_loose_classic,
            scenario,
            participations=config.participations,
            key=key,
        )

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        t = self.config.participations or participations
        return epsilon_total / t, delta_total / t

    def multipliers(self, epsilon: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """Noise multiplier z = σ/Δ of releases at per-round (ε, δ), by the calibration."""
        if self.config.calibration == "analytic":
            return analytic_gaussian_multipliers(epsilon, delta)
        if not self.config.allow_loose_classic and np.any(epsilon >= 1.0):
            raise ScenarioError(
                "privacy.calibration",
                "classic",
                f"a release asked for per-round epsilon {float(epsilon.max()):.3g} >= 1, where "
                "the classic bound does not hold; use calibration: analytic or "
                "allow_loose_classic: true",
            )
        return classic_multipliers(epsilon, delta)

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        eps, delta = column_of(clients, "epsilon_round"), column_of(clients, "delta_round")
        return Charges("gaussian", noise_multiplier=self.multipliers(eps, delta), delta=delta)

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        asked = column_of(responses, "epsilon")
        eps = np.where(np.isfinite(asked), asked, column_of(clients, "epsilon_round"))
        delta = column_of(clients, "delta_round")
        z = following_rho(
            chosen_rho(responses), lambda rows: self.multipliers(eps[rows], delta[rows])
        )
        ids = tuple(ids_of(clients).tolist())
        charges = Charges("gaussian", noise_multiplier=z, delta=delta)
        return PrivacyPlan(ids, charges, z * self.sensitivity, self.config.clip)

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        clipped = clip_rows(updates, self.config.clip)
        return clipped + gaussian_noise(
            updates.shape, plan.noise_std, like=updates, generator=generator
        )
