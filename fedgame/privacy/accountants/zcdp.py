"""``zcdp``: zero-concentrated DP accounting (Bun & Steinke 2016); ρ adds up.

A Gaussian release of multiplier z over ``steps`` steps costs ρ = steps/(2z²) (Prop. 1.6); a
pure ε-DP (Laplace) release costs ε²/2 (Prop. 1.4); ε at δ is ρ + 2·sqrt(ρ ln(1/δ))
(Prop. 1.3), the conversion paper 003 uses (Lemma 1, composed over a client's rounds).
Subsampling has no simple zCDP credit, so subsampled Gaussian releases are not described
(use ``rdp`` or ``pld``).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from fedgame.privacy.accountants.base import StateAccountant
from fedgame.privacy.base import Charges
from fedgame.registry import register


def zcdp_epsilon(rho: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """``rho + 2 sqrt(rho ln(1/delta))`` (Bun & Steinke 2016, Prop. 1.3), vectorised."""
    rho = np.asarray(rho, dtype=float)
    delta = np.asarray(delta, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = rho + 2.0 * np.sqrt(rho * np.log(1.0 / delta))
    return np.where(rho == 0, 0.0, out)


@register("accountant", "zcdp")
class ZcdpAccountant(StateAccountant):
    """ρ-zCDP: Gaussian and Laplace releases; ε(δ) = ρ + 2·sqrt(ρ ln(1/δ))."""

    name: ClassVar[str] = "zcdp"
    families: ClassVar[frozenset[str]] = frozenset({"gaussian", "laplace"})
    width = 1

    def __init__(self, config: object = None) -> None:
        del config
        super().__init__()

    def increments(self, charges: Charges) -> np.ndarray:
        z = charges.noise_multiplier
        steps = charges.steps.astype(float)
        with np.errstate(divide="ignore"):
            rho = np.where(
                charges.noise == "laplace",
                steps * (1.0 / z) ** 2 / 2.0,  # each step is (1/z)-DP
                steps / (2.0 * z**2),
            )
        return rho[:, None]

    def to_epsilon(self, states: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        return zcdp_epsilon(states[:, 0], deltas)

    def rho(self, ids: np.ndarray | None = None) -> np.ndarray:
        """Accumulated ρ of clients ``ids`` (default all)."""
        return (self.state if ids is None else self.state[np.asarray(ids)])[:, 0].copy()
