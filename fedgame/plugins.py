"""Where plug-ins come from: fedgame's own modules, installed entry points, a scenario's modules.

* **Built-in**: the family packages imported below, each of which imports its own plug-in
  modules (their ``@register`` decorators run on import). Adding a mechanism to fedgame: write
  its file, then add one import line to its family package's ``__init__.py``.
* **Entry points**: an installed package declares, in its ``pyproject.toml``,
  ``[project.entry-points."fedgame.plugins"] my_name = "my_package.plugins"``. The module named
  is imported when the registry is first used, in every process that uses it (local sweep
  workers and Ray tasks too, wherever the package is installed). An entry point may name a
  callable instead (``"my_package:setup"``); it is called once.
* **Scenario modules**: ``plugins: [my_plugins]`` in a scenario imports those modules once the
  rest of the scenario's keys have validated, before its components are looked up, and so
  wherever it is validated: the main process, local sweep workers, Ray tasks. A plug-in module
  is code: fedgame imports one only when trusted (:mod:`fedgame.trust`: ``--trust-plugins``
  or ``FEDGAME_TRUST_PLUGINS=1``). A name is looked for first in the scenario file's own
  folder, then on ``sys.path``; the current folder is not searched unless it is one of those.
  Sweep executors hand workers the folders the modules came from (:func:`module_dirs`), which
  the workers search first in the same way (:func:`add_search_dirs`).

A module that does not import, or whose import raises anything at all (``SystemExit`` and
``KeyboardInterrupt`` included), is a ``ScenarioError`` (:class:`PluginImportError`) naming the
module and why, so the CLI prints one line and exits with code 2. Every plug-in module loaded
(scenario modules and entry points) is recorded with its file and the SHA-256 of that file's
content (:func:`describe_modules`, in each run's manifest).

Importing this module is what ``fedgame validate``, ``list`` and ``explain`` pay for, so a
plug-in module imports torch, scipy, networkx and dp_accounting inside the functions that use
them (type hints under ``TYPE_CHECKING``), never at its top: ``tests/test_cli_startup.py``
checks it.
"""

# ruff: noqa: F401
from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import os
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType
from typing import Any

# each family package imports its own plug-ins
import fedgame.data
import fedgame.learning
import fedgame.mechanisms.aggregation
import fedgame.mechanisms.faults
import fedgame.mechanisms.incentive
import fedgame.mechanisms.policy
import fedgame.mechanisms.selection
import fedgame.network
import fedgame.privacy
import fedgame.registry as registry
from fedgame.errors import Interrupted, ScenarioError
from fedgame.trust import require_trust

#: the entry-point group fedgame loads plug-ins from
ENTRY_POINT_GROUP = "fedgame.plugins"
#: a module name a scenario may list under ``plugins``
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
#: longest module name and most modules a scenario may list
MAX_NAME_CHARS = 200
MAX_MODULES = 100


class PluginImportError(ScenarioError):
    """A plug-in module (an entry point's or a scenario's) that does not import.

    Its message is about the module, not about a key: an entry point's names the package
    (``with_file`` keeps it as it is), a scenario module's names the scenario file that lists
    it when there is one.
    """

    def __init__(
        self, module: str, reason: str, *, source: str = "", file: str | None = None
    ) -> None:
        self.module = module
        self.reason = reason
        self.source = source
        super().__init__("plugins", module, reason, file=file)

    def render(self) -> str:
        if self.source:
            return f"{self.source} names module {self.module!r}, which does not import: " + (
                self.reason
            )
        where = f"{self.file}: " if self.file else ""
        return f"{where}plug-in module {self.module!r} does not import: {self.reason}"

    def with_file(self, file: str) -> ScenarioError:
        if self.source or self.file:
            return self
        return PluginImportError(self.module, self.reason, file=file)

    def with_prefix(self, prefix: str) -> ScenarioError:
        return self


@dataclass(frozen=True)
class PluginModule:
    """A plug-in module that was loaded: where from, its file and that file's SHA-256."""

    module: str
    origin: str
    file: str | None
    sha256: str | None

    def describe(self) -> dict[str, Any]:
        return {"module": self.module, "origin": self.origin, "file": self.file,
                "sha256": self.sha256}  # fmt: skip


#: every plug-in module this process loaded (scenario modules and entry points), by name
_LOADED_MODULES: dict[str, PluginModule] = {}
#: folders a worker searches first for scenario modules (where the driver found them)
_SEARCH_DIRS: list[str] = []


def _reason(exc: BaseException) -> str:
    said = str(exc)
    text = " ".join((f"{type(exc).__name__}: {said}" if said else type(exc).__name__).split())
    return text if len(text) <= 300 else text[:297] + "..."


def _is_signal(exc: BaseException) -> bool:
    """A real SIGINT/SIGTERM that reached this process (fedgame's own ``Interrupted``)."""
    return isinstance(exc, Interrupted)


def load_all() -> None:
    """What ``registry.ensure_loaded`` runs: the built-in families are imported with this
    module; then every installed entry point."""
    load_entry_points()


def load_entry_points() -> None:
    """Import every ``fedgame.plugins`` entry point (each once per process)."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        dist = point.dist.name if point.dist is not None else "an unknown package"
        origin = f"entry point {point.name} ({dist})"
        with registry.registering_from(origin):
            _load_entry_point(point, dist)
        _record(point.module, origin)


def _load_entry_point(point: EntryPoint, dist: str) -> None:
    try:
        loaded = point.load()
        if callable(loaded) and not isinstance(loaded, ModuleType | type):
            loaded()
    except BaseException as exc:  # SystemExit, KeyboardInterrupt: the module's, not the user's
        if _is_signal(exc):
            raise
        raise PluginImportError(
            point.value,
            f"{_reason(exc)} (fix or uninstall {dist})",
            source=f"entry point {point.name!r} of {dist} (group {ENTRY_POINT_GROUP})",
        ) from None


def check_module_names(names: Iterable[object]) -> list[str]:
    """The names, each a dotted Python module name; otherwise ``ValueError`` saying so."""
    out = []
    for name in names:
        if (
            not isinstance(name, str)
            or len(name) > MAX_NAME_CHARS
            or not name.isascii()
            or not MODULE_NAME.fullmatch(name)
        ):
            raise ValueError(
                f"{name!r} is not a module name; list importable modules (ASCII, at most "
                f"{MAX_NAME_CHARS} characters), e.g. [my_plugins, my_package.plugins]"
            )
        out.append(name)
    if len(out) > MAX_MODULES:
        raise ValueError(f"at most {MAX_MODULES} modules, not {len(out)}")
    return out


def load_modules(names: Sequence[str], *, near: str | Path | None = None) -> None:
    """Import a scenario's plug-in modules (after the built-in and entry-point plug-ins).

    Refused unless trusted (:func:`fedgame.trust.require_trust`). Each name is looked for in
    ``near`` (the scenario file's folder) and the folders :func:`add_search_dirs` gave, then
    on ``sys.path``. Anything the import raises becomes a :class:`PluginImportError`.
    """
    if not names:
        return
    require_trust(names)
    registry.ensure_loaded()
    folders = list(dict.fromkeys([*([os.path.abspath(near)] if near else []), *_SEARCH_DIRS]))
    for name in names:
        with registry.registering_from(f"scenario module {name}"):
            try:
                _import(name, folders)
            except PluginImportError:
                raise
            except BaseException as exc:  # SystemExit, KeyboardInterrupt: the module's
                if _is_signal(exc):
                    raise
                raise PluginImportError(name, _reason(exc)) from None
        _record(name, "scenario module")


def _import(name: str, folders: Sequence[str]) -> None:
    """Import ``name``, its top-level package from the first of ``folders`` holding it, else
    from ``sys.path``; a top-level module already imported from elsewhere is an error."""
    top = name.split(".")[0]
    spec = importlib.machinery.PathFinder.find_spec(top, list(folders)) if folders else None
    loaded = sys.modules.get(top)
    if spec is not None and loaded is None:
        _execute(top, spec)
    elif spec is not None and loaded is not None and not _same_file(loaded, spec):
        raise PluginImportError(
            name,
            f"a module {top!r} is already imported from {_where(loaded)}, not from "
            f"{spec.origin or spec.name} (two modules of one name; rename one)",
        )
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name != top or spec is not None:
            raise
        beside = f"beside the scenario ({folders[0]}), " if folders else ""
        raise ModuleNotFoundError(
            f"No module named {top!r} {beside}on sys.path (the current folder is not "
            "searched unless it is one of these)",
            name=top,
        ) from None


def _execute(top: str, spec: importlib.machinery.ModuleSpec) -> None:
    module = importlib.util.module_from_spec(spec)
    sys.modules[top] = module
    try:
        if spec.loader is not None:
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(top, None)
        raise


def _same_file(module: ModuleType, spec: importlib.machinery.ModuleSpec) -> bool:
    mine, theirs = getattr(module, "__file__", None), spec.origin
    if not mine or not theirs or not os.path.isabs(theirs):
        return True  # a namespace or built-in module: nothing to compare
    return os.path.realpath(mine) == os.path.realpath(theirs)


def _where(module: ModuleType) -> str:
    return str(getattr(module, "__file__", None) or "a built-in or namespace module")


def _record(name: str, origin: str) -> None:
    """Remember a loaded plug-in module with its file and that file's SHA-256."""
    if name in _LOADED_MODULES:
        return
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None) if module is not None else None
    _LOADED_MODULES[name] = PluginModule(name, origin, file, _file_sha256(file))


def _file_sha256(file: str | None) -> str | None:
    if not file:
        return None
    digest = hashlib.sha256()
    try:
        with open(file, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def describe_modules(names: Iterable[str] = ()) -> list[dict[str, Any]]:
    """The plug-in modules a run used: every entry point's module and the scenario's ``names``,
    each with its origin, file and SHA-256 (for the manifest)."""
    registry.ensure_loaded()
    wanted = [m for m in _LOADED_MODULES.values() if m.origin.startswith("entry point")]
    for name in names:
        _record(name, "scenario module")
        wanted.append(_LOADED_MODULES[name])
    return [m.describe() for m in dict.fromkeys(wanted)]


def module_dirs(names: Iterable[str]) -> tuple[str, ...]:
    """The folders the (imported) modules ``names`` were loaded from."""
    dirs: list[str] = []
    for name in names:
        top = sys.modules.get(name.split(".")[0])
        if top is None:
            continue
        if top.__file__ is not None:
            path = Path(top.__file__).resolve().parent
            folder = path.parent if hasattr(top, "__path__") else path
        elif getattr(top, "__path__", None):
            folder = Path(next(iter(top.__path__))).resolve().parent  # a namespace package
        else:
            continue
        if str(folder) not in dirs:
            dirs.append(str(folder))
    return tuple(dirs)


def add_search_dirs(dirs: Iterable[str]) -> None:
    """Search these folders first for scenario modules (a worker process, before it validates
    a scenario: the folders the driver imported the modules from)."""
    for folder in dirs:
        if folder not in _SEARCH_DIRS:
            _SEARCH_DIRS.append(folder)
