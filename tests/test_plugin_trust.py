"""A scenario's plug-in modules are code: imported only when trusted, after the scenario's keys
validated, from beside the scenario file (never implicitly from the current folder), anything
they raise on import is one line and exit code 2, and each run's manifest names the file and
its SHA-256.

Each test writes modules under fresh names, so the modules imported here do not meet again.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import uuid
from pathlib import Path

import pytest
import yaml

from fedgame import plugins
from fedgame.cli import main
from fedgame.errors import ScenarioError
from fedgame.scenario.coerce import scenario_from
from fedgame.trust import TRUST_ENV, trusting

#: a module that leaves a mark when it is imported (``MARK`` is replaced by a path)
MARKER = "from pathlib import Path\nPath({mark!r}).write_text('imported')\n"


@pytest.fixture
def module(tmp_path, monkeypatch):
    """``make(folder, body) -> name``: a module of a fresh name in ``folder``; removed from
    ``sys.modules`` afterwards. Trust is unset unless a test sets it."""
    monkeypatch.delenv(TRUST_ENV, raising=False)
    made: list[str] = []

    def make(folder: Path, body: str) -> str:
        name = f"trust_probe_{uuid.uuid4().hex[:10]}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{name}.py").write_text(body)
        made.append(name)
        return name

    yield make
    for name in made:
        sys.modules.pop(name, None)


def _scenario(folder: Path, tiny: dict, names: list[str], **extra) -> Path:
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump({**tiny, "plugins": names, **extra}))
    return path


def test_an_untrusted_scenario_module_is_refused_and_never_imported(tmp_path, tiny, module, capsys):
    mark = tmp_path / "mark"
    name = module(tmp_path, MARKER.format(mark=str(mark)))
    path = _scenario(tmp_path, tiny, [name])
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'plugins'" in err and "--trust-plugins" in err and err.count("\n") == 1
    assert not mark.exists()
    assert main(["validate", str(path), "--trust-plugins"]) == 0
    assert mark.exists()


def test_keys_are_validated_before_any_module_is_imported(tmp_path, tiny, module, capsys):
    mark = tmp_path / "mark"
    name = module(tmp_path, MARKER.format(mark=str(mark)))
    for bad in ({"rounds": -1}, {"population": {**tiny["population"], "colluders": 99}}):
        path = _scenario(tmp_path, tiny, [name], **bad)
        assert main(["validate", str(path), "--trust-plugins"]) == 2
        assert not mark.exists(), bad
    assert "'rounds'" in capsys.readouterr().err


def test_modules_are_found_beside_the_scenario_not_in_the_current_folder(
    tmp_path, tiny, module, monkeypatch, capsys
):
    beside = module(tmp_path / "study", "X = 1\n")
    here = module(tmp_path / "cwd", "X = 2\n")
    monkeypatch.chdir(tmp_path / "cwd")
    assert (
        main(["validate", str(_scenario(tmp_path / "study", tiny, [beside])), "--trust-plugins"])
        == 0
    )
    assert plugins.describe_modules([beside])[-1]["file"] == str(
        tmp_path / "study" / f"{beside}.py"
    )
    path = _scenario(tmp_path / "study", tiny, [here])
    assert main(["validate", str(path), "--trust-plugins"]) == 2
    err = capsys.readouterr().err
    assert f"plug-in module {here!r} does not import" in err and "current folder" in err


@pytest.mark.parametrize(
    "body", ["import sys\nsys.exit(0)\n", "raise KeyboardInterrupt\n", "raise GeneratorExit\n"]
)
def test_anything_a_module_raises_on_import_is_one_line_and_exit_2(
    tmp_path, tiny, module, body, capsys
):
    name = module(tmp_path, body)
    path = _scenario(tmp_path, tiny, [name])
    for command in ("validate", "run"):
        assert main([command, str(path), "--trust-plugins", "--out", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err
        assert f"plug-in module {name!r} does not import" in err and err.count("\n") == 1
    assert not (tmp_path / "r").exists()


def test_the_manifest_records_each_module_with_its_file_and_hash(tmp_path, tiny, module):
    name = module(tmp_path, "X = 1\n")
    path = _scenario(tmp_path, tiny, [name], rounds=1)
    assert main(["run", str(path), "--trust-plugins", "--out", str(tmp_path / "r"), "--quiet"]) == 0
    manifest = json.loads(next((tmp_path / "r").rglob("manifest.json")).read_text())
    entry = next(m for m in manifest["plugins"] if m["module"] == name)
    file = tmp_path / f"{name}.py"
    assert entry["file"] == str(file) and entry["origin"] == "scenario module"
    assert entry["sha256"] == hashlib.sha256(file.read_bytes()).hexdigest()


def test_the_python_api_trusts_by_the_environment_variable(tmp_path, tiny, module, monkeypatch):
    name = module(tmp_path, "X = 1\n")
    path = _scenario(tmp_path, tiny, [name])
    with pytest.raises(ScenarioError, match="FEDGAME_TRUST_PLUGINS=1"):
        scenario_from(path)
    monkeypatch.setenv(TRUST_ENV, "yes")
    with pytest.raises(ScenarioError, match="'FEDGAME_TRUST_PLUGINS' has value 'yes'"):
        scenario_from(path)
    monkeypatch.setenv(TRUST_ENV, "1")
    assert scenario_from(path).plugins == [name]


def test_trusting_sets_the_environment_and_restores_it(monkeypatch):
    monkeypatch.setenv(TRUST_ENV, "0")
    with trusting():
        assert os.environ[TRUST_ENV] == "1"  # what sweep workers started here inherit
        with trusting(False):
            assert os.environ[TRUST_ENV] == "1"
    assert os.environ[TRUST_ENV] == "0"
    monkeypatch.delenv(TRUST_ENV)
    with trusting():
        pass
    assert TRUST_ENV not in os.environ


def test_two_modules_of_one_name_from_two_folders_are_refused(tmp_path, tiny, module, monkeypatch):
    monkeypatch.setenv(TRUST_ENV, "1")
    name = module(tmp_path / "a", "X = 1\n")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / f"{name}.py").write_text("X = 2\n")
    scenario_from(_scenario(tmp_path / "a", tiny, [name]))
    with pytest.raises(ScenarioError, match="already imported from"):
        scenario_from(_scenario(tmp_path / "b", tiny, [name]))
