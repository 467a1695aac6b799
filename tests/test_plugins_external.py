"""A user's own plug-ins, without forking fedgame: an installed package's entry point, and a
module a scenario lists under ``plugins`` (main process, local sweep workers, Ray tasks), which
fedgame imports only when trusted (``--trust-plugins``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from fedgame import registry
from fedgame.errors import ScenarioError
from fedgame.mechanisms.selection.all import AllSelection
from fedgame.scenario.load import validate

#: a selection rule: the ``k`` lowest client ids among the candidates
LOWEST_IDS = '''
from fedgame.registry import register
from fedgame.views import Selection, ids_of
from pydantic import BaseModel, Field
import numpy as np


@register("selection", "{name}")
class LowestIds:
    """Select the k candidates with the lowest client ids."""

    class Config(BaseModel):
        k: int = Field(3, ge=1, description="clients selected per round")

    def __init__(self, config):
        self.k = config.k

    def expected_fraction(self, num_clients):
        return min(1.0, self.k / max(num_clients, 1))

    def select(self, candidates, *, info, rng):
        ids = tuple(np.sort(ids_of(candidates))[: self.k].tolist())
        return Selection(ids, dict.fromkeys(ids, 1.0))
'''


def _fedgame(
    *args: str, cwd: Path, pythonpath: str = "", sys_path: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """``fedgame ARGS`` in a fresh process; ``sys_path``: folders that process puts first on its
    own ``sys.path`` (as a notebook or script does; child processes do not inherit them)."""
    env = {**os.environ, "PYTHONPATH": pythonpath}
    code = f"import sys; sys.path[:0] = {list(sys_path)!r}; "
    code += "from fedgame.cli import main; sys.exit(main())"
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def _installed_package(site: Path) -> None:
    """``lowid-plugins`` as pip installs it: the package and a dist-info with an entry point."""
    (site / "lowid_plugins").mkdir(parents=True)
    (site / "lowid_plugins" / "__init__.py").write_text(LOWEST_IDS.format(name="lowest_ids"))
    info = site / "lowid_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: lowid-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[fedgame.plugins]\nlowid = lowid_plugins\n")


def _scenario(tiny: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {**tiny, "output": {"dir": "results"}, **extra}


def test_an_installed_entry_point_is_listed_with_its_origin_and_used_by_a_run(tmp_path, tiny):
    site = tmp_path / "site"
    _installed_package(site)
    listed = _fedgame("list", "selection", cwd=tmp_path, pythonpath=str(site))
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if "lowest_ids" in x)
    assert "entry point lowid (lowid-plugins)" in line
    assert "lowest client ids" in " ".join(listed.stdout.split())  # the summary may wrap
    assert any("uniform" in x and "built-in" in x for x in listed.stdout.splitlines())
    scenario = _scenario(tiny, selection={"kind": "lowest_ids", "k": 2})
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    ran = _fedgame("run", "s.yaml", "--quiet", cwd=tmp_path, pythonpath=str(site))
    assert ran.returncode == 0, ran.stderr
    clients = pd.read_parquet(next((tmp_path / "results").rglob("clients.parquet")))
    chosen = clients[clients["selected"] & (clients["round"] > 0)]
    assert set(chosen["client_id"]) <= set(range(12)) and chosen.groupby("round").size().max() <= 2
    # without the package the same scenario is refused, naming the allowed kinds
    bare = _fedgame("validate", "s.yaml", cwd=tmp_path)
    assert bare.returncode == 2 and "allowed selection kinds" in bare.stderr


def test_a_scenario_module_is_loaded_in_two_local_sweep_workers(tmp_path, tiny):
    (tmp_path / "my_plugins.py").write_text(LOWEST_IDS.format(name="lowest_ids_here"))
    scenario = _scenario(
        tiny,
        plugins=["my_plugins"],
        selection={"kind": "lowest_ids_here", "k": 2},
        sweep={"grid": {"population.clients": [10, 12]}},
    )
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    swept = _fedgame(
        "sweep", "s.yaml", "--workers", "2", "--quiet", "--trust-plugins", cwd=tmp_path
    )
    assert swept.returncode == 0, swept.stderr
    runs = list((tmp_path / "results").rglob("clients.parquet"))
    assert len(runs) == 2
    for path in runs:
        clients = pd.read_parquet(path)
        assert clients[clients["round"] > 0].groupby("round")["selected"].sum().max() <= 2
    listed = _fedgame("list", "selection", "--scenario", "s.yaml", "--trust-plugins", cwd=tmp_path)
    assert "scenario module my_plugins" in listed.stdout
    refused = _fedgame("list", "selection", "--scenario", "s.yaml", cwd=tmp_path)
    assert refused.returncode == 2 and "--trust-plugins" in refused.stderr


def test_ray_tasks_load_an_installed_package_and_a_scenario_module(tmp_path, tiny):
    """A Ray sweep over two plug-in selection rules: ``lowest_ids`` from the installed package's
    entry point, ``lowest_ids_here`` from the scenario's ``plugins`` module, which the driver
    imports from a folder only its own ``sys.path`` lists (not the working folder, not
    ``PYTHONPATH``); each run is a Ray task that must load its rule to run its scenario."""
    site = tmp_path / "site"
    _installed_package(site)
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "my_plugins.py").write_text(LOWEST_IDS.format(name="lowest_ids_here"))
    scenario = _scenario(
        tiny,
        plugins=["my_plugins"],
        selection={"kind": "lowest_ids", "k": 2},
        sweep={"grid": {"selection.kind": ["lowest_ids", "lowest_ids_here"]}},
    )
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(scenario))
    args = ("sweep", "s.yaml", "--executor", "ray", "--workers", "2", "--quiet", "--trust-plugins")
    swept = _fedgame(*args, cwd=tmp_path, pythonpath=str(site), sys_path=(str(tmp_path / "mods"),))
    assert swept.returncode == 0, swept.stderr
    used = {}
    for run_dir in (tmp_path / "results").glob("*/sweep-*/runs/*"):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        resolved = yaml.safe_load((run_dir / "scenario.resolved.yaml").read_text())
        clients = pd.read_parquet(run_dir / "clients.parquet")
        chosen = clients[clients["selected"] & (clients["round"] > 0)]
        used[resolved["selection"]["kind"]] = manifest["status"]
        assert len(chosen) and chosen.groupby("round").size().max() <= 2
    assert used == {"lowest_ids": "completed", "lowest_ids_here": "completed"}


def test_a_plugin_module_that_does_not_import_is_one_line_and_exit_2(tmp_path, tiny):
    (tmp_path / "broken_plugins.py").write_text("import no_such_dependency_xyz\n")
    for name in ("broken_plugins", "missing_plugins"):
        (tmp_path / "s.yaml").write_text(yaml.safe_dump(_scenario(tiny, plugins=[name])))
        result = _fedgame("validate", "s.yaml", "--trust-plugins", cwd=tmp_path)
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert f"plug-in module {name!r} does not import" in result.stderr
        assert "ModuleNotFoundError" in result.stderr
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(_scenario(tiny, plugins=["not a module"])))
    result = _fedgame("validate", "s.yaml", cwd=tmp_path)
    assert result.returncode == 2 and "is not a module name" in result.stderr


def test_python_api_refuses_a_missing_plugin_module(tiny, monkeypatch):
    monkeypatch.setenv("FEDGAME_TRUST_PLUGINS", "1")
    with pytest.raises(ScenarioError, match="'surely_missing_fedgame_plugin' does not import"):
        validate({**tiny, "plugins": ["surely_missing_fedgame_plugin"]})


def test_entries_registered_here_say_where_they_come_from(scratch_registry):
    with registry.registering_from("scenario module probe"):

        @registry.register("selection", "_origin_probe")
        class Probe(AllSelection):
            """Probe."""

    assert registry.entry("selection", "_origin_probe").origin == "scenario module probe"
    assert registry.entry("selection", "uniform").origin == registry.BUILT_IN


@pytest.mark.parametrize("body", ["import sys\nsys.exit(0)\n", "raise KeyboardInterrupt\n"])
def test_an_entry_point_that_exits_on_import_is_one_line_and_exit_2(tmp_path, body):
    """An installed package needs no opt-in, but what its import raises is still its error."""
    site = tmp_path / "site"
    _installed_package(site)
    (site / "lowid_plugins" / "__init__.py").write_text(body)
    listed = _fedgame("list", cwd=tmp_path, pythonpath=str(site))
    assert listed.returncode == 2 and listed.stdout == "", listed.stderr
    assert "entry point 'lowid' of lowid-plugins" in listed.stderr
    assert listed.stderr.count("\n") == 1 and "Traceback" not in listed.stderr
