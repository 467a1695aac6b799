"""Start-up: time from process start to the end of the quickstart's first round, and (with
``--flower``) the Flower-style workload's end-to-end time against 30 times its median round.

Default: ``fedgame run scenarios/quickstart.yaml --set rounds=1`` in ``--repeats`` fresh
processes, after one untimed run that fills a bytecode cache (``PYTHONPYCACHEPREFIX``, a
temporary folder, as an installed package has its ``.pyc`` files). The time to the first
round is when the run's progress bar first shows ``1/1`` on stderr (the bar is drawn right
after the round ends; the folder is written after it); the script prints each process's
time to the first round, its whole wall time and CPU time (user + system, less sensitive to
other processes on a shared machine), their medians, the load average, and the import
breakdown of one more run under ``python -X importtime``: cumulative time of each heavy
library's first import, which module imported it, and the self time per top-level package.
Target: 2.5 s to the first round on an idle machine. It also prints the floor: the wall time
of a fresh process that imports only Mesa and torch (:data:`FLOOR_CODE`), which no fedgame run
can beat, one after each run (taking turns, so that load drift moves both), and the distance
of the first round's median from the floor's.

``--flower``: ``scenarios/flower_style.yaml``: 100 clients, 20 per round, 5 local steps of 32,
an MLP 784-64-10 on the full Fashion-MNIST, no DP, 30 rounds. Each repeat runs ``fedgame
run`` in a fresh process (interpreter start, imports, data, 30 rounds, writing the run
folder) and prints its wall time, the run's median round (``wall_time_s`` in
``rounds.parquet``), the ratio wall / (30 x median round) (target <= 1.5), and where the rest
went: imports (a fresh ``import fedgame.model, fedgame.run.single`` in another process),
set-up (the manifest's ``setup_s``: data, partition, learner, agents) and everything else
(validation, writing). Both modes read fedgame's modules from a bytecode cache that an
untimed run fills first (:func:`bytecode_env`). The first repeat can run with an empty
dataset cache (``--cold``: a fresh ``FEDGAME_CACHE`` folder, so Fashion-MNIST is parsed
from its IDX files); the others reuse it.

Usage: ``python bench/startup.py [--repeats 5]`` and
``python bench/startup.py --flower [--repeats 5] [--cold] [--threads N] [--rounds 30]``
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "scenarios" / "flower_style.yaml"
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"
HEAVY = ("torch", "mesa", "pandas", "pyarrow", "networkx", "scipy", "pydantic", "numpy")

#: what every fedgame run imports before its first round and nothing of fedgame: the learner's
#: library and the agents' (Mesa brings pandas, networkx and scipy); it ends without the
#: interpreter's teardown, as the ``fedgame`` command does (:mod:`fedgame.quick_exit`)
FLOOR_CODE = "import os, mesa, torch; os._exit(0)"


def bytecode_env(tmp: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with a bytecode cache in ``tmp``, filled by one
    untimed run, as an installed package has its ``.pyc`` files: without it a checkout run
    with ``PYTHONDONTWRITEBYTECODE`` set (as on some CI and sandbox machines) compiles every
    fedgame module again in each fresh process, while the libraries it imports come with
    theirs."""
    env = {k: v for k, v in (os.environ if env is None else env).items()}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    warm_up = ["run", str(QUICKSTART), "--set", "rounds=1", "--out", str(tmp / "warm-up")]
    subprocess.run(
        [sys.executable, "-m", "fedgame", *warm_up, "--quiet"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return env


def first_round(out: Path, env: dict[str, str], *, importtime: bool = False) -> dict[str, Any]:
    """One ``fedgame run quickstart --set rounds=1`` (progress bar on): seconds from the
    process's start to the bar's ``1/1``, wall and CPU seconds of the whole process, and
    stderr."""
    cmd = [sys.executable, *(["-X", "importtime"] if importtime else []), "-m", "fedgame"]
    cmd += ["run", str(QUICKSTART), "--set", "rounds=1", "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    seen, first = b"", None
    while chunk := os.read(proc.stderr.fileno(), 65536):
        seen += chunk
        if first is None and b"1/1 [" in seen:
            first = time.perf_counter() - started
    code = proc.wait()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if code != 0 or first is None:
        raise SystemExit(f"fedgame run failed ({code}): {seen.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"first": first, "wall": wall, "cpu": cpu, "stderr": seen.decode()}


def import_breakdown(log: str) -> None:
    """Print each heavy library's first import (cumulative ms, importer) and the self time
    per top-level package, from ``-X importtime`` output."""
    rows = []
    for line in log.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            own, total, name = line.split(":", 1)[1].split("|")
            rows.append((int(own), int(total), (len(name) - len(name.lstrip())) // 2, name.strip()))
    print("first import of each heavy library (cumulative ms, imported by):")
    for package in HEAVY:
        where = next((i for i, r in enumerate(rows) if r[3] == package), None)
        if where is None:
            print(f"  {package:<10} not imported")
            continue
        depth, parent = rows[where][2], "a function at run time"
        for row in rows[where + 1 :]:  # the first importer outside the package itself
            if row[2] < depth:
                depth = row[2]
                if row[3].split(".")[0] != package:
                    parent = row[3]
                    break
        print(f"  {package:<10} {rows[where][1] / 1000:7.0f}  {parent}")
    by_package: dict[str, int] = {}
    for own, _, _, name in rows:
        top = name.split(".")[0]
        by_package[top] = by_package.get(top, 0) + own
    total = sum(by_package.values())
    top = sorted(by_package.items(), key=lambda kv: -kv[1])[:10]
    print(f"self time per package (ms; all imports {total / 1000:.0f} ms): " +
          ", ".join(f"{name} {us / 1000:.0f}" for name, us in top))  # fmt: skip


def first_round_main(repeats: int) -> None:
    """The default measurement: the quickstart's time to its first round."""
    load = os.getloadavg()
    print(
        f"fedgame run quickstart --set rounds=1: {repeats} fresh processes, {os.cpu_count()} "
        f"CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        env = bytecode_env(Path(tmp))
        runs, floors = [], []
        for i in range(repeats):  # each run followed by a floor process, taking turns
            run = first_round(Path(tmp) / "out", env)
            runs.append(run)
            floors.append(floor_seconds(env, repeats=1))
            print(
                f"  {i + 1}: first round at {run['first']:.2f} s, process {run['wall']:.2f} s "
                f"wall, {run['cpu']:.2f} s CPU; floor process {floors[-1]:.2f} s",
                flush=True,
            )
        med = {k: statistics.median(r[k] for r in runs) for k in ("first", "wall", "cpu")}
        print(
            f"median: first round at {med['first']:.2f} s (target <= 2.5 s), process "
            f"{med['wall']:.2f} s wall, {med['cpu']:.2f} s CPU; load average now "
            f"{os.getloadavg()[0]:.2f}"
        )
        floor = statistics.median(floors)
        print(
            f"floor: a fresh process that only runs {FLOOR_CODE!r}: {min(floors):.2f}-"
            f"{max(floors):.2f} s (median {floor:.2f} s); the first round's median is "
            f"{med['first'] - floor:+.2f} s from it"
        )
        import_breakdown(first_round(Path(tmp) / "out", env, importtime=True)["stderr"])


def timed(cmd: list[str], env: dict[str, str]) -> float:
    """Wall seconds of ``cmd`` (must exit 0)."""
    started = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def floor_seconds(env: dict[str, str], repeats: int = 3) -> float:
    """Median wall seconds of a fresh interpreter running :data:`FLOOR_CODE` only: no fedgame
    run can reach its first round sooner on this machine."""
    return statistics.median(timed([sys.executable, "-c", FLOOR_CODE], env) for _ in range(repeats))


def import_seconds(env: dict[str, str]) -> float:
    """Wall seconds of a fresh interpreter importing what ``fedgame run`` imports first."""
    code = "import fedgame.cli, fedgame.model, fedgame.run.single, fedgame.plugins"
    return timed([sys.executable, "-c", code], env)


def one_run(
    out: Path, env: dict[str, str], rounds: int, threads: int | None = None
) -> dict[str, float]:
    """One ``fedgame run`` of the workload: wall, median round, set-up."""
    cmd = [sys.executable, "-m", "fedgame", "run", str(SCENARIO), "--out", str(out), "--quiet"]
    if threads:
        cmd += ["--set", f"training.threads={threads}"]
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
    parser.add_argument("--flower", action="store_true", help="the Flower-style workload")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--cold", action="store_true", help="first run with an empty cache")
    parser.add_argument("--threads", type=int, help="training.threads (default: the policy)")
    args = parser.parse_args()
    if not args.flower:
        first_round_main(args.repeats)
        return
    with tempfile.TemporaryDirectory() as tmp:
        env = bytecode_env(Path(tmp))
        if args.cold:
            env["FEDGAME_CACHE"] = str(Path(tmp) / "cache")
        print(
            f"{SCENARIO.name}, {args.rounds} rounds, {os.cpu_count()} CPUs, "
            f"training.threads={args.threads or 'auto'}, "
            f"cache={env.get('FEDGAME_CACHE', '~/.cache/fedgame')}"
        )
        print(
            f"{'run':<6}{'wall s':>8}{'median round s':>16}{'ratio':>8}"
            f"{'imports s':>11}{'setup s':>9}"
        )
        ratios = []
        for i in range(args.repeats):
            imports = import_seconds(env)
            run = one_run(Path(tmp) / "out", env, args.rounds, args.threads)
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
