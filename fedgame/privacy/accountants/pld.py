"""``pld``: privacy-loss-distribution accounting (Koskela et al.; Doroshenko et al.).

Numerically tight for Gaussian, Poisson-subsampled Gaussian and Laplace releases, with
``dp_accounting``'s pessimistic discretisation (``value_discretization_interval``). A client's
plain Gaussian releases compose exactly in closed form (Gaussian DP: one Gaussian of
multiplier (Σ 1/z_i²)^(-1/2), whose ε is the analytic Gaussian mechanism's), in microseconds;
its other releases are composed as PLDs built with the public
``dp_accounting.pld.privacy_loss_distribution`` functions (cached event PLDs), and the Gaussian
part joins them when the ledger is read. Subsampled releases are slower than under ``rdp``
(milliseconds to seconds each): prefer ``rdp`` for thousands of DP-SGD clients.

Where a PLD must hold a Gaussian (or subsampled Gaussian) part of multiplier z <
:data:`MIN_GAUSSIAN_MULTIPLIER`, it would need tens of millions of loss values (the loss range
grows as 1/z²); such a release already costs ε > 200 at δ = 1e-5, so the ledger reads ε = ∞ (an
over-report, never an under-report, computed at once) rather than spend minutes and gigabytes.
A Laplace release of z < :data:`MIN_LAPLACE_MULTIPLIER` (pure ε = 1/z > 10) is composed as the
pessimistic PLD of its pure-DP guarantee (``from_privacy_parameters``): two loss values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fedgame.privacy.accountants.base import AccountantBase, occurrence_rank
from fedgame.privacy.base import Charge, Charges
from fedgame.privacy.calibrate import analytic_gaussian_epsilon
from fedgame.registry import register

#: below this Gaussian noise multiplier a release is recorded as ε = ∞ (see the module docstring)
MIN_GAUSSIAN_MULTIPLIER = 0.05
#: below this Laplace multiplier (pure ε > 10) a release is composed as its pure-DP PLD
MIN_LAPLACE_MULTIPLIER = 0.1


@lru_cache(maxsize=512)
def event_pld(noise: str, z: float, q: float, steps: int, interval: float) -> Any:
    """PLD of one release (``steps`` compositions of one step); None when it costs nothing."""
    from dp_accounting.pld import common as pld_common
    from dp_accounting.pld import privacy_loss_distribution as pld_lib

    if steps == 0 or (noise == "subsampled_gaussian" and q == 0.0):
        return None
    if z == 0.0 or (noise != "laplace" and z < MIN_GAUSSIAN_MULTIPLIER):
        return math.inf
    if noise == "laplace" and z < MIN_LAPLACE_MULTIPLIER:
        pure = pld_common.DifferentialPrivacyParameters(1.0 / z, 0.0)
        step = pld_lib.from_privacy_parameters(pure, value_discretization_interval=interval)
    elif noise == "laplace":
        step = pld_lib.from_laplace_mechanism(z, value_discretization_interval=interval)
    elif noise == "gaussian" or q >= 1.0:
        # Gaussians compose exactly: steps steps of z are one step of z / sqrt(steps)
        return pld_lib.from_gaussian_mechanism(
            z / math.sqrt(steps), value_discretization_interval=interval
        )
    else:
        step = pld_lib.from_gaussian_mechanism(
            z, value_discretization_interval=interval, sampling_prob=q
        )
    return step if steps == 1 else step.self_compose(steps)


def _plain_gaussian(charge: Charge) -> bool:
    """A release that is one Gaussian in law: plain, or ``subsampled`` at q = 1."""
    return charge.noise == "gaussian" or (
        charge.noise == "subsampled_gaussian" and charge.sample_rate >= 1.0
    )


@dataclass
class _Ledger:
    """One client's releases: Σ 1/z² of its plain Gaussian releases, and the PLD of the rest.

    Gaussian releases compose exactly into one Gaussian of multiplier (Σ 1/z_i²)^(-1/2)
    (Gaussian DP, Dong, Roth & Su 2022, Cor. 3.3), whose ε at δ is the analytic Gaussian
    mechanism's (Balle & Wang 2018): exact, in microseconds, for any z. Only a ledger that
    also holds subsampled or Laplace releases needs a PLD, built for the Gaussian part once
    it is read.
    """

    inv_z2: float = 0.0
    other: Any = None  # PLD of the non-Gaussian releases (None: none; inf: unbounded)

    def compose(self, event: Any, charge: Charge) -> _Ledger:
        if _plain_gaussian(charge):
            z2 = charge.noise_multiplier**2
            return _Ledger(self.inv_z2 + charge.steps / z2 if z2 > 0 else math.inf, self.other)
        if event is None:
            return self
        if self.other is math.inf or event is math.inf:
            return _Ledger(self.inv_z2, math.inf)
        return _Ledger(self.inv_z2, event if self.other is None else self.other.compose(event))

    def epsilon(self, delta: float, interval: float) -> float:
        if self.other is math.inf or math.isinf(self.inv_z2):
            return math.inf
        if self.other is None:
            if self.inv_z2 == 0.0:
                return 0.0
            z = 1.0 / math.sqrt(self.inv_z2)
            return float(analytic_gaussian_epsilon(noise_multiplier=z, delta=delta))
        pld = self.other
        if self.inv_z2 > 0.0:
            gauss = event_pld("gaussian", 1.0 / math.sqrt(self.inv_z2), 1.0, 1, interval)
            if gauss is math.inf:
                return math.inf
            pld = pld.compose(gauss)
        return float(pld.get_epsilon_for_delta(delta))


@register("accountant", "pld")
class PldAccountant(AccountantBase):
    """Privacy loss distributions (dp_accounting): tight, per client, slower than ``rdp``."""

    name: ClassVar[str] = "pld"
    families: ClassVar[frozenset[str]] = frozenset({"gaussian", "subsampled_gaussian", "laplace"})
    calibration_rtol: ClassVar[float] = 1e-4

    class Config(BaseModel):
        """Discretisation of privacy-loss values (smaller: tighter and slower)."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        value_discretization_interval: float = Field(
            default=1e-4,
            gt=0.0,
            le=0.1,
            description="privacy-loss discretisation (smaller: tighter and slower)",
        )

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        super().__init__()
        self.ledgers: list[_Ledger] = []

    def _event(self, charge: Charge) -> Any:
        if _plain_gaussian(charge):
            return None  # composed in closed form by the ledger
        return event_pld(
            charge.noise,
            float(charge.noise_multiplier),
            float(charge.sample_rate),
            int(charge.steps),
            self.config.value_discretization_interval,
        )

    def start(self, deltas: np.ndarray) -> None:
        self.deltas = np.asarray(deltas, dtype=float).copy()
        self.ledgers = [_Ledger() for _ in range(len(self.deltas))]

    def _at(self, ledger: _Ledger, delta: float) -> float:
        return ledger.epsilon(delta, self.config.value_discretization_interval)

    def charge(self, ids: np.ndarray, charges: Charges) -> None:
        self._check(charges)
        for cid, charge in zip(np.asarray(ids).tolist(), charges):
            if not charge.free:
                self.ledgers[cid] = self.ledgers[cid].compose(self._event(charge), charge)

    def epsilon(self, ids: np.ndarray | None = None) -> np.ndarray:
        rows = range(len(self.ledgers)) if ids is None else np.asarray(ids).tolist()
        return np.array([self._at(self.ledgers[i], self.deltas[i]) for i in rows], dtype=float)

    def epsilon_if(self, ids: np.ndarray, charges: Charges) -> np.ndarray:
        self._check(charges)
        ids = np.asarray(ids, dtype=np.int64)
        running: dict[int, _Ledger] = {}
        out = np.empty(len(ids))
        for j in np.argsort(occurrence_rank(ids), kind="stable").tolist():
            cid = int(ids[j])
            current = running.get(cid, self.ledgers[cid])
            charge = charges[j]
            if not charge.free:
                current = current.compose(self._event(charge), charge)
            running[cid] = current
            out[j] = self._at(current, self.deltas[cid])
        return out

    def composed_epsilon(self, release: Charge, *, count: int, delta: float) -> float:
        if release.free:
            return 0.0
        if _plain_gaussian(release):
            ledger = _Ledger().compose(None, replace(release, steps=count * release.steps))
        else:
            event = self._event(release)
            if event is not math.inf and count > 1:
                event = event.self_compose(count)
            ledger = _Ledger().compose(event, release)
        return self._at(ledger, delta)
