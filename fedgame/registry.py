"""Plug-in registry: every mechanism is chosen by name from the scenario file.

A plug-in is a class decorated with ``@register(family, name)``. It may define a nested
pydantic ``Config`` model (``extra="forbid"``) describing its keyword parameters; the scenario
loader validates ``{kind: name, ...params}`` against it, so each plug-in's knobs are checked at
the boundary with the dotted key of any bad value. ``create(family, spec)`` builds an instance
as ``cls(config)`` where ``config`` is the validated ``Config``.

Adding a mechanism is one file plus one import line in :mod:`fedgame.plugins`. Plug-ins from
outside fedgame come from entry points of group ``fedgame.plugins`` (loaded with the built-in
ones, on first use of the registry) and from the modules a scenario lists under ``plugins``;
:mod:`fedgame.plugins` loads both, and every entry remembers where it came from
(``Entry.origin``, shown by ``fedgame list``).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

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
    "calibration",
    "aggregation",
    "topology",
    "faults",
)

T = TypeVar("T")

#: what every plug-in of a family must have: the members of the family's Protocol
#: (``fedgame.mechanisms.base``, ``fedgame.privacy.base``, ...; a test keeps them equal).
#: ``register`` refuses a class that lacks one, naming it.
REQUIRED: dict[str, tuple[str, ...]] = {
    "dataset": ("load",),
    "partition": ("split",),
    "model": ("build",),
    "incentive": ("offer", "settle"),
    "policy": ("chooses", "respond"),
    "selection": ("expected_fraction", "select"),
    "privacy": (
        "epsilon_per_round",
        "follows",
        "next_charges",
        "noise",
        "placement",
        "plan",
        "privatise",
    ),
    "accountant": (
        "calibrate",
        "charge",
        "composed_epsilon",
        "describes",
        "epsilon",
        "epsilon_if",
        "name",
        "start",
    ),
    "calibration": (
        "describes",
        "epsilon_of",
        "loose_factor",
        "multipliers",
        "proven_below",
        "scope",
    ),
    "aggregation": ("aggregate",),
    "topology": ("build",),
    "faults": ("draw",),
}

#: origin of the plug-ins that ship with fedgame
BUILT_IN = "built-in"


@runtime_checkable
class ChecksScenario(Protocol):
    """A plug-in class checking its config against other sections; the loader calls it per load.

    ``check_scenario`` is a staticmethod raising ``ScenarioError`` on a bad combination, ``key``
    being the dotted path of the plug-in's section (e.g. ``"aggregation"``).
    """

    @staticmethod
    def check_scenario(config: Any, scenario: Any, *, key: str) -> None: ...


@dataclass(frozen=True)
class Example:
    """A small valid configuration of a plug-in and the scenario sections it needs.

    A plug-in class may declare ``example = Example({...}, needs={...})``; without one its
    defaults are its example. Contract tests draw every registered plug-in's example from
    :func:`example`, so a new plug-in is covered with no test edit.
    """

    config: Mapping[str, Any] = field(default_factory=dict)
    #: scenario sections the configuration needs (e.g. ``{"aggregation": {"kind": "mean"}}``)
    needs: Mapping[str, Any] = field(default_factory=dict)


class EmptyConfig(BaseModel):
    """Config of a plug-in that takes no parameters."""

    model_config = ConfigDict(extra="forbid", frozen=True)


#: the scenario keys outside its own section that a plug-in reads (dotted paths, e.g.
#: ``"population.privacy_value"``): a fixed collection, or a function of the plug-in's
#: validated config and the scenario (a fault model reads the graph only when edges fail)
Reads = Collection[str] | Callable[[Any, Any], Iterable[str]]


@dataclass(frozen=True)
class Entry:
    """One registered plug-in."""

    family: str
    name: str
    cls: type
    config: type[BaseModel]
    #: where it came from: ``built-in``, ``entry point NAME (DIST)``, ``scenario module M``,
    #: or ``module M`` (registered by code that imported fedgame, e.g. a notebook)
    origin: str = BUILT_IN
    #: the scenario keys outside its own section it reads (``register(..., reads=...)``)
    reads: Reads = ()

    @property
    def doc(self) -> str:
        return (self.cls.__doc__ or "").strip().splitlines()[0] if self.cls.__doc__ else ""

    def keys_read(self, config: Any, scenario: Any) -> frozenset[str]:
        """The scenario keys this plug-in reads with ``config`` in ``scenario``."""
        reads = self.reads(config, scenario) if callable(self.reads) else self.reads
        return frozenset(reads)


_REGISTRY: dict[str, dict[str, Entry]] = {f: {} for f in FAMILIES}
_LOADED = False
#: the origin of plug-ins registered now (set while an entry point or scenario module loads)
_loading_from: str | None = None


@contextmanager
def registering_from(origin: str) -> Iterator[None]:
    """Plug-ins registered inside this block are recorded with ``origin``."""
    global _loading_from
    outer, _loading_from = _loading_from, origin
    try:
        yield
    finally:
        _loading_from = outer


def _origin_of(cls: type) -> str:
    if _loading_from is not None:
        return _loading_from
    module = cls.__module__
    return BUILT_IN if module == "fedgame" or module.startswith("fedgame.") else f"module {module}"


def register(family: str, name: str, *, reads: Reads = ()) -> Callable[[type[T]], type[T]]:
    """Class decorator registering a plug-in under ``family``/``name``.

    ``reads`` declares the scenario keys outside the plug-in's own section that it reads
    (``population.privacy_value``, ``network.topology``, ``game.cartel``, ...; or a function
    ``(config, scenario) -> keys``): validation warns about a key set in a scenario that no
    chosen plug-in reads (:mod:`fedgame.scenario.effects`).
    """
    if isinstance(reads, str):
        raise TypeError(f"reads= takes a collection of dotted keys, not the string {reads!r}")
    if family not in _REGISTRY:
        raise ValueError(f"unknown plug-in family {family!r}; families: {', '.join(FAMILIES)}")

    def decorate(cls: type[T]) -> type[T]:
        missing = [m for m in REQUIRED[family] if getattr(cls, m, None) is None]
        if missing:
            raise TypeError(
                f"{family} plug-in {name!r} ({cls.__module__}.{cls.__qualname__}) lacks "
                f"{', '.join(missing)}: a {family} plug-in has {', '.join(REQUIRED[family])}"
            )
        existing = _REGISTRY[family].get(name)
        if existing is not None and existing.cls is not cls:
            raise ValueError(f"{family} plug-in {name!r} registered twice")
        config = getattr(cls, "Config", EmptyConfig)
        origin = existing.origin if existing is not None else _origin_of(cls)
        _REGISTRY[family][name] = Entry(family, name, cls, config, origin, reads)
        return cls

    return decorate


#: what loads the built-in and entry-point plug-ins on first use (``set_loader``): the
#: registry itself imports no plug-in, so it is a leaf that every plug-in module can import
_loader: Callable[[], None] | None = None


def set_loader(load: Callable[[], None]) -> None:
    """Install the function ``ensure_loaded`` runs once (the ``fedgame`` package installs
    ``fedgame.plugins.load_all``, which imports every family package and the entry points)."""
    global _loader
    _loader = load


#: how a module's source says that it registers a plug-in (``@register(`` or
#: ``@registry.register(``)
_REGISTERS = re.compile(r"^@(?:registry\.)?register\(", re.MULTILINE)


def import_plugins(package: str, path: Iterable[str]) -> list[str]:
    """Import every module of ``package`` (its ``__path__``) whose source registers a plug-in,
    in name order, and return their names: a family's package lists none by hand, so a new
    plug-in is one new file. Helper modules (no ``@register``) are left to their importers,
    so importing a family stays as light as its plug-ins (no torch for validation)."""
    import importlib
    import pkgutil
    from pathlib import Path

    found = []
    for module in pkgutil.iter_modules(list(path)):
        if module.ispkg:
            continue
        finder_path = getattr(module.module_finder, "path", "")
        source = Path(finder_path) / f"{module.name}.py"
        if source.is_file() and _REGISTERS.search(source.read_text(encoding="utf-8")):
            importlib.import_module(f"{package}.{module.name}")
            found.append(module.name)
    return found


def ensure_loaded() -> None:
    """Run the loader once: built-in plug-ins, then entry points (again after a failure)."""
    global _LOADED
    if _LOADED or _loader is None:
        return
    _LOADED = True
    try:
        _loader()
    except BaseException:
        _LOADED = False
        raise


def suggest(word: str, choices: Sequence[str]) -> str:
    """``"did you mean 'clients'?"`` for the nearest of ``choices`` (difflib), or ``""``."""
    near = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f"did you mean {' or '.join(repr(n) for n in near)}?" if near else ""


def names(family: str) -> list[str]:
    """Registered names of ``family``, sorted."""
    ensure_loaded()
    return sorted(_REGISTRY[family])


def entry(family: str, name: str, *, key: str | None = None) -> Entry:
    """Look up a plug-in; unknown names raise ``ScenarioError`` listing the valid ones."""
    ensure_loaded()
    found = _REGISTRY.get(family, {}).get(name)
    if found is None:
        valid = names(family)
        near = suggest(str(name), valid)
        raise ScenarioError(
            key or f"{family}.kind",
            name,
            f"allowed {family} kinds: {', '.join(valid)}{'; ' + near if near else ''}",
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
        raise scenario_error_from_pydantic(exc, prefix=key, model=found.config) from None


def create(family: str, kind: str, config: BaseModel | Mapping[str, Any] | None = None) -> Any:
    """Instantiate plug-in ``kind`` of ``family`` with a validated config."""
    found = entry(family, kind)
    if config is None or isinstance(config, Mapping):
        cfg = validate(family, {"kind": kind, **dict(config or {})}, key=family)
    else:
        cfg = config
    return found.cls(cfg)


def example(family: str, name: str) -> Example:
    """The plug-in's declared ``example`` (its defaults when it declares none)."""
    declared = getattr(entry(family, name).cls, "example", None)
    return declared if isinstance(declared, Example) else Example()


def catalogue() -> dict[str, list[Entry]]:
    """All registered plug-ins by family (for ``fedgame list``)."""
    ensure_loaded()
    return {f: [_REGISTRY[f][n] for n in sorted(_REGISTRY[f])] for f in FAMILIES}


def scenario_error_from_pydantic(
    exc: ValidationError, *, prefix: str = "", model: type[BaseModel] | None = None
) -> ScenarioError:
    """Turn pydantic's first error into a ``ScenarioError`` with a dotted key.

    ``model`` (the validated class) lets an unknown key's message name the nearest valid keys
    (``difflib``) and list the allowed ones.
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
            near = suggest(loc[-1], allowed) if loc else ""
            msg += f" ({near})" if near else ""
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
