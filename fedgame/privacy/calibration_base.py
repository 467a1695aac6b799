"""The ``calibration`` family's interface: the releases it describes, targets, the Protocol.

A calibration (:mod:`fedgame.privacy.calibrations`) turns each client's privacy target
(:class:`Target`) into the multiplier z = σ/Δ of the noise it adds, and declares the releases
it can describe (:class:`Release`: noise family × placement × level). A privacy mechanism names
its own release and accepts every calibration that describes it (:func:`check_calibration`,
at validation); :func:`make_calibration` builds one with the keys of the privacy section its
``Config`` declares (``allow_loose_classic``, ``c2``, ``bcs_split``).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, NamedTuple, Protocol, runtime_checkable

import numpy as np
from pydantic import AfterValidator, BaseModel

import fedgame.registry as registry
from fedgame.errors import ScenarioError

if TYPE_CHECKING:
    from fedgame.privacy.accountants.base import Accountant


class Release(NamedTuple):
    """What a mechanism releases: noise family, where the noise is added, what is clipped."""

    noise: str
    placement: str
    level: str

    def __str__(self) -> str:
        return f"{self.noise} noise, {self.placement}, {self.level} level"


def releases(
    noise: Iterable[str], placement: Iterable[str], level: Iterable[str] = ("update", "sample")
) -> frozenset[Release]:
    """Every combination of the given noise families, placements and levels."""
    return frozenset(Release(*r) for r in itertools.product(noise, placement, level))


@dataclass(frozen=True)
class Target:
    """Per-client privacy targets, aligned arrays.

    ``epsilon_round``/``delta_round``: the (ε_r, δ_r) of this one release;
    ``epsilon``/``delta``: the client's total over ``releases`` = T releases (all of them
    under the same noise). A per-release calibration reads the first pair, a calibration
    over the run the second.

    A subsampled release (DP-SGD) also states its geometry: ``steps`` noisy steps per release
    at Poisson rate ``sample_rate`` over a local set of ``sample_size`` records clipped to
    ``clip``, each step's noise sized against ``sensitivity`` (z = σ/Δ). Left out (None):
    one unsampled step on one record, Δ = 1 (:meth:`geometry`).
    """

    epsilon_round: np.ndarray
    delta_round: np.ndarray
    epsilon: np.ndarray
    delta: np.ndarray
    releases: np.ndarray
    noise: str = "gaussian"
    sample_rate: np.ndarray | None = None
    steps: np.ndarray | None = None
    sample_size: np.ndarray | None = None
    sensitivity: np.ndarray | None = None
    clip: float = 1.0

    def geometry(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(sample_rate, steps, sample_size, sensitivity), each a column (defaults: 1)."""
        n = len(self.epsilon)

        def col(value: np.ndarray | None, dtype: Any) -> np.ndarray:
            return np.ones(n, dtype) if value is None else np.asarray(value, dtype)

        return (
            col(self.sample_rate, float),
            col(self.steps, np.int64),
            col(self.sample_size, float),
            col(self.sensitivity, float),
        )

    def take(self, rows: np.ndarray) -> Target:
        """The targets of ``rows`` (a boolean mask or indices)."""

        def cut(value: np.ndarray | None) -> np.ndarray | None:
            return None if value is None else np.asarray(value)[rows]

        return Target(
            self.epsilon_round[rows],
            self.delta_round[rows],
            self.epsilon[rows],
            self.delta[rows],
            self.releases[rows],
            self.noise,
            cut(self.sample_rate),
            cut(self.steps),
            cut(self.sample_size),
            cut(self.sensitivity),
            self.clip,
        )


@runtime_checkable
class Calibration(Protocol):
    """The ``calibration`` family's Protocol."""

    describes: frozenset[Release]
    #: which target it meets: ``release`` (ε_r, δ_r) or ``run`` (ε, δ over T releases)
    scope: Literal["release", "run"]
    #: per-release ε below which the calibration's bound is a theorem (inf: every ε)
    proven_below: float
    #: contract: z is at most this many times the smallest z meeting the target on the curve
    #: ``epsilon_of`` states (for ε_r in [0.05, 1) and δ ≤ 1e-5 where a tail bound is concerned)
    loose_factor: float

    def multipliers(self, target: Target, *, accountant: Accountant) -> np.ndarray:
        """The noise multiplier z of each client's release."""
        ...

    def epsilon_of(
        self, multipliers: np.ndarray, target: Target, *, accountant: Accountant
    ) -> np.ndarray:
        """The ε that z guarantees on the curve this calibration's bound is stated on."""
        ...


@runtime_checkable
class StatesNoiseStd(Protocol):
    """Capability of a calibration whose paper states σ itself, not as z·Δ.

    The core adds exactly this σ (so the paper's figures are reproduced to the last bit);
    it equals z·Δ of the release the calibration describes, up to rounding. ``rho``: each
    response's chosen zCDP budget (NaN: none chosen).
    """

    def noise_std(
        self, target: Target, *, rho: np.ndarray, clip: float, dataset_sizes: np.ndarray
    ) -> np.ndarray: ...


def calibration_class(name: str, *, key: str = "privacy.calibration") -> Any:
    """The registered calibration class ``name`` (unknown names list the valid ones)."""
    return registry.entry("calibration", name, key=key).cls


def able(release: Release) -> list[str]:
    """The registered calibrations that describe ``release``."""
    return [n for n in registry.names("calibration") if release in calibration_class(n).describes]


def check_calibration(name: str, release: Release, *, kind: str, key: str = "privacy") -> None:
    """Refuse a calibration that cannot describe the mechanism's release, naming both keys."""
    if release in calibration_class(name, key=f"{key}.calibration").describes:
        return
    raise ScenarioError(
        f"{key}.calibration",
        name,
        f"cannot describe the {key}.kind {kind!r} release ({release}); calibrations that can: "
        f"{', '.join(able(release)) or 'none'}",
    )


def _registered(name: str) -> str:
    if name not in registry.names("calibration"):
        near = registry.suggest(name, registry.names("calibration"))
        raise ValueError(
            f"allowed calibrations: {', '.join(registry.names('calibration'))}"
            + (f"; {near}" if near else "")
        )
    return name


#: a privacy Config's ``calibration`` key: a registered calibration name
CalibrationName = Annotated[str, AfterValidator(_registered)]


def make_calibration(name: str, settings: BaseModel | None = None) -> Calibration:
    """Calibration ``name``, given the keys of ``settings`` (a privacy Config) it declares."""
    entry = registry.entry("calibration", name, key="privacy.calibration")
    fields = type(settings).model_fields if settings is not None else {}
    own = {k: getattr(settings, k) for k in entry.config.model_fields if k in fields}
    made: Calibration = entry.cls(entry.config.model_validate(own))
    return made


def proven_below(name: str) -> float:
    """Per-release ε below which calibration ``name`` is a theorem (inf: every ε)."""
    return float(calibration_class(name).proven_below)


def per_release_target(
    epsilon: np.ndarray, delta: np.ndarray, *, noise: str = "gaussian"
) -> Target:
    """A target of one release each: totals equal to the per-release (ε, δ), T = 1."""
    eps, dlt = np.asarray(epsilon, float), np.asarray(delta, float)
    return Target(eps, dlt, eps, dlt, np.ones(eps.shape, dtype=np.int64), noise)
