"""The shared privacy knobs: one name per knob, calibrations chosen from the registry."""

from __future__ import annotations

import warnings

import pytest
from helpers_dp import scenario

from fedgame import registry
from fedgame.errors import ScenarioError
from fedgame.privacy.settings import PrivacySettings, deprecated_key

#: the mechanisms that read the shared privacy knobs
SHARED = ["gaussian", "gaussian_local", "ldp", "lightdp", "smpc_dp", "ideal_smpc"]


@pytest.mark.parametrize("kind", SHARED)
def test_every_shared_mechanism_reads_the_same_knobs(kind):
    config = registry.entry("privacy", kind).config
    assert issubclass(config, PrivacySettings)
    assert set(PrivacySettings.model_fields) <= set(config.model_fields)
    assert "sensitivity" not in config.model_fields


@pytest.mark.parametrize("kind", ["ldp", "lightdp", "smpc_dp", "ideal_smpc"])
def test_the_old_sensitivity_key_still_works_with_one_deprecation_line(kind):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = registry.validate("privacy", {"kind": kind, "sensitivity": "sample"}, key="p")
    assert config.level == "sample"  # type: ignore[attr-defined]
    lines = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert lines == [deprecated_key("sensitivity", "level")]


def test_old_and_new_name_together_are_refused():
    with pytest.raises(ScenarioError, match="set level only"):
        registry.validate(
            "privacy", {"kind": "ldp", "sensitivity": "sample", "level": "update"}, key="privacy"
        )


def test_gaussian_accepts_every_calibration_describing_its_release(tiny, write_scenario):
    from fedgame.cli import main

    for name in ("analytic", "accountant", "dpfl_bcs"):
        data = scenario(tiny, privacy={"kind": "gaussian", "calibration": name})
        assert main(["validate", str(write_scenario(data))]) == 0, name


def test_a_calibration_that_cannot_describe_the_release_is_refused(tiny, write_scenario, capsys):
    from fedgame.cli import main

    data = scenario(tiny, privacy={"kind": "lightdp", "calibration": "dpfl_bcs"})
    data["aggregation"] = {"kind": "mean"}
    data["network"] = {"topology": {"kind": "complete"}, "faults": {"kind": "none"}}
    assert main(["validate", str(write_scenario(data))]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "privacy.calibration" in err and "privacy.kind 'lightdp'" in err
    assert "analytic" in err and "lightdp" in err
