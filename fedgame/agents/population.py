"""Distributions of client attributes, as written in scenario files.

Each distribution is a small pydantic model with a ``sample(n, rng=...)`` method. In a scenario
a bare number means ``constant`` and a bare list means ``list`` (one value per client)::

    privacy_value: {dist: uniform, low: 0.5, high: 1.5}
    budget: {epsilon: {dist: mixture, components: [{weight: 0.3, dist: uniform, low: 0.1,
             high: 0.5}, {weight: 0.7, dist: uniform, low: 5, high: 10}]}, delta: 1.0e-5}
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator


def _refuse_bools(value: Any) -> Any:
    """Distribution fields are numbers: ``true``/``false`` is refused (pydantic reads 1/0)."""
    if isinstance(value, dict):
        for key, item in value.items():
            items = item if isinstance(item, list) else [item]
            if any(isinstance(v, bool) for v in items):
                raise ValueError(f"{key} must be a number, not true/false")
    return value


class _Dist(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _no_bools(cls, value: Any) -> Any:
        return _refuse_bools(value)

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        raise NotImplementedError

    def support(self) -> tuple[float, float]:
        """Smallest interval that holds every value the distribution can draw."""
        raise NotImplementedError


class Constant(_Dist):
    """Every client gets ``value``."""

    dist: Literal["constant"] = "constant"
    value: float

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, self.value, dtype=float)

    def support(self) -> tuple[float, float]:
        return (self.value, self.value)


class Uniform(_Dist):
    """U[low, high]."""

    dist: Literal["uniform"]
    low: float
    high: float

    @model_validator(mode="after")
    def _ordered(self) -> Uniform:
        if self.high < self.low:
            raise ValueError(f"needs low <= high, got low={self.low}, high={self.high}")
        return self

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        return rng.uniform(self.low, self.high, size=n)

    def support(self) -> tuple[float, float]:
        return (self.low, self.high)


#: the smallest positive float: a log-normal draw never goes below it
_SMALLEST_POSITIVE = float(np.finfo(float).tiny)


class Normal(_Dist):
    """N(mean, std²), optionally clipped to [low, high]."""

    dist: Literal["normal"]
    mean: float
    std: float = Field(ge=0.0)
    low: float = -np.inf
    high: float = np.inf

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        return np.clip(rng.normal(self.mean, self.std, size=n), self.low, self.high)

    def support(self) -> tuple[float, float]:
        return (self.low, self.high) if self.std > 0 else (self.mean, self.mean)


class LogNormal(_Dist):
    """exp(N(mean, sigma²)), optionally clipped to [low, high].

    Positive: a draw that underflows to 0 (possible only for a huge ``sigma``) is raised to the
    smallest positive float, so an unclipped log-normal is valid where values must be > 0
    (``privacy_value``, budgets)."""

    dist: Literal["lognormal"]
    mean: float = 0.0
    sigma: float = Field(1.0, ge=0.0)
    low: float = 0.0
    high: float = np.inf

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        floor = max(self.low, _SMALLEST_POSITIVE)
        return np.clip(rng.lognormal(self.mean, self.sigma, size=n), floor, self.high)

    def support(self) -> tuple[float, float]:
        return (max(self.low, _SMALLEST_POSITIVE), self.high)


class Choice(_Dist):
    """One of ``values`` per client, with optional probabilities ``probs``."""

    dist: Literal["choice"]
    values: list[float] = Field(min_length=1)
    probs: list[float] | None = None

    @model_validator(mode="after")
    def _probs(self) -> Choice:
        if self.probs is not None:
            if len(self.probs) != len(self.values) or min(self.probs) < 0:
                raise ValueError("probs needs one non-negative entry per value")
            if not np.isclose(sum(self.probs), 1.0):
                raise ValueError(f"probs must sum to 1, got {sum(self.probs)}")
        return self

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        return rng.choice(np.asarray(self.values, dtype=float), size=n, p=self.probs)

    def support(self) -> tuple[float, float]:
        return (min(self.values), max(self.values))


class ExplicitList(_Dist):
    """One value per client, in client-id order."""

    dist: Literal["list"]
    values: list[float] = Field(min_length=1)

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        if len(self.values) != n:
            raise ValueError(f"list has {len(self.values)} values for {n} clients")
        return np.asarray(self.values, dtype=float)

    def support(self) -> tuple[float, float]:
        return (min(self.values), max(self.values))


class MixtureComponent(BaseModel):
    """A weighted component of a mixture: ``{weight: 0.3, dist: uniform, ...}``."""

    model_config = ConfigDict(extra="allow", frozen=True)
    weight: float = Field(gt=0.0)

    @model_validator(mode="before")
    @classmethod
    def _no_bools(cls, value: Any) -> Any:
        return _refuse_bools(value)

    def distribution(self) -> Distribution:
        return parse_distribution(dict(self.model_extra or {}))


class Mixture(_Dist):
    """Each client draws its component by weight, then its value from that component."""

    dist: Literal["mixture"]
    components: list[MixtureComponent] = Field(min_length=1)

    @model_validator(mode="after")
    def _components(self) -> Mixture:
        for i, comp in enumerate(self.components):
            if isinstance(comp.distribution(), ExplicitList | Mixture):
                raise ValueError(
                    f"component {i} is a {comp.distribution().dist}; a mixture component is a "
                    "constant, uniform, normal, lognormal or choice distribution"
                )
        total = sum(c.weight for c in self.components)
        if not np.isclose(total, 1.0):
            raise ValueError(f"component weights must sum to 1, got {total:g}")
        return self

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        weights = np.array([c.weight for c in self.components])
        which = rng.choice(len(weights), size=n, p=weights / weights.sum())  # sums to 1 already
        out = np.empty(n, dtype=float)
        for k, comp in enumerate(self.components):
            mask = which == k
            out[mask] = comp.distribution().sample(int(mask.sum()), rng=rng)
        return out

    def support(self) -> tuple[float, float]:
        bounds = [c.distribution().support() for c in self.components]
        return (min(b[0] for b in bounds), max(b[1] for b in bounds))


Distribution = Annotated[
    Constant | Uniform | Normal | LogNormal | Choice | ExplicitList | Mixture,
    Field(discriminator="dist"),
]

DIST_KINDS = ("constant", "uniform", "normal", "lognormal", "choice", "list", "mixture")


def coerce_distribution(value: Any) -> Any:
    """Shorthand: a number is ``constant``, a list is ``list``; dicts pass through. A number
    written as text (YAML reads ``1e9`` so) is a number, as elsewhere in a scenario."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return value
    if isinstance(value, int | float):
        return {"dist": "constant", "value": value}
    if isinstance(value, list):
        return {"dist": "list", "values": value}
    if isinstance(value, dict) and "dist" not in value and "value" in value:
        return {"dist": "constant", **value}
    return value


def parse_distribution(value: Any) -> Distribution:
    """Validate one distribution spec (used for mixture components)."""
    from pydantic import TypeAdapter

    return TypeAdapter(Distribution).validate_python(coerce_distribution(value))
