"""End-to-end time of the Flower-style workload against 30 times its median round.

``scenarios/flower_style.yaml``: 100 clients, 20 per round, 5 local steps of 32, an MLP
784-64-10 on the full Fashion-MNIST, no DP, 30 rounds. Each repeat runs ``fedgame run`` in a
fresh process (interpreter start, imports, data, 30 rounds, writing the run folder) and
prints its wall time, the run's median round (``wall_time_s`` in ``rounds.parquet``), the
ratio wall / (30 x median round) (target <= 1.5), and where the rest went: imports (a fresh
``import fedgame.model, fedgame.run.single`` in another process), set-up (the manifest's
``setup_s``: data, partition, learner, agents) and everything else (validation, writing).

The first repeat can run with an empty dataset cache (``--cold``: a fresh ``FEDGAME_CACHE``
folder, so Fashion-MNIST is parsed from its IDX files); the others reuse it.

Usage: ``python bench/startup.py [--repeats 5] [--cold] [--threads N] [--rounds 30]``
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "flower_style.yaml"


def timed(cmd: list[str], env: dict[str, str]) -> float:
    """Wall seconds of ``cmd`` (must exit 0)."""
    started = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def import_seconds(env: dict[str, str]) -> float:
    """Wall seconds of a fresh interpreter importing what ``fedgame run`` imports first."""
    code = "import fedgame.cli, fedgame.model, fedgame.run.single, fedgame.plugins"
    return timed([sys.executable, "-c", code], env)


def one_run(out: Path, env: dict[str, str], rounds: int) -> dict[str, float]:
    """One ``fedgame run`` of the workload: wall, median round, set-up."""
    cmd = [sys.executable, "-m", "fedgame", "run", str(SCENARIO), "--out", str(out), "--quiet"]
    cmd += ["--set", f"rounds={rounds}", "--set", "data.dataset.fallback=null"]  # the real data
    wall = timed(cmd, env)
    run_dir = max((out / "flower_style").iterdir(), key=lambda p: p.stat().st_mtime)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    rounds_table = pd.read_parquet(run_dir / "rounds.parquet")
    return {
        "wall": wall,
        "median_round": float(rounds_table["wall_time_s"].median()),
        "setup": float(manifest["timings"]["setup_s"]),
        "total_in_run": float(manifest["timings"]["total_s"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--cold", action="store_true", help="first run with an empty cache")
    parser.add_argument("--threads", type=int, help="torch threads (OMP_NUM_THREADS)")
    args = parser.parse_args()
    env = dict(os.environ)
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        if args.cold:
            env["FEDGAME_CACHE"] = str(Path(tmp) / "cache")
        print(
            f"{SCENARIO.name}, {args.rounds} rounds, {os.cpu_count()} CPUs, "
            f"threads={args.threads or 'default'}, "
            f"cache={env.get('FEDGAME_CACHE', '~/.cache/fedgame')}"
        )
        print(
            f"{'run':<6}{'wall s':>8}{'median round s':>16}{'ratio':>8}"
            f"{'imports s':>11}{'setup s':>9}"
        )
        ratios = []
        for i in range(args.repeats):
            imports = import_seconds(env)
            run = one_run(Path(tmp) / "out", env, args.rounds)
            ratio = run["wall"] / (args.rounds * run["median_round"])
            ratios.append(ratio)
            label = "cold" if (args.cold and i == 0) else str(i + 1)
            print(
                f"{label:<6}{run['wall']:>8.2f}{run['median_round']:>16.4f}{ratio:>8.2f}"
                f"{imports:>11.2f}{run['setup']:>9.2f}"
            )
    warm = ratios[1:] if args.cold and len(ratios) > 1 else ratios
    warm_sorted = sorted(warm)
    print(
        f"ratio wall / ({args.rounds} x median round): median {warm_sorted[len(warm) // 2]:.2f} "
        f"(target <= 1.5)"
    )


if __name__ == "__main__":
    main()
