"""Commands that only read and check (``--help``, ``validate``, ``list``, ``explain``) import
none of the heavy libraries; they are imported by the commands that compute.

Each command runs in a fresh interpreter, which then writes the names in ``sys.modules``.
(The time these commands take is printed by ``bench/cli_startup.py``, not asserted here.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "mesa", "pandas", "pyarrow", "matplotlib", "scipy", "ray", "dp_accounting")

_WRAPPER = """
import json, sys
from fedgame.cli import main
try:
    code = main(sys.argv[2:])
except SystemExit as stop:
    code = stop.code
with open(sys.argv[1], "w") as out:
    json.dump({"code": code, "modules": sorted(sys.modules)}, out)
"""


def imported_by(argv: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    """Exit code of ``fedgame *argv`` in a fresh interpreter and the top-level packages it
    imported."""
    record = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(record), *argv],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    found = json.loads(record.read_text())
    return found["code"], {name.split(".")[0] for name in found["modules"]}


LIGHT_COMMANDS = [
    ["--help"],
    ["--version"],
    ["list"],
    ["list", "privacy", "--verbose"],
    ["explain", "selection", "power_of_choice"],
    ["explain", "scenario"],
    ["scenarios"],
    ["scenarios", "quickstart"],
    ["validate", str(REPO / "scenarios" / "quickstart.yaml")],
    ["validate", str(REPO / "scenarios" / "lightdp.yaml"), "--out", "results"],
]


@pytest.mark.parametrize("argv", LIGHT_COMMANDS, ids=" ".join)
def test_light_commands_import_no_heavy_library(argv: list[str], tmp_path: Path) -> None:
    code, packages = imported_by(argv, tmp_path)
    assert code == 0
    assert "fedgame" in packages
    assert packages.isdisjoint(HEAVY), sorted(packages & set(HEAVY))


def test_the_wrapper_sees_heavy_imports(tmp_path: Path) -> None:
    # a command that computes does import them: the check above can fail
    _, packages = imported_by(["report", str(tmp_path / "nothing")], tmp_path)
    assert {"pandas"} <= packages
