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


def test_shapley_bench_prints_cost_and_error_rows():
    cmd = [sys.executable, "bench/shapley.py", "--clients", "4", "--rounds", "1", "--small", "3"]
    cmd += ["--small-rounds", "1", "--samples", "32", "--permutations", "3", "--blocks", "1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    exact = lines[2].split()
    assert exact[:3] == ["4", "exact", "16"]  # 2^4 coalitions in one batched call
    assert [line.split()[1] for line in lines[3:5]] == ["tmc", "gtg"]
    errors = [line.split() for line in lines[8:12]]
    assert all(row[0] == "3" and row[-3] == "8" for row in errors)  # exact: 2^3 coalitions
    assert all(0.0 <= float(row[-1]) <= 1.0 for row in errors)  # total variation of shares
