"""Contract tests over every registered plug-in: new plug-ins are covered automatically."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from fedgame import registry
from fedgame.errors import ScenarioError

ENTRIES = [e for entries in registry.catalogue().values() for e in entries]


def test_every_family_has_plugins():
    cat = registry.catalogue()
    empty = [f for f, entries in cat.items() if not entries]
    assert not empty


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e.family}:{e.name}" for e in ENTRIES])
def test_plugin_has_doc_and_strict_config(entry):
    assert entry.doc, f"{entry.family} plug-in {entry.name} needs a class docstring"
    assert issubclass(entry.config, BaseModel)
    assert entry.config.model_config.get("extra") == "forbid"


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e.family}:{e.name}" for e in ENTRIES])
def test_unknown_param_is_rejected_with_its_key(entry):
    with pytest.raises(ScenarioError) as info:
        registry.validate(entry.family, {"kind": entry.name, "no_such_knob": 1}, key="where")
    assert info.value.key.startswith("where")


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ScenarioError) as info:
        registry.validate("selection", {"kind": "nope"}, key="selection")
    assert info.value.key == "selection.kind"
    for name in registry.names("selection"):
        assert name in str(info.value)


def test_double_registration_refused(scratch_registry):
    # works on copies of the families, so the probe does not leak into other tests

    from fedgame.mechanisms.selection.all import AllSelection

    @registry.register("selection", "_contract_probe")
    class Probe(AllSelection):
        """Probe."""

    with pytest.raises(ValueError, match="registered twice"):

        @registry.register("selection", "_contract_probe")
        class Other(AllSelection):
            """Other."""


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e.family}:{e.name}" for e in ENTRIES])
def test_every_knob_has_a_one_line_description(entry):
    for name, field in entry.config.model_fields.items():
        text = field.description or ""
        assert text.strip(), f"{entry.family}:{entry.name}.{name} needs Field(description=...)"
        assert "\n" not in text, f"{entry.family}:{entry.name}.{name}: one line"
        assert "``" not in text, f"{entry.family}:{entry.name}.{name}: no ReST markup"


def _protocol_members(protocol: type) -> set[str]:
    """Public methods and class-level attributes a family Protocol declares."""
    names: set[str] = set()
    for base in protocol.__mro__:
        if not getattr(base, "_is_protocol", False) or base.__name__ in ("Protocol", "Generic"):
            continue
        names |= {n for n in vars(base) if not n.startswith("_")}
        names |= {n for n in getattr(base, "__annotations__", {}) if not n.startswith("_")}
    return names


def test_each_familys_required_members_are_its_protocols():
    from fedgame.data.datasets import DatasetSource
    from fedgame.data.partition import Partitioner
    from fedgame.learning.model_size import BuildsModel
    from fedgame.mechanisms.base import (
        Aggregator,
        ClientPolicy,
        FaultModel,
        IncentiveMechanism,
        SelectionPolicy,
    )
    from fedgame.network.topology import Topology
    from fedgame.privacy.accountants.base import Accountant
    from fedgame.privacy.base import PrivacyMechanism
    from fedgame.privacy.calibrations import Calibration

    protocols = {
        "dataset": DatasetSource,
        "partition": Partitioner,
        "model": BuildsModel,
        "incentive": IncentiveMechanism,
        "policy": ClientPolicy,
        "selection": SelectionPolicy,
        "privacy": PrivacyMechanism,
        "accountant": Accountant,
        "calibration": Calibration,
        "aggregation": Aggregator,
        "topology": Topology,
        "faults": FaultModel,
    }
    assert set(protocols) == set(registry.FAMILIES)
    #: instance attributes a Protocol names that a class cannot show before it is built
    per_instance = {"privacy": {"accountant"}}
    for family, protocol in protocols.items():
        want = _protocol_members(protocol) - per_instance.get(family, set())
        assert set(registry.REQUIRED[family]) == want, family


@pytest.mark.parametrize("family", registry.FAMILIES)
def test_every_registered_plugin_has_its_familys_members(family):
    for entry in registry.catalogue()[family]:
        missing = [m for m in registry.REQUIRED[family] if getattr(entry.cls, m, None) is None]
        assert not missing, (entry.name, missing)


def test_a_plugin_without_a_required_method_is_refused_naming_it(scratch_registry):
    class NoPlan:
        """A selection that forgot ``expected_fraction``."""

        def select(self, candidates, *, info, rng):
            return None

    with pytest.raises(TypeError, match=r"'half_selection'.*lacks expected_fraction"):
        scratch_registry.register("selection", "half_selection")(NoPlan)
    assert "half_selection" not in scratch_registry.names("selection")
