"""The scenario files ship in the package (and its wheel); ``fedgame scenarios`` lists, prints
and copies them."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from fedgame.cli import main
from fedgame.scenario.bundled import FOLDER, bundled

REPO = Path(__file__).resolve().parents[1]
SHIPPED = sorted(p.name for p in (REPO / "scenarios").glob("*.yaml"))


def test_every_scenario_of_the_repository_is_package_data():
    assert sorted(p.name for p in FOLDER.glob("*.yaml")) == SHIPPED
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    assert "scenarios/*.yaml" in pyproject["tool"]["setuptools"]["package-data"]["fedgame"]


@pytest.mark.slow
def test_the_wheel_carries_the_scenario_files(tmp_path):
    """A wheel built from a copy of the source tree holds fedgame/scenarios/*.yaml, byte for
    byte the repository's files (the package's link to scenarios/ is followed)."""
    src = tmp_path / "src"
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO / "fedgame", src / "fedgame", symlinks=True, ignore=ignore)
    shutil.copytree(REPO / "scenarios", src / "scenarios")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(REPO / name, src / name)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(tmp_path / "dist"), str(src)],
        check=True, capture_output=True, timeout=600,
    )  # fmt: skip
    (wheel,) = (tmp_path / "dist").glob("fedgame-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        inside = sorted(
            n.split("/")[-1] for n in zf.namelist() if n.startswith("fedgame/scenarios/")
        )
        assert inside == SHIPPED
        quickstart = zf.read("fedgame/scenarios/quickstart.yaml")
    assert quickstart == (REPO / "scenarios" / "quickstart.yaml").read_bytes()


def test_scenarios_lists_each_with_its_description(capsys):
    assert main(["scenarios"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines() if not line.startswith(" ")]
    assert names == [name.removesuffix(".yaml") for name in SHIPPED]
    assert "50 heterogeneous clients train a logistic regression" in out
    assert all(b.description for b in bundled())


def test_scenarios_name_prints_the_file(capsys):
    assert main(["scenarios", "quickstart"]) == 0
    assert capsys.readouterr().out == (REPO / "scenarios" / "quickstart.yaml").read_text()


def test_scenarios_copy_writes_runnable_files_and_never_overwrites_silently(tmp_path, capsys):
    dest = tmp_path / "study"
    assert main(["scenarios", "--copy", str(dest), "quickstart", "lightdp.yaml"]) == 0
    assert sorted(p.name for p in dest.iterdir()) == ["lightdp.yaml", "quickstart.yaml"]
    assert main(["validate", str(dest / "quickstart.yaml")]) == 0
    (dest / "quickstart.yaml").write_text("rounds: 1\n")
    capsys.readouterr()
    assert main(["scenarios", "--copy", str(dest)]) == 2  # every one: quickstart is there
    assert "--force" in capsys.readouterr().err
    assert (dest / "quickstart.yaml").read_text() == "rounds: 1\n"
    assert sorted(p.name for p in dest.iterdir()) == ["lightdp.yaml", "quickstart.yaml"]
    assert main(["scenarios", "--copy", str(dest), "--force"]) == 0
    assert sorted(p.name for p in dest.iterdir()) == SHIPPED


def test_an_unknown_scenario_lists_the_shipped_ones(capsys):
    assert main(["scenarios", "quickstrat"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did you mean quickstart?" in err
