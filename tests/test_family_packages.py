"""A family package registers every plug-in module it holds, and nothing else: a new plug-in
is one new file (``fedgame.registry.import_plugins``)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from fedgame import registry
from fedgame.registry import import_plugins

RULE = '''
    """A rule of one file: every other candidate."""
    from pydantic import BaseModel, ConfigDict

    from fedgame.registry import Example, register
    from fedgame.views import Selection


    @register("selection", "every_other_for_test")
    class EveryOther:
        example = Example({})

        class Config(BaseModel):
            model_config = ConfigDict(extra="forbid", frozen=True)

        def __init__(self, config):
            del config

        def expected_fraction(self, num_clients):
            return 0.5

        def select(self, candidates, *, info, rng):
            return Selection(tuple(c.client_id for c in candidates)[::2])
'''


@pytest.fixture
def family(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A package ``myfamily`` with a plug-in module, a helper that must not be imported by
    the scan, and a sub-package."""
    pkg = tmp_path / "myfamily"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("raise RuntimeError('sub-packages are not scanned')")
    (pkg / "every_other.py").write_text(textwrap.dedent(RULE))
    (pkg / "helper.py").write_text("raise RuntimeError('a helper is left to its importers')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield pkg
    for name in [m for m in sys.modules if m.startswith("myfamily")]:
        del sys.modules[name]
    registry._REGISTRY["selection"].pop("every_other_for_test", None)


def test_a_new_plugin_file_is_registered_and_helpers_are_left_alone(family: Path) -> None:
    import myfamily  # type: ignore[import-not-found]

    assert import_plugins("myfamily", myfamily.__path__) == ["every_other"]
    assert "myfamily.helper" not in sys.modules
    assert "every_other_for_test" in registry.names("selection")
    rule = registry.create("selection", "every_other_for_test", {})
    assert rule.expected_fraction(10) == 0.5


@pytest.mark.parametrize(
    "package",
    [
        "fedgame.mechanisms.selection",
        "fedgame.mechanisms.incentive",
        "fedgame.mechanisms.policy",
        "fedgame.mechanisms.aggregation",
        "fedgame.mechanisms.faults",
        "fedgame.privacy",
    ],
)
def test_every_builtin_plugin_module_of_a_family_is_registered(package: str) -> None:
    """Each module of the family that says ``@register`` is imported by the package (the
    registry's entries name their modules)."""
    import importlib

    module = importlib.import_module(package)
    found = import_plugins(package, module.__path__)
    assert found, f"{package} registers nothing"
    registered = {e.cls.__module__ for entries in registry.catalogue().values() for e in entries}
    for name in found:
        assert f"{package}.{name}" in registered, f"{package}.{name} registered nothing"


def test_a_metric_no_plugin_declares_stops_the_run_naming_it(tiny: dict) -> None:
    """The model checks the declared seams: a round metric returned by a plug-in but declared
    by none would be lost, so the round's collection refuses it, naming it."""
    import copy

    from fedgame.mechanisms.selection.uniform import UniformSelection
    from fedgame.model import FedGameModel
    from fedgame.scenario.load import validate

    class Talking(UniformSelection):
        """``uniform``, returning a metric it does not declare."""

        def select(self, candidates, *, info, rng):  # type: ignore[no-untyped-def]
            return super().select(candidates, info=info, rng=rng), {"undeclared_x": 1.0}

    data = copy.deepcopy(tiny)
    data["selection"] = {"kind": "uniform", "k": 2}
    model = FedGameModel(validate(data))
    model.server.selection_rule = Talking(UniformSelection.Config(k=2))
    with pytest.raises(RuntimeError, match=r"\['undeclared_x'\].*round_columns"):
        model.step()


def test_a_client_metric_no_plugin_declares_is_refused_naming_it(tiny: dict) -> None:
    from fedgame.model import FedGameModel
    from fedgame.scenario.load import validate

    model = FedGameModel(validate(tiny))
    with pytest.raises(RuntimeError, match=r"\['nobody_declares'\].*client_columns"):
        model.table.write_metrics({"nobody_declares": {0: 1.0}})
