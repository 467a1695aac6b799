"""The bench scripts that take no minutes run, tiny, and print their figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_dpsgd_step_bench_prints_a_line_per_model():
    cmd = [sys.executable, "bench/dpsgd_step.py", "--clients", "2", "--samples", "3"]
    cmd += ["--models", "logreg,lenet5", "--repeats", "1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[2].split()[:2] == ["logreg", "7,850"]
    assert lines[3].split()[:2] == ["lenet5", "61,706"]
    assert all(line.count(" ms") == 2 for line in lines[2:])


def test_calibration_bench_prints_the_pld_setup_line():
    cmd = [sys.executable, "bench/calibration.py", "--only", "pld", "--clients", "2"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    header, line = proc.stdout.splitlines()
    assert header.split() == ["scenario", "set-up", "cpu", "calibrate", "targets"]
    assert line.startswith("pld_setup (2 budgets)")
    total, _, calibrating, solved = line.split()[-4:]
    assert float(calibrating[:-1]) <= float(total[:-1])
    assert int(solved) == 3  # the validation's strictest target and the two budgets


def test_economics_bench_prints_a_line_per_scenario_and_sample():
    cmd = [sys.executable, "bench/economics.py", "--rounds", "2", "--sample", "2", "50"]
    cmd += ["--scenario", "scenarios/qi_dpfl_digits.yaml"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    header, *lines = proc.stdout.splitlines()
    assert header.split()[:3] == ["scenario", "sample", "rounds"]
    assert [line.split()[:3] for line in lines] == [
        ["qi_dpfl_digits", "2", "2"],
        ["qi_dpfl_digits", "50", "2"],
    ]
    for line in lines:
        wall, measure, search = (float(x) for x in line.split()[3:6])
        assert 0 <= search <= measure <= wall
