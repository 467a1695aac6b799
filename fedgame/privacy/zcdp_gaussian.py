"""``zcdp_gaussian``: the local Gaussian core under ρ-zCDP (QI-DPFL, paper 003), a preset."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, PositiveFloat

from fedgame import reads
from fedgame.privacy.calibrate import zcdp_to_epsilon
from fedgame.privacy.calibrations import CalibrationName
from fedgame.privacy.gaussian_core import GaussianCore
from fedgame.privacy.settings import PrivacySettings
from fedgame.registry import Example, register


class ZcdpSettings(PrivacySettings):
    """``zcdp_gaussian``'s defaults: paper 003's record level, the ``qi_dpfl`` calibration."""

    level: Literal["record"] = Field(  # type: ignore[assignment]
        "record",
        description=(
            "record: the whole update clipped to C, paper 003's record-level sensitivity "
            "2C/|D_i| (Corollary 1)"
        ),
    )
    adjacency: Literal["replace"] = Field(  # type: ignore[assignment]
        "replace", description="replace-one record (the factor 2 of 2C/|D_i|)"
    )
    calibration: CalibrationName = Field(
        "qi_dpfl",
        description="qi_dpfl: z = 1/sqrt(2 rho), sigma by Eq. 10 (fedgame list calibration)",
    )
    accountant: str | None = Field(
        "zcdp",
        description="accountant plug-in that prices every release (fedgame list accountant)",
    )
    rho: PositiveFloat = Field(
        0.1, description="zCDP budget rho per release when the response names none"
    )


@register("privacy", "zcdp_gaussian", reads=reads.CHARGES)
class ZcdpGaussian(GaussianCore):
    """Clip each update to L2 norm C, add N(0, σ_i² I) with σ_i² = 2C²/(ρ_i·|D_i|²).

    A preset of the local Gaussian core (:mod:`fedgame.privacy.gaussian_core`) with the
    ``qi_dpfl`` calibration: paper 003 Eq. 10 (sensitivity 2C/|D_i|, Corollary 1). ρ_i is the
    budget in the client's response (``Response.rho``, chosen in the Stackelberg game); a
    response without one (``nan``) uses the fixed ``rho``. Each release is charged ρ_i to the
    ``zcdp`` accountant, which composes over the client's rounds (note 003 §2, §8 item 4): the
    release is a Gaussian of multiplier z = 1/sqrt(2ρ_i) (ρ = 1/(2z²), Bun & Steinke Prop.
    1.6). ``next_charges`` (the price clients see) uses the fixed ``rho``; the default
    per-round ε stored on clients is the ε of one such release at the client's δ (zCDP
    budgets add up in ρ, not in ε).
    """

    follows = frozenset({"rho"})
    example = Example({"rho": 2.0})
    Config = ZcdpSettings  # type: ignore[assignment]  # narrows level and adjacency
    kind = "zcdp_gaussian"
    config: ZcdpSettings

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(ε of one ρ-zCDP release at the client's δ, δ/T): Bun & Steinke Prop. 1.3."""
        t = self.participation.set_scenario(participations)  # set-up: the scenario-wide T
        delta_round = np.asarray(delta_total, dtype=float) / t
        eps = [zcdp_to_epsilon(self.config.rho, delta=float(d)) for d in delta_total]
        return np.array(eps, dtype=float), delta_round
