"""``load_run`` picks the newest single run; run ids and manifests identify what ran."""

from __future__ import annotations

import time

import pytest

from fedgame.analysis.load import load_run
from fedgame.errors import FedGameError
from fedgame.run.grid import plan_sweep
from fedgame.run.single import simulate
from fedgame.run.store import RECORDED_PACKAGES
from fedgame.run.sweep import run_sweep
from fedgame.scenario.load import validate


def test_newest_single_run_is_loaded_not_a_sweeps_run(tiny, tmp_path, write_scenario):
    tiny.update(rounds=1)
    tiny["population"]["clients"] = 6
    tiny["selection"]["k"] = 3
    first = simulate(validate(tiny), out_dir=tmp_path).run_dir
    path = write_scenario(tiny, "tiny.yaml")
    time.sleep(0.05)
    run_sweep(plan_sweep(path, grid=["population.clients=6,7"], out=tmp_path), workers=1)
    assert load_run(tmp_path / "tiny").path == first  # the sweep ran later, but is a sweep
    sweep_dir = next((tmp_path / "tiny").glob("sweep-*"))
    assert load_run(sweep_dir).path.parent.name == "runs"  # asked about the sweep itself
    with pytest.raises(FedGameError, match="no single run"):
        load_run(tmp_path / "nothing")


def test_manifest_records_every_dependency_and_the_dirty_flag(tiny, tmp_path):
    tiny.update(rounds=1)
    manifest = simulate(validate(tiny), out_dir=tmp_path).manifest
    for name in ("fedgame", "python", *RECORDED_PACKAGES):
        assert name in manifest["versions"]
    assert manifest["versions"]["dp-accounting"] != "not installed"
    assert manifest["git_dirty"] in (True, False, None)


def test_sweeps_that_differ_by_a_set_get_different_run_ids(tiny, write_scenario, tmp_path):
    path = write_scenario(tiny, "tiny.yaml")
    grid = ["population.clients=10,12"]
    a = plan_sweep(path, grid=grid, out=tmp_path)
    b = plan_sweep(path, grid=grid, overrides=["privacy.clip=2.0"], out=tmp_path)
    same = plan_sweep(path, grid=grid, out=tmp_path)
    ids = {r.run_id for r in a.runs}
    assert ids.isdisjoint({r.run_id for r in b.runs})
    assert ids == {r.run_id for r in same.runs}
    assert len(ids) == 2
