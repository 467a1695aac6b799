"""Run ``fedgame``'s command line on many inputs, each in its own forked process.

Reads a JSON job on stdin::

    {"limit_bytes": N, "timeout_s": T, "parallel": P, "logs": DIR,
     "cases": [{"id": ..., "cwd": ..., "argv": [...], "env": {...}}, ...]}

imports fedgame (and every plug-in) once, then forks one child per case: the child moves to
``cwd``, sets ``env``, caps its address space at its current size plus ``limit_bytes``
(``RLIMIT_AS``: an allocation beyond that fails with ``MemoryError``), sends stdout and
stderr to ``DIR/<id>.out`` and ``DIR/<id>.err`` and calls ``fedgame.cli.main(argv)`` exactly
as the console script does (an exception escaping it prints its traceback, exit code 1). A
child still running after ``timeout_s`` is killed. Prints one JSON object: per case the exit
code, wall seconds, peak RSS growth over the parent (KiB) and whether it timed out.

Forking from a process that has already imported torch keeps each case's time to the
handling of its input; starting Python and importing the libraries (several seconds on a
busy two-core machine) is paid once.
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import resource
import sys
import time
import traceback


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _child(case: dict, limit_bytes: int, logs: str) -> None:
    code: object = 1
    try:
        out = os.open(os.path.join(logs, case["id"] + ".out"), os.O_WRONLY | os.O_CREAT, 0o644)
        err = os.open(os.path.join(logs, case["id"] + ".err"), os.O_WRONLY | os.O_CREAT, 0o644)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.chdir(case["cwd"])
        os.environ.update(case.get("env", {}))
        for name in case.get("unset", []):
            os.environ.pop(name, None)
        address_space = _status_kib("VmSize") * 1024 + limit_bytes
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (address_space, hard))
        from fedgame.cli import main

        try:
            code = main(case["argv"])
        except SystemExit as exc:
            code = exc.code
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code if isinstance(code, int) else (0 if code is None else 1))


#: libraries the plug-in modules import inside the functions that use them
LAZY_LIBRARIES = (
    "torch.func",
    "scipy.ndimage",
    "scipy.optimize",
    "scipy.special",
    "scipy.stats",
    "networkx",
    "dp_accounting.pld.privacy_loss_distribution",
    "dp_accounting.rdp.rdp_privacy_accountant",
    "fedgame.scenario.build",
)


def main() -> None:
    job = json.load(sys.stdin)
    from fedgame import registry

    registry.names("dataset")  # every plug-in imported
    import fedgame.analysis.report
    import fedgame.cli
    import fedgame.run.sweep
    import fedgame.scenario.preflight  # noqa: F401

    for name in LAZY_LIBRARIES:  # imported by plug-ins where they compute; paid once here too
        importlib.import_module(name)

    sys.stdout.flush()
    gc.freeze()  # children's collections skip what is imported here: fewer copy-on-write pages
    base_rss = _status_kib("VmRSS")
    pending = list(job["cases"])
    running: dict[int, tuple[dict, float]] = {}
    results: dict[str, dict] = {}
    while pending or running:
        while pending and len(running) < job["parallel"]:
            case = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(case, job["limit_bytes"], job["logs"])
            running[pid] = (case, time.monotonic())
        pid, status, usage = os.wait4(-1, os.WNOHANG)
        now = time.monotonic()
        if pid == 0:
            for other, (case, started) in running.items():
                if now - started > job["timeout_s"] and case["id"] not in results:
                    os.kill(other, 9)
                    results[case["id"]] = {"timed_out": True}
            time.sleep(0.005)
            continue
        case, started = running.pop(pid)
        entry = results.setdefault(case["id"], {"timed_out": False})
        entry.update(
            code=os.waitstatus_to_exitcode(status),
            wall_s=now - started,
            rss_growth_kib=max(0, usage.ru_maxrss - base_rss),
        )
    print(json.dumps({"base_rss_kib": base_rss, "results": results}))


if __name__ == "__main__":
    main()
