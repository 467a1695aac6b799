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


def modules_of(argv: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    """Exit code of ``fedgame *argv`` in a fresh interpreter and every module it imported."""
    record = tmp_path / "modules.json"
    subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(record), *argv],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        timeout=300,
    )
    found = json.loads(record.read_text())
    return found["code"], set(found["modules"])


def imported_by(argv: list[str], tmp_path: Path) -> tuple[int, set[str]]:
    """Exit code of ``fedgame *argv`` in a fresh interpreter and the top-level packages it
    imported."""
    code, modules = modules_of(argv, tmp_path)
    return code, {name.split(".")[0] for name in modules}


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
    ["validate", str(REPO / "scenarios" / "quickstart.yaml"), "--set", "training.threads=2"],
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


#: what a run of the quickstart does not need, before its first round or after: imported only
#: by the plug-ins, analyses and executors that use them
NOT_FOR_THE_QUICKSTART = (
    "dp_accounting",
    "sklearn",
    "matplotlib",
    "ray",
    "solara",
    "scipy.stats",
    "scipy.optimize",
    "scipy.ndimage",
)


def test_a_quickstart_run_defers_what_it_does_not_use(tmp_path: Path) -> None:
    argv = ["run", str(REPO / "scenarios" / "quickstart.yaml"), "--set", "rounds=1"]
    code, modules = modules_of([*argv, "--out", str(tmp_path / "out"), "--quiet"], tmp_path)
    assert code == 0
    assert {"torch", "mesa", "pandas", "threadpoolctl"} <= {m.split(".")[0] for m in modules}
    assert modules.isdisjoint(NOT_FOR_THE_QUICKSTART), sorted(modules & set(NOT_FOR_THE_QUICKSTART))
