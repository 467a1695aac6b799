"""Plug-in registry: every mechanism is chosen by name from the scenario file.

A plug-in is a class decorated with ``@register(family, name)``. It may define a nested
pydantic ``Config`` model (``extra="forbid"``) describing its keyword parameters; the scenario
loader validates ``{kind: name, ...params}`` against it, so each plug-in's knobs are checked at
the boundary with the dotted key of any bad value. ``create(family, spec)`` builds an instance
as ``cls(config)`` where ``config`` is the validated ``Config``.

Adding a mechanism is one file plus one import line in :mod:`fedgame.plugins`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from fedgame.errors import ScenarioError

FAMILIES = (
    "dataset",
    "partition",
    "model",
    "incentive",
    "policy",
    "selection",
    "privacy",
    "accountant",
    "aggregation",
    "topology",
    "faults",
)

T = TypeVar("T")


class EmptyConfig(BaseModel):
    """Config of a plug-in that takes no parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class Entry:
    """One registered plug-in."""

    family: str
    name: str
    cls: type
    config: type[BaseModel]

    @property
    def doc(self) -> str:
        return (self.cls.__doc__ or "").strip().splitlines()[0] if self.cls.__doc__ else ""


_REGISTRY: dict[str, dict[str, Entry]] = {f: {} for f in FAMILIES}
_LOADED = False


def register(family: str, name: str) -> Callable[[type[T]], type[T]]:
    """Class decorator registering a plug-in under ``family``/``name``."""
    if family not in _REGISTRY:
        raise ValueError(f"unknown plug-in family {family!r}; families: {', '.join(FAMILIES)}")

    def decorate(cls: type[T]) -> type[T]:
        existing = _REGISTRY[family].get(name)
        if existing is not None and existing.cls is not cls:
            raise ValueError(f"{family} plug-in {name!r} registered twice")
        config = getattr(cls, "Config", EmptyConfig)
        _REGISTRY[family][name] = Entry(family, name, cls, config)
        return cls

    return decorate


def _ensure_loaded() -> None:
    global _LOADED
    if not _LOADED:
        _LOADED = True
        importlib.import_module("fedgame.plugins")


def names(family: str) -> list[str]:
    """Registered names of ``family``, sorted."""
    _ensure_loaded()
    return sorted(_REGISTRY[family])


def entry(family: str, name: str, *, key: str | None = None) -> Entry:
    """Look up a plug-in; unknown names raise ``ScenarioError`` listing the valid ones."""
    _ensure_loaded()
    found = _REGISTRY.get(family, {}).get(name)
    if found is None:
        raise ScenarioError(
            key or f"{family}.kind", name, f"allowed {family} kinds: {', '.join(names(family))}"
        )
    return found


def validate(family: str, spec: Mapping[str, Any] | BaseModel, *, key: str) -> BaseModel:
    """Validate ``spec`` (``{"kind": name, **params}``) against the plug-in's ``Config``."""
    if isinstance(spec, BaseModel):
        return spec
    params = dict(spec)
    kind = params.pop("kind", None)
    if not isinstance(kind, str):
        raise ScenarioError(f"{key}.kind", kind, f"a {family} name: {', '.join(names(family))}")
    found = entry(family, kind, key=f"{key}.kind")
    try:
        return found.config.model_validate(params)
    except ValidationError as exc:
        raise scenario_error_from_pydantic(exc, prefix=key) from None


def create(family: str, kind: str, config: BaseModel | Mapping[str, Any] | None = None) -> Any:
    """Instantiate plug-in ``kind`` of ``family`` with a validated config."""
    found = entry(family, kind)
    if config is None or isinstance(config, Mapping):
        cfg = validate(family, {"kind": kind, **dict(config or {})}, key=family)
    else:
        cfg = config
    return found.cls(cfg)


def catalogue() -> dict[str, list[Entry]]:
    """All registered plug-ins by family (for ``fedgame list``)."""
    _ensure_loaded()
    return {f: [_REGISTRY[f][n] for n in sorted(_REGISTRY[f])] for f in FAMILIES}


def scenario_error_from_pydantic(
    exc: ValidationError, *, prefix: str = "", model: type[BaseModel] | None = None
) -> ScenarioError:
    """Turn pydantic's first error into a ``ScenarioError`` with a dotted key.

    ``model`` (the validated class) lets an unknown key's message list the allowed keys.
    """
    err = exc.errors()[0]
    loc = [str(p) for p in err.get("loc", ()) if not str(p).startswith("function-")]
    key = ".".join([p for p in [prefix, *loc] if p])
    value = err.get("input", ...)
    kind = err.get("type", "")
    msg = err.get("msg", "")
    if kind == "extra_forbidden":
        value = ...
        msg = "is not a known key"
        allowed = _fields_at(model, loc[:-1]) if model is not None else []
        if allowed:
            msg += f"; allowed keys here: {', '.join(allowed)}"
    elif kind == "missing":
        value = ...
        msg = "is required"
    elif msg.startswith("Value error, "):
        msg = msg.removeprefix("Value error, ")
    if isinstance(value, dict | list) and len(repr(value)) > 120:
        value = f"{type(value).__name__} of {len(value)} items"
    return ScenarioError(key, value, msg)


def _fields_at(model: type[BaseModel], loc: list[str]) -> list[str]:
    """Field names of the sub-model reached by following ``loc`` from ``model``."""
    current: Any = model
    for part in loc:
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return []
        current = _model_in(fields[part].annotation)
        if current is None:
            return []
    fields = getattr(current, "model_fields", None)
    return sorted(fields) if fields else []


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _model_in(arg)
        if found is not None:
            return found
    return None
