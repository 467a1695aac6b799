"""Every shipped scenario validates and runs 3 rounds end to end."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedgame.run.single import simulate
from fedgame.scenario.load import load_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.y*ml"))


def test_there_are_scenarios():
    assert any(p.stem == "quickstart" for p in SCENARIOS)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_runs_three_rounds_reproducibly(path, tmp_path):
    scenario = load_scenario(path, ["rounds=3", "training.device=cpu"])
    result = simulate(scenario, out_dir=tmp_path)
    assert result.manifest["status"] == "completed"
    assert result.manifest["warnings"] == {}  # no degenerate play in a shipped scenario
    assert len(result.rounds) == 3
    assert result.rounds["test_accuracy"].between(0, 1).all()
    again = simulate(load_scenario(path, ["rounds=3", "training.device=cpu"]))
    timing = [c for c in result.rounds.columns if c.endswith("_s") or c == "wall_time_s"]
    pd.testing.assert_frame_equal(
        result.rounds.drop(columns=timing), again.rounds.drop(columns=timing)
    )
    pd.testing.assert_frame_equal(result.clients, again.clients)
