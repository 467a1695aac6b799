"""Start-up time of the commands that only read and check: ``--help``, ``validate``, ``list``,
``explain``, ``scenarios``.

Each command runs ``REPEATS`` times in a fresh interpreter (``python -m fedgame ...``), after
one untimed run that fills a bytecode cache (``PYTHONPYCACHEPREFIX``, a temporary folder, as an
installed package has its ``.pyc`` files; ``PYTHONDONTWRITEBYTECODE`` is ignored). The script
prints the median wall time, the median CPU time (user + system, less sensitive to other
processes on a shared machine), the heavy libraries the command imported, and the slowest
imports by cumulative time (``python -X importtime``)::

    python bench/cli_startup.py            # 5 runs of each command
    python bench/cli_startup.py --repeats 9

The target is under 1 s of wall time per command on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "mesa", "pandas", "pyarrow", "matplotlib", "scipy", "ray", "dp_accounting")
COMMANDS = {
    "fedgame --help": ["--help"],
    "fedgame validate quickstart": ["validate", str(REPO / "scenarios" / "quickstart.yaml")],
    "fedgame list": ["list"],
    "fedgame list --verbose": ["list", "--verbose"],
    "fedgame explain privacy gaussian": ["explain", "privacy", "gaussian"],
    "fedgame explain scenario": ["explain", "scenario"],
    "fedgame scenarios": ["scenarios"],
}


def timed(argv: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stderr) of one ``python -X importtime -m fedgame *argv``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "fedgame", *argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.stderr


def slowest(importtime: str, count: int = 3) -> list[tuple[int, str]]:
    """The top-level imports with the largest cumulative time (microseconds, name)."""
    rows = []
    for line in importtime.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = (part.strip() for part in line.split(":", 1)[1].split("|"))
        if cumulative.isdigit() and not name.startswith(" "):
            rows.append((int(cumulative), name))
    return sorted(rows, reverse=True)[:count]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="runs per command")
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
    print(f"{'command':<34} {'wall s':>7} {'cpu s':>7}  heavy imports   slowest imports (ms)")
    with tempfile.TemporaryDirectory() as cwd:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(cwd) / "pycache")
        for label, argv in COMMANDS.items():
            timed(argv, cwd, env)  # fills the bytecode cache
            runs = [timed(argv, cwd, env) for _ in range(args.repeats)]
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            log = runs[-1][2]
            imported = {line.rsplit("|", 1)[-1].strip() for line in log.splitlines()}
            heavy = ", ".join(h for h in HEAVY if h in imported) or "none"
            top = ", ".join(f"{name} {us / 1000:.0f}" for us, name in slowest(log))
            print(f"{label:<34} {wall:>7.2f} {cpu:>7.2f}  {heavy:<15} {top}")


if __name__ == "__main__":
    main()
