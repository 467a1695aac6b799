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


def test_servers_bench_prints_a_row_per_market_size():
    cmd = [sys.executable, "bench/servers.py", "--clients", "8", "--trained", "4"]
    cmd += ["--rounds", "1", "--warmup", "0", "--servers", "1,2"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[2:]]
    assert [(r[0], r[1]) for r in rows] == [
        ("independent", "1"),
        ("independent", "2"),
        ("best_response", "1"),
        ("best_response", "2"),
    ]
    for row in rows:  # seconds per round = training + the rest
        assert abs(float(row[3]) - float(row[4]) - float(row[5])) < 2e-3
