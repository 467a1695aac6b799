"""fedgame: an agent-based economic game simulator for differentially private federated learning.

Mesa agents (a parameter server and strategic clients) decide rewards, privacy levels and
participation each round; one batched PyTorch learner trains every selected client at once.

The Python API (docs/python-api.md)::

    from fedgame import FedGameModel, load_scenario, run, sweep, load_run, load_sweep, register

Names are imported on first use (a module ``__getattr__``), so ``import fedgame`` stays
cheap: torch and the rest load only when a model, a run or a sweep needs them.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_EXPORTS = {
    "FedGameModel": "fedgame.model",
    "Scenario": "fedgame.scenario.schema",
    "ScenarioError": "fedgame.errors",
    "load_scenario": "fedgame.api",
    "run": "fedgame.api",
    "sweep": "fedgame.api",
    "load_run": "fedgame.analysis.load",
    "load_sweep": "fedgame.analysis.sweep",
    "register": "fedgame.registry",
}

__all__ = [
    "FedGameModel",
    "Scenario",
    "ScenarioError",
    "__version__",
    "load_run",
    "load_scenario",
    "load_sweep",
    "register",
    "run",
    "sweep",
]

if TYPE_CHECKING:
    from fedgame.analysis.load import load_run
    from fedgame.analysis.sweep import load_sweep
    from fedgame.api import load_scenario, run, sweep
    from fedgame.errors import ScenarioError
    from fedgame.model import FedGameModel
    from fedgame.registry import register
    from fedgame.scenario.schema import Scenario


def _load_plugins() -> None:
    """The registry's loader: import the built-in plug-ins and the entry points."""
    importlib.import_module("fedgame.plugins").load_all()


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'fedgame' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


class _Package(ModuleType):
    """``fedgame`` itself: an exported name is never replaced by a same-named subpackage.

    Importing ``fedgame.run.single`` makes Python set the attribute ``fedgame.run`` to the
    subpackage, which would hide the function ``fedgame.run``; the subpackage stays reachable
    as ``sys.modules["fedgame.run"]`` (what ``from fedgame.run.single import ...`` uses).
    """

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _EXPORTS and isinstance(value, ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def _install_loader() -> None:
    import fedgame.registry as registry

    registry.set_loader(_load_plugins)


_install_loader()
