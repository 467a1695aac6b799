"""Preflight memory estimate against the peak memory of real runs.

For a few scenarios derived from ``scenarios/quickstart.yaml``, prints the estimate of
:mod:`fedgame.scenario.footprint` beside the peak resident memory (``ru_maxrss``) of a
``fedgame run`` of the same scenario in a fresh process::

    python bench/memory_estimate.py            # all cases
    python bench/memory_estimate.py quickstart # one case
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
CASES: dict[str, list[str]] = {
    "quickstart": [],
    "5000 clients, mnist1d, 10 rounds": [
        "population.clients=5000",
        "data.dataset={kind: mnist1d, num_samples: 20000}",
        "data.partition={kind: iid}",
        "rounds=10",
    ],
    "mlp 2048 x 2, k=20, 2 rounds of 1 step": [
        "model={kind: mlp, hidden: [2048, 2048]}",
        "selection.k=20",
        "rounds=2",
        "training.local_steps=1",
    ],
    "200 rounds": ["rounds=200"],
}


def measure(name: str, overrides: list[str]) -> None:
    from fedgame.scenario.footprint import human_bytes
    from fedgame.scenario.load import load_scenario
    from fedgame.scenario.preflight import preflight

    scenario = load_scenario(QUICKSTART, overrides)
    estimate = preflight(scenario).footprint
    sets = [a for o in overrides for a in ("--set", o)]
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "fedgame", "run", str(QUICKSTART), *sets, "--out", out]
        started = time.perf_counter()
        proc = subprocess.Popen([*cmd, "--quiet"], stdout=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
    peak = usage.ru_maxrss * 1024
    code = os.waitstatus_to_exitcode(status)
    print(
        f"{name:<36} estimate {human_bytes(estimate.total):>10}  peak RSS {human_bytes(peak):>10}"
        f"  ratio {estimate.total / peak:4.2f}  ({seconds:.0f} s, exit {code})"
    )
    print(f"{'':<36} {estimate.describe(top=4)}")


if __name__ == "__main__":
    chosen = sys.argv[1:] or list(CASES)
    for case in chosen:
        measure(case, CASES[case])
