"""Where plug-ins come from: fedgame's own modules, installed entry points, a scenario's modules.

* **Built-in**: the family packages imported below, each of which imports its own plug-in
  modules (their ``@register`` decorators run on import). Adding a mechanism to fedgame: write
  its file, then add one import line to its family package's ``__init__.py``.
* **Entry points**: an installed package declares, in its ``pyproject.toml``,
  ``[project.entry-points."fedgame.plugins"] my_name = "my_package.plugins"``. The module named
  is imported when the registry is first used, in every process that uses it (local sweep
  workers and Ray tasks too, wherever the package is installed). An entry point may name a
  callable instead (``"my_package:setup"``); it is called once.
* **Scenario modules**: ``plugins: [my_plugins]`` in a scenario imports those modules while
  the scenario is validated, before its components are looked up, and so wherever it is
  validated: the main process, local sweep workers, Ray tasks. A name is imported as Python
  imports it; one not found on ``sys.path`` is looked for in the current folder too (as
  ``python -m`` does). Sweep executors hand workers the folders the modules came from
  (:func:`module_dirs`).

A module that does not import is a ``ScenarioError`` (:class:`PluginImportError`) naming the
module and why, so the CLI prints one line and exits with code 2.

Importing this module is what ``fedgame validate``, ``list`` and ``explain`` pay for, so a
plug-in module imports torch, scipy, networkx and dp_accounting inside the functions that use
them (type hints under ``TYPE_CHECKING``), never at its top: ``tests/test_cli_startup.py``
checks it.
"""

# ruff: noqa: F401
from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Iterable, Sequence
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import ModuleType

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
from fedgame.errors import ScenarioError

#: the entry-point group fedgame loads plug-ins from
ENTRY_POINT_GROUP = "fedgame.plugins"
#: a module name a scenario may list under ``plugins``
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


class PluginImportError(ScenarioError):
    """A plug-in module (an entry point's or a scenario's) that does not import.

    Its message stands alone (it is about the module, not about a key of the file being
    read), so ``with_file``/``with_prefix`` keep it as it is.
    """

    def __init__(self, module: str, reason: str, *, source: str = "") -> None:
        self.module = module
        self.reason = reason
        self.source = source
        super().__init__("plugins", module, reason)

    def render(self) -> str:
        if self.source:
            return f"{self.source} names module {self.module!r}, which does not import: " + (
                self.reason
            )
        return f"plug-in module {self.module!r} does not import: {self.reason}"

    def with_file(self, file: str) -> ScenarioError:
        return self

    def with_prefix(self, prefix: str) -> ScenarioError:
        return self


def _reason(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())


def load_all() -> None:
    """What ``registry.ensure_loaded`` runs: the built-in families are imported with this
    module; then every installed entry point."""
    load_entry_points()


def load_entry_points() -> None:
    """Import every ``fedgame.plugins`` entry point (each once per process)."""
    for point in entry_points(group=ENTRY_POINT_GROUP):
        dist = point.dist.name if point.dist is not None else "an unknown package"
        with registry.registering_from(f"entry point {point.name} ({dist})"):
            _load_entry_point(point, dist)


def _load_entry_point(point: EntryPoint, dist: str) -> None:
    try:
        loaded = point.load()
        if callable(loaded) and not isinstance(loaded, ModuleType | type):
            loaded()
    except Exception as exc:
        raise PluginImportError(
            point.value,
            f"{_reason(exc)} (fix or uninstall {dist})",
            source=f"entry point {point.name!r} of {dist} (group {ENTRY_POINT_GROUP})",
        ) from None


def check_module_names(names: Iterable[object]) -> list[str]:
    """The names, each a dotted Python module name; otherwise ``ValueError`` saying so."""
    out = []
    for name in names:
        if not isinstance(name, str) or not MODULE_NAME.fullmatch(name):
            raise ValueError(
                f"{name!r} is not a module name; list importable modules, e.g. "
                "[my_plugins, my_package.plugins]"
            )
        out.append(name)
    return out


def load_modules(names: Sequence[str]) -> None:
    """Import a scenario's plug-in modules (after the built-in and entry-point plug-ins)."""
    registry.ensure_loaded()
    for name in names:
        if name in sys.modules:
            continue
        with registry.registering_from(f"scenario module {name}"):
            try:
                _import_here_too(name)
            except Exception as exc:
                raise PluginImportError(name, _reason(exc)) from None


def _import_here_too(name: str) -> None:
    """Import ``name``; when its top-level package is not on ``sys.path``, also look in the
    current folder (appended to ``sys.path``, so that spawned workers inherit it)."""
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        here = os.getcwd()
        if exc.name != name.split(".")[0] or here in sys.path:
            raise
        sys.path.append(here)
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as again:
            if again.name != exc.name:
                raise
            raise ModuleNotFoundError(
                f"No module named {exc.name!r} on sys.path or in the current folder {here}",
                name=exc.name,
            ) from None


def module_dirs(names: Iterable[str]) -> tuple[str, ...]:
    """The ``sys.path`` folders the (imported) modules ``names`` were loaded from."""
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
    """Append folders to ``sys.path`` (a worker process, before it validates a scenario)."""
    for folder in dirs:
        if folder not in sys.path:
            sys.path.append(folder)
