"""Set-up progress: ``fedgame run`` names a slow set-up's phase on stderr, and nothing else does."""

from __future__ import annotations

import io
import subprocess
import sys
from dataclasses import replace
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


def test_a_new_phase_keeps_the_last_count_of_the_one_before() -> None:
    out = io.StringIO()
    with setup_progress(True, stream=out, delay=0.0) as shown:
        assert shown is not None
        shown.update("calibrating noise", 2, 2, "budgets")
        shown.update("pricing releases", 1, 3, "noise levels")
    assert out.getvalue() == (
        "\rcalibrating noise: 2 of 2 budgets\n\rpricing releases: 1 of 3 noise levels\n"
    )


def test_rdp_pricing_counts_the_distinct_noise_levels() -> None:
    from fedgame.privacy.accountants.rdp import RdpAccountant
    from fedgame.privacy.base import Charge, Charges

    template = Charge("subsampled_gaussian", sample_rate=0.1, steps=2)
    charges = Charges.of([replace(template, noise_multiplier=z) for z in (1.0, 2.0, 1.0, 3.0)])
    out = io.StringIO()
    with setup_progress(True, stream=out, delay=0.0):
        RdpAccountant().increments(charges)
    assert out.getvalue().endswith("\rpricing releases: 3 of 3 noise levels\n")
    assert "4 noise levels" not in out.getvalue()
