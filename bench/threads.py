"""The thread policy against torch's default threads, with busy processes beside fedgame.

Starts ``--busy`` processes of its own that each keep a core busy (``python -c "while True:
pass"``; default 2), then times, taking turns repeat by repeat:

* a single run: ``fedgame run scenarios/quickstart.yaml --set rounds=R`` (wall time of the
  process and the run's median round, ``wall_time_s`` of ``rounds.parquet``);
* a serial sweep of small runs: ``fedgame sweep scenarios/quickstart.yaml --executor serial
  --grid seed=1,...,S --set rounds=R'`` (wall time of the process);

each *before* (``--set training.threads=T``, T torch's default in a fresh process: one thread
per core) and *after* (the policy, ``training.threads: auto``). Prints each measurement, the
medians, the ratio before / after and the load average before the busy processes started.
The busy processes are stopped when the script ends.

Usage: ``python bench/threads.py [--repeats 3] [--busy 2] [--rounds 10] [--runs 8]``
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "quickstart.yaml"


def default_threads() -> int:
    """torch's own thread count in a fresh process (what fedgame used before the policy)."""
    code = "import torch; print(torch.get_num_threads())"
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, check=True,
                              text=True).stdout)  # fmt: skip


def timed(cmd: list[str]) -> float:
    """Wall seconds of ``cmd`` (must exit 0)."""
    started = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def single_run(out: Path, rounds: int, threads: int | None) -> tuple[float, float, int]:
    """(process wall s, median round s, threads used) of one quickstart run."""
    cmd = [sys.executable, "-m", "fedgame", "run", str(SCENARIO), "--out", str(out), "--quiet"]
    cmd += ["--set", f"rounds={rounds}"]
    if threads is not None:
        cmd += ["--set", f"training.threads={threads}"]
    wall = timed(cmd)
    run_dir = max((out / "quickstart").iterdir(), key=lambda p: p.stat().st_mtime)
    median = float(pd.read_parquet(run_dir / "rounds.parquet")["wall_time_s"].median())
    used = json.loads((run_dir / "manifest.json").read_text())["threads"]["threads"]
    return wall, median, int(used)


def serial_sweep(out: Path, runs: int, rounds: int, threads: int | None) -> float:
    """Process wall seconds of a serial sweep of ``runs`` quickstart runs (seeds 1..runs)."""
    cmd = [sys.executable, "-m", "fedgame", "sweep", str(SCENARIO), "--executor", "serial"]
    cmd += ["--grid", "seed=" + ",".join(str(s) for s in range(1, runs + 1))]
    cmd += ["--replicates", "1", "--set", f"rounds={rounds}", "--out", str(out), "--quiet"]
    if threads is not None:
        cmd += ["--set", f"training.threads={threads}"]
    return timed(cmd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--busy", type=int, default=2, help="busy processes started beside")
    parser.add_argument("--rounds", type=int, default=10, help="rounds of the single run")
    parser.add_argument("--runs", type=int, default=8, help="runs of the serial sweep")
    parser.add_argument("--sweep-rounds", type=int, default=5, help="rounds of each sweep run")
    args = parser.parse_args()
    before_threads = default_threads()
    load = os.getloadavg()
    print(
        f"{os.cpu_count()} CPUs, torch default {before_threads} threads, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before {args.busy} busy processes"
    )
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the busy processes too
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    rows: list[dict[str, float | str]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for i in range(args.repeats):
                order = [("before", before_threads), ("after", None)]
                for label, threads in order if i % 2 == 0 else order[::-1]:
                    out = Path(tmp) / f"{label}-{i}"
                    wall, median, used = single_run(out / "run", args.rounds, threads)
                    sweep = serial_sweep(out / "sweep", args.runs, args.sweep_rounds, threads)
                    rows.append({"what": label, "repeat": i + 1, "threads": used,
                                 "run_s": wall, "round_s": median, "sweep_s": sweep})  # fmt: skip
                    print(
                        f"{label:<7} repeat {i + 1}: {used} thread(s), run {wall:6.2f} s "
                        f"(median round {median * 1000:7.1f} ms), serial sweep of {args.runs} "
                        f"runs {sweep:6.2f} s",
                        flush=True,
                    )
    finally:
        for process in busy:
            process.kill()
            process.wait()
    table = pd.DataFrame(rows)
    med = table.groupby("what")[["run_s", "round_s", "sweep_s"]].median()
    print(f"medians of {args.repeats} repeats with {args.busy} busy processes:")
    for column, what in (
        ("run_s", f"single run ({args.rounds} rounds), process wall s"),
        ("round_s", "median round s"),
        ("sweep_s", f"serial sweep ({args.runs} runs x {args.sweep_rounds} rounds), wall s"),
    ):
        b, a = med.loc["before", column], med.loc["after", column]
        print(f"  {what:<48} before {b:8.3f}  after {a:8.3f}  before/after {b / a:5.2f}x")
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
