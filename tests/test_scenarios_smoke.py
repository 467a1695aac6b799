"""Every shipped scenario validates and runs 3 rounds end to end."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from fedgame.run.single import simulate
from fedgame.scenario.load import load_scenario

SCENARIOS = sorted((Path(__file__).resolve().parents[1] / "scenarios").glob("*.y*ml"))
#: smaller populations for the smoke run (the full sizes are timed by the bench scripts:
#: population_scale's 10^6 clients by bench/population_scale.py, flower_style's full
#: Fashion-MNIST by bench/startup.py)
SMOKE_SETTINGS = {
    "population_scale": ["population.clients=20000"],
    "flower_style": ["data.dataset.max_train=12000", "data.dataset.max_test=2000"],
}


#: the degenerate play each shipped scenario shows in its first 3 rounds (measured; every
#: other scenario shows none): local DP whose released average carries a noise norm above
#: the clipping bound C (the rounds table's ``noise_norm_over_clip``), and queries_replies'
#: idle rounds after its active rounds T* (nobody trains: by the mechanism's design)
EXPECTED_WARNINGS = {
    "heterogeneous_dp": {"noise"},
    "population_scale": {"noise"},
    "privacy_aware": {"noise"},
    "quickstart": {"noise"},
    "queries_replies": {"nobody_trained"},
}


def test_there_are_scenarios():
    assert any(p.stem == "quickstart" for p in SCENARIOS)


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_runs_three_rounds_reproducibly(path, tmp_path):
    settings = ["rounds=3", "training.device=cpu", *SMOKE_SETTINGS.get(path.stem, [])]
    scenario = load_scenario(path, settings)
    result = simulate(scenario, out_dir=tmp_path)
    assert result.manifest["status"] == "completed"
    assert set(result.manifest["warnings"]) == EXPECTED_WARNINGS.get(path.stem, set())
    assert len(result.rounds) == 3
    assert result.rounds["test_accuracy"].between(0, 1).all()
    again = simulate(load_scenario(path, settings))
    timing = [c for c in result.rounds.columns if c.endswith("_s") or c == "wall_time_s"]
    pd.testing.assert_frame_equal(
        result.rounds.drop(columns=timing), again.rounds.drop(columns=timing)
    )
    pd.testing.assert_frame_equal(result.clients, again.clients)
