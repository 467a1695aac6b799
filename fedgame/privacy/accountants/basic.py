"""``basic``: basic composition, the per-release (ε, δ) add up (Dwork & Roth 2014, Thm 3.16).

Each release spends the δ share its mechanism allotted to it (``Charge.delta``) and the exact
ε of that release at that δ: a Gaussian release of ``steps`` steps with multiplier z is one
Gaussian of multiplier z/sqrt(steps), whose ε comes from its exact privacy profile (the
analytic Gaussian mechanism, Balle & Wang 2018, Thm 8), valid for every ε; a Laplace release is
steps/z-DP with δ = 0. ε spent is the sum of ε while the summed δ fits in the client's δ, and
∞ once it does not. Subsampled releases are not described (use ``rdp`` or ``pld``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedgame.privacy.accountants.base import EXCEED_RTOL, StateAccountant
from fedgame.privacy.base import Charges
from fedgame.privacy.calibrate import analytic_gaussian_epsilons
from fedgame.registry import register


def gaussian_release_epsilon(
    noise_multiplier: np.ndarray, steps: np.ndarray, delta: np.ndarray
) -> np.ndarray:
    """Exact ε at ``delta`` of ``steps`` Gaussian steps of multiplier z (one of z/sqrt(steps)).

    Memoised per (z/sqrt(steps), δ): a run prices the same releases round after round.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        z_eff = np.asarray(noise_multiplier, float) / np.sqrt(np.asarray(steps, float))
    return analytic_gaussian_epsilons(z_eff, np.asarray(delta, float))


@register("accountant", "basic")
class BasicAccountant(StateAccountant):
    """Basic composition of per-release (ε, δ): what Laplace and per-round Gaussians use."""

    name: ClassVar[str] = "basic"
    families: ClassVar[frozenset[str]] = frozenset({"gaussian", "laplace"})
    width = 2

    def __init__(self, config: object = None) -> None:
        del config
        super().__init__()

    def increments(self, charges: Charges) -> np.ndarray:
        z = charges.noise_multiplier
        laplace = charges.noise == "laplace"
        eps = np.empty(len(charges))
        with np.errstate(divide="ignore"):
            eps[laplace] = charges.steps[laplace] / z[laplace]
        gauss = ~laplace
        if gauss.any():
            eps[gauss] = gaussian_release_epsilon(
                z[gauss], charges.steps[gauss], charges.delta[gauss]
            )
        delta = np.where(laplace, 0.0, charges.delta)
        return np.stack([eps, delta], axis=1)

    def to_epsilon(self, states: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        fits = states[:, 1] <= deltas * (1.0 + EXCEED_RTOL)
        return np.where(fits, states[:, 0], np.inf)
