"""``pld``: privacy-loss-distribution accounting (Koskela et al.; Doroshenko et al.).

Numerically tight for Gaussian, Poisson-subsampled Gaussian and Laplace releases, with
``dp_accounting``'s pessimistic discretisation (``value_discretization_interval``, default
1e-3). Against 1e-4 it over-reports ε by at most 4e-4 relative on three DP-SGD curves
(z = 1, q = 0.01, 1,000 steps: 1.82893 vs 1.82824; z = 0.8, q = 0.05, 1,000 steps: 17.5809
vs 17.5807; z = 2, q = 0.2, 200 steps: 7.37234 vs 7.37228), and builds each event PLD 5-10x
faster (0.26-0.46 s against 1.6-3.8 s on the shared 2-core machine). A client's
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fedgame.privacy.accountants.base import AccountantBase, occurrence_rank, search_noise
from fedgame.privacy.accountants.curve import solve_on_curve
from fedgame.privacy.base import Charge, Charges
from fedgame.privacy.calibrate import analytic_gaussian_epsilon
from fedgame.registry import register

#: below this Gaussian noise multiplier a release is recorded as ε = ∞ (see the module docstring)
MIN_GAUSSIAN_MULTIPLIER = 0.05
#: below this Laplace multiplier (pure ε > 10) a release is composed as its pure-DP PLD
MIN_LAPLACE_MULTIPLIER = 0.1
#: loss discretisation of calibration's search (the answer is checked at the configured one)
SEARCH_INTERVAL = 1e-2
#: loss discretisation of calibration's optimistic check that an answer is (nearly) the smallest
CHECK_INTERVAL = 1e-3


@lru_cache(maxsize=512)
def event_pld(
    noise: str, *, z: float, q: float, steps: int, interval: float, pessimistic: bool = True
) -> Any:
    """PLD of one release (``steps`` compositions of one step); None when it costs nothing.

    ``pessimistic=False`` (calibration's lower checks only) builds dp_accounting's optimistic
    PLD of a Gaussian or Laplace release, whose ε never exceeds the true ε.
    """
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
        step = pld_lib.from_laplace_mechanism(
            z,
            value_discretization_interval=interval,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
        )
    elif noise == "gaussian" or q >= 1.0:
        # Gaussians compose exactly: steps steps of z are one step of z / sqrt(steps)
        return pld_lib.from_gaussian_mechanism(
            z / math.sqrt(steps),
            value_discretization_interval=interval,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,
        )
    else:
        step = pld_lib.from_gaussian_mechanism(
            z,
            value_discretization_interval=interval,
            sampling_prob=q,
            pessimistic_estimate=pessimistic,
            use_connect_dots=pessimistic,  # its optimistic twin is the privacy-buckets one
        )
    return step if steps == 1 else step.self_compose(steps)


def repeated_epsilon(
    template: Charge,
    z: float,
    *,
    releases: int,
    delta: float,
    interval: float,
    pessimistic: bool = True,
) -> float:
    """ε at δ of ``releases`` releases like ``template`` at multiplier z, on one event PLD
    discretised at ``interval`` and self-composed (calibration's coarse and check curves)."""
    event = event_pld(
        template.noise,
        z=z,
        q=float(template.sample_rate),
        steps=int(template.steps),
        interval=interval,
        pessimistic=pessimistic,
    )
    if event is None or event is math.inf:
        return 0.0 if event is None else math.inf
    if releases > 1:
        event = event.self_compose(releases)
    return float(event.get_epsilon_for_delta(delta))


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
            z = 1.0 / math.sqrt(self.inv_z2)
            gauss = event_pld("gaussian", z=z, q=1.0, steps=1, interval=interval)
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
    #: an answer z is certified minimal to this: z / (1 + it) misses the target
    calibration_minimal_rtol: ClassVar[float] = 1e-3

    class Config(BaseModel):
        """Discretisation of privacy-loss values (smaller: tighter and slower)."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        value_discretization_interval: float = Field(
            default=1e-3,
            gt=0.0,
            le=0.1,
            description=(
                "privacy-loss discretisation (smaller: tighter and slower; ε at 1e-3 is "
                "within 4e-4 relative of ε at 1e-4 on DP-SGD curves)"
            ),
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
            z=float(charge.noise_multiplier),
            q=float(charge.sample_rate),
            steps=int(charge.steps),
            interval=self.config.value_discretization_interval,
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

    def _solve_targets(
        self,
        targets: Sequence[float],
        *,
        delta: float,
        releases: int,
        template: Charge,
        progress: Callable[[int], None] | None,
    ) -> list[float]:
        """Every target on one curve (:mod:`fedgame.privacy.accountants.curve`): a coarse
        pessimistic PLD at :data:`SEARCH_INTERVAL` for the shape, the accountant's own PLD
        (``composed_epsilon``, one evaluation a target where all goes well, reused by the
        ledger) to certify each answer; target by target (``_search``) where that fails."""
        interval = self.config.value_discretization_interval
        if _plain_gaussian(template) or interval >= SEARCH_INTERVAL:
            return super()._solve_targets(
                targets, delta=delta, releases=releases, template=template, progress=progress
            )

        def coarse(z: float) -> float:
            return repeated_epsilon(
                template, z, releases=releases, delta=delta, interval=SEARCH_INTERVAL
            )

        def fine(z: float) -> float:
            return self.composed_epsilon(
                replace(template, noise_multiplier=z), count=releases, delta=delta
            )

        solved = solve_on_curve(targets, coarse=coarse, fine=fine, progress=progress)
        if solved is not None:
            return solved
        return super()._solve_targets(
            targets, delta=delta, releases=releases, template=template, progress=progress
        )

    def _search(
        self, *, epsilon: float, delta: float, releases: int, template: Charge, hint: float | None
    ) -> float:
        """Smallest z to ``calibration_rtol``, searched on a coarse PLD, checked on the real one.

        Search: Brent on ε(z) of PLDs discretised at :data:`SEARCH_INTERVAL` (pessimistic:
        ε at least the configured PLD's; milliseconds where the configured one takes a
        second), to a quarter of ``rtol``, from ``hint``. Answer z_c only if
        ``composed_epsilon(z_c) <= ε`` (the accountant's own PLD, never an under-report) and
        z_c / (1 + ``calibration_minimal_rtol``) misses ε: its optimistic PLD at
        :data:`CHECK_INTERVAL` (a lower bound of the true ε, so of every pessimistic one)
        exceeds ε, or failing that ``composed_epsilon`` there does. Otherwise the plain search
        on ``composed_epsilon`` runs from z_c. Plain Gaussian releases (closed form) skip the
        coarse stage.
        """
        rtol = self.calibration_rtol
        interval = self.config.value_discretization_interval
        memo: dict[float, float] = {}

        def fine(z: float) -> float:
            if z not in memo:
                memo[z] = self.composed_epsilon(
                    replace(template, noise_multiplier=z), count=releases, delta=delta
                )
            return memo[z]

        start, factor = (1.0, 4.0) if hint is None else (hint, 1.25)
        if not _plain_gaussian(template) and interval < SEARCH_INTERVAL:

            def coarse(
                z: float, pessimistic: bool = True, discretisation: float = SEARCH_INTERVAL
            ) -> float:
                return repeated_epsilon(
                    template,
                    z,
                    releases=releases,
                    delta=delta,
                    interval=discretisation,
                    pessimistic=pessimistic,
                )

            z = search_noise(coarse, epsilon=epsilon, rtol=rtol / 4, start=start, factor=factor)
            below = z / (1.0 + self.calibration_minimal_rtol)
            lower_bound = (
                coarse(below, pessimistic=False, discretisation=CHECK_INTERVAL)
                if template.noise == "subsampled_gaussian"
                or (template.noise == "laplace" and below >= MIN_LAPLACE_MULTIPLIER)
                else -math.inf
            )
            if fine(z) <= epsilon and (lower_bound > epsilon or fine(below) > epsilon):
                return z
            start, factor = z, 1.01
        return search_noise(fine, epsilon=epsilon, rtol=rtol, start=start, factor=factor)
