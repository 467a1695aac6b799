"""Every shipped scenario validates and runs 3 rounds end to end."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from golden import tables as golden

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
    # 8 winners of a unit rho = 0.02 each: each release is noisy (sigma = 10/|D_i|)
    "auction_first_price": {"noise"},
    "auction_threshold": {"noise"},
    "heterogeneous_dp": {"noise"},
    "population_scale": {"noise"},
    # on the digits fallback every client's planned participations round to 0 or its
    # budget is below one release: nobody takes part (on Fashion-MNIST they do)
    "privacy_aware": {"nobody_trained"},
    "quickstart": {"noise"},
    "queries_replies": {"nobody_trained"},
    "sweep_population_stragglers": {"noise"},
}


def test_there_are_scenarios():
    assert any(p.stem == "quickstart" for p in SCENARIOS)


def _same_data_everywhere(path: Path, folder: Path) -> list[str]:
    """Fashion-MNIST scenarios read an empty folder, so they run on their digits fallback on
    every machine (CI installs Fashion-MNIST, a fresh machine may not): the golden digests
    then hold everywhere."""
    text = path.read_text()
    return [f"data.dataset.path={folder}"] if "kind: fashion_mnist" in text else []


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario_runs_three_rounds_reproducibly(path, tmp_path):
    settings = ["rounds=3", "training.device=cpu", *SMOKE_SETTINGS.get(path.stem, [])]
    empty = tmp_path / "no-data"
    empty.mkdir()
    settings += _same_data_everywhere(path, empty)
    scenario = load_scenario(path, settings)
    result = simulate(scenario, out_dir=tmp_path)
    assert result.manifest["status"] == "completed"
    assert set(result.manifest["warnings"]) == EXPECTED_WARNINGS.get(path.stem, set())
    assert result.rounds["round"].nunique() == 3  # a market has one row per server
    assert result.rounds["test_accuracy"].between(0, 1).all()
    again = simulate(load_scenario(path, settings))
    timing = [c for c in result.rounds.columns if c.endswith("_s") or c == "wall_time_s"]
    pd.testing.assert_frame_equal(
        result.rounds.drop(columns=timing), again.rounds.drop(columns=timing)
    )
    pd.testing.assert_frame_equal(result.clients, again.clients)
    digests = {"rounds": golden.digest(result.rounds), "clients": golden.digest(result.clients)}
    if golden.updating():
        golden.record(path.stem, digests)
        return
    want = golden.load().get(path.stem)
    assert want is not None, f"no golden digests for {path.stem}: FEDGAME_UPDATE_GOLDEN=1"
    moved = [
        f"{table}.{line}"
        for table in ("rounds", "clients")
        for line in golden.differences(want[table], digests[table])
    ]
    assert not moved, f"{path.stem} results moved: " + "; ".join(moved[:8])
