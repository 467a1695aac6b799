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

    @registry.register("selection", "_contract_probe")
    class Probe:
        """Probe."""

    with pytest.raises(ValueError, match="registered twice"):

        @registry.register("selection", "_contract_probe")
        class Other:
            """Other."""


@pytest.mark.parametrize("entry", ENTRIES, ids=[f"{e.family}:{e.name}" for e in ENTRIES])
def test_every_knob_has_a_one_line_description(entry):
    for name, field in entry.config.model_fields.items():
        text = field.description or ""
        assert text.strip(), f"{entry.family}:{entry.name}.{name} needs Field(description=...)"
        assert "\n" not in text, f"{entry.family}:{entry.name}.{name}: one line"
        assert "``" not in text, f"{entry.family}:{entry.name}.{name}: no ReST markup"
