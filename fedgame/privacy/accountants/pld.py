"""``pld``: privacy-loss-distribution accounting (Koskela et al.; Doroshenko et al.).

Numerically tight for Gaussian, Poisson-subsampled Gaussian and Laplace releases, with
``dp_accounting``'s pessimistic discretisation (``value_discretization_interval``). Each client
holds one PLD built with the public ``dp_accounting.pld.privacy_loss_distribution`` functions;
a release composes a cached event PLD into it. Slower than ``rdp`` (milliseconds per release):
prefer ``rdp`` for thousands of clients.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from pydantic import BaseModel, ConfigDict, Field

from fedgame.privacy.accountants.base import AccountantBase, occurrence_rank
from fedgame.privacy.base import Charge, Charges
from fedgame.registry import register


@lru_cache(maxsize=512)
def event_pld(noise: str, z: float, q: float, steps: int, interval: float) -> Any:
    """PLD of one release (``steps`` compositions of one step); None when it costs nothing."""
    if steps == 0 or (noise == "subsampled_gaussian" and q == 0.0):
        return None
    if z == 0.0:
        return math.inf
    if noise == "laplace":
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
        self.plds: list[Any] = []

    def _event(self, charge: Charge) -> Any:
        return event_pld(
            charge.noise,
            float(charge.noise_multiplier),
            float(charge.sample_rate),
            int(charge.steps),
            self.config.value_discretization_interval,
        )

    def start(self, deltas: np.ndarray) -> None:
        self.deltas = np.asarray(deltas, dtype=float).copy()
        self.plds = [None] * len(self.deltas)  # None: nothing spent yet

    @staticmethod
    def _compose(current: Any, event: Any) -> Any:
        if event is None:
            return current
        if current is math.inf or event is math.inf:
            return math.inf
        return event if current is None else current.compose(event)

    @staticmethod
    def _at(pld: Any, delta: float) -> float:
        if pld is None:
            return 0.0
        if pld is math.inf:
            return math.inf
        return float(pld.get_epsilon_for_delta(delta))

    def charge(self, ids: np.ndarray, charges: Charges) -> None:
        self._check(charges)
        for cid, charge in zip(np.asarray(ids).tolist(), charges):
            if not charge.free:
                self.plds[cid] = self._compose(self.plds[cid], self._event(charge))

    def epsilon(self, ids: np.ndarray | None = None) -> np.ndarray:
        rows = range(len(self.plds)) if ids is None else np.asarray(ids).tolist()
        return np.array([self._at(self.plds[i], self.deltas[i]) for i in rows], dtype=float)

    def epsilon_if(self, ids: np.ndarray, charges: Charges) -> np.ndarray:
        self._check(charges)
        ids = np.asarray(ids, dtype=np.int64)
        running: dict[int, Any] = {}
        out = np.empty(len(ids))
        for j in np.argsort(occurrence_rank(ids), kind="stable").tolist():
            cid = int(ids[j])
            current = running.get(cid, self.plds[cid])
            if not charges[j].free:
                current = self._compose(current, self._event(charges[j]))
            running[cid] = current
            out[j] = self._at(current, self.deltas[cid])
        return out

    def composed_epsilon(self, release: Charge, *, count: int, delta: float) -> float:
        event = self._event(release)
        if event is None or event is math.inf:
            return 0.0 if event is None else math.inf
        return self._at(event.self_compose(count) if count > 1 else event, delta)
