"""Noise calibrations (family ``calibration``): privacy target → noise multiplier z = σ/Δ.

A calibration turns each client's privacy target into the multiplier of the noise it adds. It
declares the releases it can describe (``describes``: noise family × placement × level, a
:class:`Release`); a privacy mechanism names its own release and accepts every calibration
that describes it (:func:`check_calibration`, at validation). The formulas themselves are the
pure functions of :mod:`fedgame.privacy.calibrate` (and, for ``accountant``, the accountant's
own ``calibrate``); a calibration only wires them to a :class:`Target`.

Per-release calibrations (``analytic``, ``classic``, ``lightdp``) read each release's own
(ε_r, δ_r); calibrations over a client's whole run (``dpfl_bcs``, ``privacy_aware``,
``accountant``) read its total (ε, δ) and the T releases it is spread over (a subsampled
release, DP-SGD, also its steps and sampling rate: :class:`Target`). ``epsilon_of``
inverts a calibration on the curve its guarantee is stated on (the exact one-release profile,
the paper's closed form, or the accountant's composition); the registry contract test
checks, for every calibration and every release it claims, that z meets the target on that
curve and that z / ``loose_factor`` no longer does (z is at most ``loose_factor`` times the
tightest multiplier). Calibration
knobs (``allow_loose_classic``, ``c2``, ``bcs_split``) are keys of the privacy section:
:func:`make_calibration` hands a calibration those its own ``Config`` declares.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

import fedgame.registry as registry
from fedgame.errors import ScenarioError
from fedgame.privacy.base import Charge
from fedgame.privacy.calibrate import (
    analytic_gaussian_epsilons,
    analytic_gaussian_multipliers,
    dpfl_bcs_gaussian_sigma,
    gaussian_tail_constant,
    paper001_epsilon,
    privacy_aware_sigma,
)
from fedgame.privacy.calibration_base import (
    Calibration,
    CalibrationName,
    Release,
    Target,
    able,
    calibration_class,
    check_calibration,
    make_calibration,
    per_release_target,
    proven_below,
    releases,
)

if TYPE_CHECKING:
    from fedgame.privacy.accountants.base import Accountant


GAUSSIAN_RELEASES = releases(["gaussian"], ["local", "distributed", "central"])
LOCAL_GAUSSIAN = releases(["gaussian"], ["local"])


def _one_release_epsilon(z: np.ndarray, target: Target) -> np.ndarray:
    """Exact ε of one Gaussian release at δ_r (Balle & Wang 2018, Thm 8)."""
    return analytic_gaussian_epsilons(np.asarray(z, float), target.delta_round)


@registry.register("calibration", "analytic")
class Analytic:
    """Exact one-release calibration: the smallest z with a Gaussian release (ε_r, δ_r)-DP.

    Balle & Wang (2018), Thm 8 / Algorithm 1, solved by bisection; valid for every ε.
    """

    describes = GAUSSIAN_RELEASES
    scope = "release"
    proven_below = math.inf
    loose_factor = 1.0 + 1e-6

    def __init__(self, config: Any = None) -> None:
        del config

    def multipliers(self, target: Target, *, accountant: Accountant) -> np.ndarray:
        del accountant
        return analytic_gaussian_multipliers(target.epsilon_round, target.delta_round)

    def epsilon_of(
        self, multipliers: np.ndarray, target: Target, *, accountant: Accountant
    ) -> np.ndarray:
        del accountant
        return _one_release_epsilon(multipliers, target)


class LooseConfig(BaseModel):
    """The privacy section's ``allow_loose_classic``, read by the tail-bound calibrations."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    allow_loose_classic: bool = Field(
        False,
        description=(
            "privacy key: allow the bound where a per-round epsilon reaches 1 (not a proven "
            "guarantee)"
        ),
    )


class TailBound:
    """z = sqrt(2 ln(shift/δ_r))/ε_r: a Gaussian tail bound, a theorem only for ε_r < 1."""

    shift: ClassVar[float]
    describes = GAUSSIAN_RELEASES
    scope = "release"
    proven_below: float = 1.0
    Config = LooseConfig

    def __init__(self, config: LooseConfig | None = None) -> None:
        self.allow_loose = bool(config and config.allow_loose_classic)

    def multipliers(self, target: Target, *, accountant: Accountant) -> np.ndarray:
        del accountant
        eps = np.asarray(target.epsilon_round, dtype=float)
        if not self.allow_loose and np.any(eps >= 1.0):
            raise ScenarioError(
                "privacy.calibration",
                self.name,  # type: ignore[attr-defined]
                f"a release asked for per-round epsilon {float(eps.max()):.3g} >= 1, where the "
                f"{self.name} bound does not hold; use calibration: analytic or "  # type: ignore[attr-defined]
                "allow_loose_classic: true",
            )
        return tail_multipliers(eps, target.delta_round, shift=self.shift)

    def epsilon_of(
        self, multipliers: np.ndarray, target: Target, *, accountant: Accountant
    ) -> np.ndarray:
        del accountant
        return _one_release_epsilon(multipliers, target)


def tail_multipliers(epsilon: np.ndarray, delta: np.ndarray, *, shift: float) -> np.ndarray:
    """z = c(δ)/ε per release, c = :func:`~fedgame.privacy.calibrate.gaussian_tail_constant`."""
    return gaussian_tail_constant(delta, shift=shift) / np.asarray(epsilon, float)


@registry.register("calibration", "classic")
class Classic(TailBound):
    """Classic Gaussian mechanism, z = sqrt(2 ln(1.25/δ_r))/ε_r (Dwork & Roth 2014, Thm A.1).

    A theorem only for ε_r < 1: refused at validation where a per-round ε reaches 1 unless the
    privacy section sets ``allow_loose_classic: true``.
    """

    name = "classic"
    shift = 1.25
    loose_factor = 1.7  # measured: at most 1.68 x the exact z for ε_r in [0.05, 1), δ = 1e-5


@registry.register("calibration", "lightdp")
class LightDp(TailBound):
    """Paper 004's constant, z = sqrt(2 ln(2/δ_r))/ε_r (Prop. 1 / Appendix A tail bound).

    A theorem only for ε_r < 1, refused above it as ``classic`` is.
    """

    name = "lightdp"
    shift = 2.0
    loose_factor = 1.75  # measured: at most 1.72 x the exact z for ε_r in [0.05, 1), δ = 1e-5


class BcsConfig(BaseModel):
    """The privacy section's ``c2`` and ``bcs_split``, read by ``dpfl_bcs``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    c2: PositiveFloat = Field(
        1.0,
        description=(
            "privacy key: the constant c2 of paper 000's analysis calibration (never given by "
            "the paper)"
        ),
    )
    bcs_split: Literal["analysis", "per_round"] = Field(
        "analysis",
        description="privacy key: analysis (Thm 2) or per_round (Alg. 2's linear split)",
    )


@registry.register("calibration", "dpfl_bcs")
class DpflBcs:
    """DPFL-BCS (paper 000, Lemma 1 / Thm 2): z = c2·sqrt(T ln(1/δ))/ε over the run.

    ``bcs_split: per_round`` is Alg. 2's linear split (Thm 1 at (ε/T, δ/T) each release).
    Not a proven guarantee for the accountants (``c2`` is never given by the paper): the
    stated bound is the paper's own closed form (``epsilon_of``), and the accountant decides
    what is actually spent.
    """

    describes = LOCAL_GAUSSIAN
    scope = "run"
    proven_below = math.inf
    loose_factor = 1.0 + 1e-9
    Config = BcsConfig

    def __init__(self, config: BcsConfig | None = None) -> None:
        self.config = config or BcsConfig.model_validate({})

    def multipliers(self, target: Target, *, accountant: Accountant) -> np.ndarray:
        del accountant
        return np.array(
            [
                dpfl_bcs_gaussian_sigma(
                    sensitivity=1.0,
                    epsilon=float(e),
                    delta=float(d),
                    participations=int(t),
                    c2=self.config.c2,
                    calibration=self.config.bcs_split,
                )
                for e, d, t in zip(target.epsilon, target.delta, target.releases)
            ],
            dtype=float,
        )

    def epsilon_of(
        self, multipliers: np.ndarray, target: Target, *, accountant: Accountant
    ) -> np.ndarray:
        """Thm 2 solved for ε (``c2 sqrt(T ln(1/δ))/z``), or basic composition of Thm 1."""
        del accountant
        z, t, delta = np.asarray(multipliers, float), target.releases, target.delta
        if self.config.bcs_split == "per_round":
            return t * gaussian_tail_constant(delta / t) / z
        return self.config.c2 * np.sqrt(t * np.log(1.0 / delta)) / z


class RhoConfig(BaseModel):
    """The privacy section's ``rho``, read by ``qi_dpfl``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    rho: PositiveFloat | None = Field(
        None,
        description=(
            "privacy key: zCDP budget rho of every release a response names none for (None: "
            "the largest rho whose (epsilon, delta) conversion meets the per-round target)"
        ),
    )


@registry.register("calibration", "qi_dpfl")
class QiDpfl:
    """QI-DPFL (paper 003 Eq. 10): a ρ-zCDP Gaussian release, z = 1/sqrt(2ρ), σ² = 2C²/(ρ|D|²).

    ρ per release: the response's chosen ρ, else the privacy section's ``rho``, else the
    largest ρ with ρ + 2 sqrt(ρ ln(1/δ_r)) ≤ ε_r (Bun & Steinke 2016, Prop. 1.3 inverted). The
    paper states σ itself, on its record-level sensitivity 2C/|D_i| (Corollary 1, replace-one;
    ``level: record``): ``noise_std`` is that formula verbatim (Eq. 10), which is z·Δ. The
    stated guarantee (``epsilon_of``) is the zCDP-to-DP conversion of one release at δ_r.
    """

    describes = frozenset({Release("gaussian", "local", "record")})
    scope = "release"
    proven_below = math.inf
    loose_factor = 1.0 + 1e-6
    Config = RhoConfig

    def __init__(self, config: RhoConfig | None = None) -> None:
        self.rho = (config or RhoConfig.model_validate({})).rho

    def rho_of(self, target: Target, chosen: np.ndarray | None = None) -> np.ndarray:
        """ρ of each release: the chosen one (finite), else the fixed ``rho`` or the target's."""
        if self.rho is not None:
            own = np.full(len(target.epsilon_round), self.rho)
        else:
            log_term = np.log(1.0 / target.delta_round)
            eps = np.asarray(target.epsilon_round, float)
            own = (eps / (np.sqrt(log_term + eps) + np.sqrt(log_term))) ** 2
        return own if chosen is None else np.where(np.isfinite(chosen), chosen, own)

    def multipliers(self, target: Target, *, accountant: Accountant) -> np.ndarray:
        del accountant
        return 1.0 / np.sqrt(2.0 * self.rho_of(target))

    def noise_std(
        self, target: Target, *, rho: np.ndarray, clip: float, dataset_sizes: np.ndarray
    ) -> np.ndarray:
        """Eq. 10: σ_i = sqrt(2C²/(ρ_i |D_i|²)), an empty client read as holding one sample."""
        sizes = np.maximum(np.asarray(dataset_sizes, float), 1.0)
        return np.sqrt(2.0 * clip**2 / (self.rho_of(target, rho) * sizes**2))

    def epsilon_of(
        self, multipliers: np.ndarray, target: Target, *, accountant: Accountant
    ) -> np.ndarray:
        """ε of one ρ-zCDP release at δ_r, ρ = 1/(2z²) (Bun & Steinke 2016, Prop. 1.3)."""
        del accountant
        rho = 1.0 / (2.0 * np.asarray(multipliers, float) ** 2)
        return rho + 2.0 * np.sqrt(rho * np.log(1.0 / target.delta_round))


@registry.register("calibration", "privacy_aware")
class PrivacyAware:
    """Paper 001 (privacy-aware selection), Eq. 6-7: DP-SGD's per-step std over the run,
    σ_k = C sqrt(V_k T_k T^l), V_k = 8 log(e + q ε'/δ)/(|M_k|² q² ε'²), ε' = log(1 + (e^ε − 1)/q);
    z = σ_k/Δ_k with Δ_k the mechanism's per-step sensitivity.

    Exactly as written: note 001 §8.4 finds its constants are not a proven guarantee (the
    accountant decides what is actually spent); the stated bound is the paper's closed form
    (``epsilon_of``: Eq. 6-7 solved for ε). Describes the per-sample-clipped, subsampled local
    Gaussian release it was derived for (``dpsgd_local``).
    """

    describes = frozenset({Release("subsampled_gaussian", "local", "sample")})
    scope = "run"
    proven_below = math.inf
    loose_factor = 1.0 + 1e-6  # the inverse is solved to a relative 1e-10 in ε

    def __init__(self, config: Any = None) -> None:
        del config

    def multipliers(self, target: Target, *, accountant: Accountant) -> np.ndarray:
        del accountant
        q, steps, size, sens = target.geometry()
        return np.array(
            [
                privacy_aware_sigma(
                    clip=target.clip,
                    epsilon=float(target.epsilon[i]),
                    delta=float(target.delta[i]),
                    sample_rate=float(q[i]),
                    dataset_size=float(size[i]),
                    participations=int(target.releases[i]),
                    local_steps=int(steps[i]),
                )
                / sens[i]
                for i in range(len(target.epsilon))
            ],
            dtype=float,
        )

    def epsilon_of(
        self, multipliers: np.ndarray, target: Target, *, accountant: Accountant
    ) -> np.ndarray:
        """Eq. 6-7 solved for ε at σ = zΔ over the T·T^l steps of the run."""
        del accountant
        q, steps, size, sens = target.geometry()
        return np.array(
            [
                paper001_epsilon(
                    sigma=float(z * sens[i]),
                    clip=target.clip,
                    delta=float(target.delta[i]),
                    sample_rate=float(q[i]),
                    dataset_size=float(size[i]),
                    steps=int(target.releases[i]) * int(steps[i]),
                )
                for i, z in enumerate(np.asarray(multipliers, float))
            ]
        )


@registry.register("calibration", "accountant")
class AccountantCurve:
    """The smallest z whose T releases meet (ε, δ) on the client's accountant's own curve.

    Solved by the accountant's ``calibrate`` (bisection on its ``composed_epsilon``), each
    release carrying δ/T; so calibration and accounting agree by construction. Cached per
    (ε, δ, T).
    """

    describes = releases(["gaussian", "laplace"], ["local"]) | {
        Release("subsampled_gaussian", "local", "sample")
    }
    scope = "run"
    proven_below = math.inf
    loose_factor = 1.001  # the pld accountant searches to a relative 1e-4

    def __init__(self, config: Any = None) -> None:
        del config
        self._cache: dict[tuple[float, float, int, str, float, int], float] = {}

    @staticmethod
    def template(target: Target, i: int, z: float = math.inf) -> Charge:
        """Release ``i`` of ``target`` at multiplier ``z``, carrying δ/T (and its geometry)."""
        q, steps, _, _ = target.geometry()
        return Charge(
            target.noise,  # type: ignore[arg-type]
            noise_multiplier=z,
            sample_rate=float(q[i]),
            steps=int(steps[i]),
            delta=float(target.delta[i]) / int(target.releases[i]),
        )

    def multipliers(self, target: Target, *, accountant: Accountant) -> np.ndarray:
        out = np.empty(len(target.epsilon))
        for i, (e, d, t) in enumerate(zip(target.epsilon, target.delta, target.releases)):
            one = self.template(target, i)
            key = (float(e), float(d), int(t), target.noise, one.sample_rate, one.steps)
            if key not in self._cache:
                self._cache[key] = accountant.calibrate(
                    epsilon=key[0], delta=key[1], releases=key[2], template=one
                )
            out[i] = self._cache[key]
        return out

    def epsilon_of(
        self, multipliers: np.ndarray, target: Target, *, accountant: Accountant
    ) -> np.ndarray:
        return np.array(
            [
                accountant.composed_epsilon(
                    self.template(target, i, float(z)),
                    count=int(target.releases[i]),
                    delta=float(target.delta[i]),
                )
                for i, z in enumerate(multipliers)
            ]
        )


__all__ = [
    "Calibration",
    "CalibrationName",
    "Release",
    "Target",
    "able",
    "calibration_class",
    "check_calibration",
    "make_calibration",
    "per_release_target",
    "proven_below",
    "releases",
    "tail_multipliers",
]
