"""The bench scripts that take no minutes run, tiny, and print their figures."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_learner_limit_bench_prints_a_paired_ratio_per_case():
    cmd = [sys.executable, "bench/learner_limit.py", "--clients", "2", "--population", "3"]
    cmd += ["--samples", "40", "--test", "50", "--rounds", "4", "--warmup", "1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[2:-1]]
    assert [r[0] if len(r) == 6 else " ".join(r[:2]) for r in rows] == [
        "mlp", "mlp dp-sgd", "logreg", "logreg dp-sgd"
    ]  # fmt: skip
    for r in rows:
        b, v, ratio, diff = float(r[-5]), float(r[-4]), float(r[-3]), float(r[-1])
        assert b > 0 and v > 0 and ratio > 0
        assert diff < 1e-5  # both sides compute the same updates


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


def test_servers_bench_prints_a_row_per_market_size():
    cmd = [sys.executable, "bench/servers.py", "--clients", "8", "--trained", "4"]
    cmd += ["--rounds", "1", "--warmup", "0", "--servers", "1,2"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines()[2:]]
    paths = ("separate", "batched", "batched+eval")
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (competition, path, servers)
        for competition in ("independent", "best_response")
        for servers in ("1", "2")
        for path in paths
    ]
    for row in rows:  # seconds per round = training + the rest
        assert abs(float(row[4]) - float(row[5]) - float(row[6])) < 2e-3


def test_flower_compare_refuses_a_python_without_flower_before_running_anything():
    """The comparison installs nothing: a ``--flower-python`` that cannot import Flower is
    named, with how to install it, exit 2 (this suite's Python has no ``flwr``)."""
    if importlib.util.find_spec("flwr") is not None:
        pytest.fail("this test needs a Python without flwr; the suite's environment has it")
    cmd = [sys.executable, "bench/flower_compare.py", "--flower-python", sys.executable]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert f"--flower-python {sys.executable}: cannot import flwr" in proc.stderr
    assert "pip install" in proc.stderr and proc.stdout == ""


def test_round_speed_phases_prints_each_phase_and_the_bookkeeping():
    cmd = [sys.executable, "bench/round_speed.py", "--case", "mixed-1000", "--phases"]
    cmd += ["--clients", "40", "--selected", "4", "--samples", "2000", "--rounds", "2"]
    cmd += ["--warmup", "1", "--threads", "1"]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("mixed-1000: N = 40")
    phases = [line.split()[0] for line in lines[1:-1]]
    want = ["network", "offer", "respond", "select", "train"]
    want += ["privatise", "upload", "aggregate", "settle", "collect"]
    assert phases == want
    assert lines[-1].startswith("bookkeeping (every phase but train and aggregate): ")


def test_the_startup_floor_is_a_process_that_imports_mesa_and_torch_only():
    """``floor_seconds`` times :data:`FLOOR_CODE` in fresh processes: it imports the two
    libraries every run needs and nothing of fedgame, and ends without the teardown."""
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import startup
    finally:
        sys.path.remove(str(REPO / "bench"))
    probe = startup.FLOOR_CODE.replace("os._exit(0)", "")
    probe += "import sys; print(sorted(m for m in sys.modules if m.split('.')[0] == 'fedgame'))"
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"  # nothing of fedgame
    assert "import os, mesa, torch" in startup.FLOOR_CODE
    seconds = startup.floor_seconds(dict(os.environ), repeats=1)
    assert 0.0 < seconds < 120.0
