"""Sweep plans: grid expansion, deterministic run ids, and bad input rejected before running."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.cli import main
from fedgame.errors import ScenarioError
from fedgame.run.executors import check_address
from fedgame.run.grid import expand, parse_grid_arg, plan_sweep


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(1, 4), max_size=3))
def test_expand_is_the_cartesian_product(sizes):
    grid = {f"k{i}": list(range(n)) for i, n in enumerate(sizes)}
    points = expand(grid)
    assert len(points) == math.prod(sizes)
    assert len({tuple(p.items()) for p in points}) == len(points)


def test_plan_counts_points_times_replicates(tiny, write_scenario, tmp_path):
    tiny["sweep"] = {"grid": {"population.clients": [8, 12, 16]}, "replicates": 2}
    path = write_scenario(tiny)
    plan = plan_sweep(path, grid=["selection.k=2,3"], out=tmp_path / "out")
    assert len(plan.runs) == 3 * 2 * 2
    assert plan.grid == {"population.clients": [8, 12, 16], "selection.k": [2, 3]}
    assert len({r.run_id for r in plan.runs}) == len(plan.runs)
    # the command line replaces a file key and sets the replicates
    plan2 = plan_sweep(path, grid=["population.clients=[8]"], replicates=3, out=tmp_path / "o")
    assert [r.replicate for r in plan2.runs] == [0, 1, 2]
    assert all(r.data["population"]["clients"] == 8 for r in plan2.runs)


def test_run_ids_and_folder_are_deterministic(tiny, write_scenario, tmp_path):
    path = write_scenario(tiny)
    a = plan_sweep(path, grid=["selection.k=2,3"], replicates=2, out=tmp_path)
    b = plan_sweep(path, grid=["selection.k=2,3"], replicates=2, out=tmp_path)
    c = plan_sweep(path, grid=["selection.k=2,4"], replicates=2, out=tmp_path)
    assert [r.run_id for r in a.runs] == [r.run_id for r in b.runs]
    assert a.sweep_dir == b.sweep_dir != c.sweep_dir
    assert a.sweep_dir.parent == tmp_path / "tiny"
    # more replicates keep the same folder and ids (a resumed sweep can grow)
    d = plan_sweep(path, grid=["selection.k=2,3"], replicates=3, out=tmp_path)
    assert d.sweep_dir == a.sweep_dir
    assert {r.run_id for r in a.runs} < {r.run_id for r in d.runs}


def test_parse_grid_arg():
    assert parse_grid_arg("a.b=1,2.5,x") == ("a.b", [1, 2.5, "x"])
    assert parse_grid_arg("a=[1, 2]") == ("a", [1, 2])
    assert parse_grid_arg("a=") == ("a", [])


@pytest.mark.parametrize(
    ("grid", "key"),
    [
        (["population.clientz=1,2"], "population.clientz"),
        (["population.clients="], "sweep.grid.population.clients"),
        (["population.clients=ten,20"], "population.clients"),
        (["selection.k=0"], "selection.k"),
        (["name=a,b"], "sweep.grid.name"),
    ],
)
def test_bad_grid_names_the_key(tiny, write_scenario, tmp_path, grid, key):
    path = write_scenario(tiny)
    with pytest.raises(ScenarioError) as err:
        plan_sweep(path, grid=grid, out=tmp_path)
    assert err.value.key == key
    assert str(path) in str(err.value)


def test_file_grid_must_be_non_empty_lists(tiny, write_scenario, tmp_path):
    tiny["sweep"] = {"grid": {"population.clients": []}}
    with pytest.raises(ScenarioError, match="non-empty"):
        plan_sweep(write_scenario(tiny), out=tmp_path)
    tiny["sweep"] = {"grid": {"population.clients": 5}}
    with pytest.raises(ScenarioError, match=r"sweep\.grid"):
        plan_sweep(write_scenario(tiny), out=tmp_path)


def test_unreachable_ray_address_fails_fast():
    with pytest.raises(ScenarioError) as err:
        check_address("127.0.0.1:1", timeout=1.0)
    assert err.value.key == "--address"
    with pytest.raises(ScenarioError):
        check_address("no-port-here")
    check_address(None)


@pytest.mark.parametrize(
    "extra",
    [
        ["--grid", "population.clientz=1,2"],
        ["--grid", "selection.k="],
        ["--replicates", "0"],
        ["--workers", "0"],
        ["--executor", "threads"],
        ["--executor", "ray", "--address", "127.0.0.1:1"],
        ["--address", "127.0.0.1:1"],
    ],
)
def test_cli_bad_input_exits_2_and_writes_nothing(tiny, write_scenario, tmp_path, capsys, extra):
    out = tmp_path / "out"
    path = write_scenario(tiny)
    code = main(["sweep", str(path), "--out", str(out), "--quiet", *extra])
    assert code == 2
    assert "fedgame:" in capsys.readouterr().err
    assert not out.exists()
