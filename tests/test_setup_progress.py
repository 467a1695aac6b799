"""Set-up progress: ``fedgame run`` names a slow set-up's phase on stderr, and nothing else does."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest

from fedgame.progress import setup_progress

SCENARIO = """\
name: setup_progress
seed: 0
rounds: 1
population:
  clients: 3
  budget: {epsilon: {dist: uniform, low: 2.0, high: 8.0}, delta: 1.0e-5}
data: {dataset: {kind: digits}, partition: {kind: iid}}
model: {kind: logreg}
training: {local_steps: 2, batch_size: 512, device: cpu}  # q = 1: closed-form calibration
selection: {kind: uniform, k: 2}
privacy: {kind: dpsgd_local, clip: 1.0, calibration: accountant, accountant: rdp}
"""


def _run(tmp_path: Path, *, delay: float, quiet: bool = False) -> str:
    """stderr of ``fedgame run`` with set-up progress shown after ``delay`` seconds."""
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO)
    argv = ["run", str(path), "--out", str(tmp_path / "out"), *(["--quiet"] if quiet else [])]
    code = (
        "import sys, fedgame.progress as p; p.DELAY_S = float(sys.argv[1]); "
        "from fedgame.cli import main; sys.exit(main(sys.argv[2:]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(delay), *argv],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


@pytest.mark.slow
def test_a_slow_setup_shows_the_calibration_count_and_a_fast_one_shows_nothing(tmp_path) -> None:
    slow = _run(tmp_path, delay=0.0)  # every set-up counts as slow
    assert "calibrating noise: " in slow and " of 3 budgets" in slow
    assert "calibrating noise: 3 of 3 budgets\n" in slow  # the line ends before the run's bar
    assert "calibrating noise" not in _run(tmp_path, delay=600.0)
    assert "calibrating noise" not in _run(tmp_path, delay=0.0, quiet=True)


def test_the_line_is_rewritten_in_place_and_ended_once() -> None:
    out = io.StringIO()
    with setup_progress(True, stream=out, delay=0.0) as shown:
        assert shown is not None
        shown.update("calibrating noise", 1, 12, "budgets")
        shown.update("calibrating noise", 12, 12, "budgets")
    assert out.getvalue() == (
        "\rcalibrating noise: 1 of 12 budgets\rcalibrating noise: 12 of 12 budgets\n"
    )


def test_nothing_before_the_delay_and_nothing_when_disabled() -> None:
    out = io.StringIO()
    with setup_progress(True, stream=out, delay=600.0) as shown:
        assert shown is not None
        shown.update("calibrating noise", 1, 2, "budgets")
    with setup_progress(False, stream=out, delay=0.0) as off:
        assert off is None
    assert out.getvalue() == ""
