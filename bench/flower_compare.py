"""fedgame against Flower on the same workload, side by side: end to end and per round.

The workload is ``scenarios/flower_style.yaml`` (100 clients, IID Fashion-MNIST, 20 per
round, 5 local SGD steps of 32, lr 0.05, MLP 784-64-10, no DP, the global model evaluated on
the 10,000 test images every round, 30 rounds). Each repeat runs, in turns (which side goes
first alternates), in fresh processes:

  fedgame: ``python -m fedgame run scenarios/flower_style.yaml --quiet`` (the real data:
           ``data.dataset.fallback=null``), wall time of the process and the median of the
           rounds' ``wall_time_s``; its modules come from a bytecode cache an untimed run
           fills first, as Flower's from the ``.pyc`` files of its venv (a checkout under
           ``PYTHONDONTWRITEBYTECODE`` would otherwise compile fedgame in every process);
  Flower:  ``bench/flower_workload.py`` under ``--flower-python`` (Flower's simulation
           runtime on Ray, the same workload; see that file), wall time of the process and
           the median time between the central evaluations.

It prints each repeat, the medians, the ratios Flower / fedgame (end to end: target >= 10x;
per round), the ceiling of the end-to-end ratio on this machine (Flower's wall over a process
that only imports Mesa and torch plus fedgame's rounds: :func:`startup.floor_seconds`) and the
load average before and after. This script installs nothing. Flower goes
in a venv of its own, e.g.::

    python3 -m venv ~/flower-venv
    ~/flower-venv/bin/pip install "flwr[simulation]==1.42.0" torch==2.13.0
    python bench/flower_compare.py --flower-python ~/flower-venv/bin/python --repeats 3

Both sides need Fashion-MNIST's IDX files (Debian's ``dataset-fashion-mnist``; the
``FASHION_MNIST_DIR`` variable names another folder for the Flower side).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import FLOOR_CODE, bytecode_env, floor_seconds, one_run  # fedgame's side

WORKLOAD = Path(__file__).resolve().parent / "flower_workload.py"


def ray_processes() -> int:
    """How many of Ray's worker processes (``ray::...``) are alive on this machine (Linux)."""
    count = 0
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):  # it just ended
                count += (entry / "cmdline").read_bytes().startswith(b"ray::")
    return count


def flower_run(python: str, rounds: int, cpus_per_client: float) -> dict[str, float]:
    """One Flower simulation in a fresh process: wall, median round, final accuracy.

    Ray's actor processes outlive the simulation's by 2-3 s; the next run (of either side)
    starts once they have ended (at most 60 s later), not while they still use the cores."""
    cmd = [python, str(WORKLOAD), "--rounds", str(rounds)]
    cmd += ["--cpus-per-client", str(cpus_per_client)]
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    deadline = time.monotonic() + 60
    while ray_processes() and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout)[-2000:]
        raise SystemExit(f"the Flower run failed (exit {proc.returncode}):\n{tail}")
    out = json.loads(lines[-1])
    return {
        "wall": wall,
        "median_round": statistics.median(out["rounds"]),
        "accuracy": out["accuracy"],
        "imports": out["imports"],
        "version": out["flwr"],
    }


def fedgame_run(tmp: Path, env: dict[str, str], rounds: int) -> dict[str, float]:
    """One ``fedgame run`` of the workload in a fresh process: wall, median round."""
    run = one_run(tmp / "fedgame", env, rounds)
    return {"wall": run["wall"], "median_round": run["median_round"]}


def check_flower(python: str) -> str:
    """Flower's version under ``python``; exits 2 with the reason when it cannot run Flower."""
    code = "import flwr, ray, torch; print(flwr.__version__)"
    try:
        proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False)
    except OSError as err:
        print(f"--flower-python {python}: cannot start it ({err})", file=sys.stderr)
        raise SystemExit(2) from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        print(
            f"--flower-python {python}: cannot import flwr, ray and torch ({last}); "
            'install them in a venv of their own: pip install "flwr[simulation]" torch',
            file=sys.stderr,
        )
        raise SystemExit(2)
    return proc.stdout.strip()


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flower-python", required=True, help="a Python with flwr[simulation]")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--cpus-per-client", type=float, default=1.0, help="Ray CPUs per client")
    args = parser.parse_args()
    check_flower(args.flower_python)
    print(
        f"flower_style: 100 clients, 20 per round, 5 steps of 32, MLP 784-64-10, "
        f"{args.rounds} rounds, evaluation every round; {os.cpu_count()} CPUs; "
        f"load average before {load()}"
    )
    print(f"{'repeat':<8}{'side':<9}{'wall s':>9}{'median round s':>16}")
    walls: dict[str, list[float]] = {"fedgame": [], "flower": []}
    rounds: dict[str, list[float]] = {"fedgame": [], "flower": []}
    version = "?"
    floors: list[float] = []  # a process importing Mesa and torch only, after each fedgame run
    with tempfile.TemporaryDirectory() as tmp:
        env = bytecode_env(Path(tmp))  # fedgame's .pyc files, as Flower's venv has its own
        for i in range(args.repeats):
            order = ["fedgame", "flower"] if i % 2 == 0 else ["flower", "fedgame"]
            for side in order:
                if side == "fedgame":
                    r = fedgame_run(Path(tmp), env, args.rounds)
                    floors.append(floor_seconds(env, repeats=1))  # right after, in turn
                else:
                    r = flower_run(args.flower_python, args.rounds, args.cpus_per_client)
                    version = str(r["version"])
                walls[side].append(r["wall"])
                rounds[side].append(r["median_round"])
                print(f"{i + 1:<8}{side:<9}{r['wall']:9.2f}{r['median_round']:16.4f}")
    wf, wg = statistics.median(walls["flower"]), statistics.median(walls["fedgame"])
    rf, rg = statistics.median(rounds["flower"]), statistics.median(rounds["fedgame"])
    print(f"medians: Flower {version} {wf:.2f} s, {rf:.4f} s/round;", end=" ")
    print(f"fedgame {wg:.2f} s, {rg:.4f} s/round")
    print(f"end to end Flower/fedgame {wf / wg:6.1f}x   (target >= 10x)")
    print(f"per round  Flower/fedgame {rf / rg:6.1f}x")
    floor = statistics.median(floors)
    best = floor + args.rounds * rg
    print(
        f"ceiling: fedgame's process takes at least {floor:.2f} s ({FLOOR_CODE!r} alone, "
        f"median of {min(floors):.2f}-{max(floors):.2f} s) + "
        f"{args.rounds} x {rg:.4f} s of rounds = {best:.2f} s, so end to end cannot exceed "
        f"{wf / best:.1f}x here"
    )
    print(f"load average after {load()}")


if __name__ == "__main__":
    main()
