"""Hostile inputs end in one clear line, exit code 2, nothing written, bounded time and memory.

Every case of ``hostile_cases.CASES``, under each of its commands, runs in its own empty
folder through ``fedgame.cli.main`` in a process forked from one that has imported fedgame
(``zygote.py``; two at a time), with its address space capped at
:data:`MEMORY_BOUND_BYTES` above the parent's and killed after :data:`TIME_BOUND_S`. A few
cases also run end to end as ``python -m fedgame`` (interpreter start and imports included),
in parallel with the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hostile_cases import CASES, all_cases, invocations
from hostile_round_two import CASES as ROUND_TWO

TIME_BOUND_S = 5.0
MEMORY_BOUND_BYTES = 500 << 20
#: cases also run as a fresh ``python -m fedgame`` process
END_TO_END = ("alias_bomb-run",)
#: peak RSS of a fresh ``fedgame`` process rejecting an input: imports (about 350 MB) + bound
END_TO_END_RSS_BYTES = (400 << 20) + MEMORY_BOUND_BYTES
HERE = Path(__file__).resolve().parent


def _tree(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")}


def _prepare(root: Path, tag: str, only: tuple[str, ...] | None = None) -> dict[str, dict]:
    cases = {}
    for case_id, case, words in invocations():
        if only is not None and case_id not in only:
            continue
        folder = root / tag / case_id
        folder.mkdir(parents=True)
        args = case.setup(folder)
        cases[case_id] = {
            "id": case_id,
            "cwd": str(folder),
            "argv": [words[0], *args, *words[1:]],
            "env": case.env,
            "unset": list(case.unset),
            "before": _tree(folder),
        }
    return cases


#: runs ``argv[2:]`` and writes its peak RSS (bytes) to ``argv[1]``: a process started from
#: pytest's reports pytest's own RSS as its peak (fork/vfork then exec keeps the old high-water
#: mark), so the command is started from this small launcher instead
_LAUNCHER = """
import resource, subprocess, sys
code = subprocess.run(sys.argv[2:]).returncode
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
open(sys.argv[1], "w").write(str(peak))
sys.exit(code)
"""


def _end_to_end(cases: dict[str, dict]) -> dict[str, subprocess.Popen]:
    procs = {}
    for case_id in END_TO_END:
        case = cases[case_id]
        env = {**os.environ, **case["env"]}
        for name in case["unset"]:
            env.pop(name, None)
        procs[case_id] = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER, _rss_file(case), sys.executable, "-m", "fedgame"]
            + case["argv"],
            cwd=case["cwd"],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    return procs


def _rss_file(case: dict) -> str:
    return str(Path(case["cwd"]).parent / f"{case['id']}.rss")


def _wait(proc: subprocess.Popen, timeout: float) -> tuple[int, str, str, int]:
    """Exit code, stdout, stderr and peak RSS (bytes) of a child process."""
    end = time.monotonic() + timeout
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > end:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    out, err = proc.stdout.read().decode(), proc.stderr.read().decode()  # type: ignore[union-attr]
    return proc.returncode, out, err, usage.ru_maxrss * 1024


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    cases = _prepare(root, "forked")
    e2e_cases = _prepare(root, "e2e", END_TO_END)
    logs = root / "logs"
    logs.mkdir()
    job = {
        "limit_bytes": MEMORY_BOUND_BYTES,
        "timeout_s": TIME_BOUND_S,
        "parallel": 2,
        "logs": str(logs),
        "cases": [{k: v for k, v in c.items() if k != "before"} for c in cases.values()],
    }
    started = time.monotonic()
    e2e = _end_to_end(e2e_cases)
    zygote = subprocess.run(
        [sys.executable, str(HERE / "zygote.py")],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    results = json.loads(zygote.stdout)["results"]
    for case_id, case in cases.items():
        result = results[case_id]
        result["stdout"] = (logs / f"{case_id}.out").read_text(errors="replace")
        result["stderr"] = (logs / f"{case_id}.err").read_text(errors="replace")
        result["written"] = sorted(_tree(Path(case["cwd"])) - case["before"])
    finished = {case_id: _wait(proc, 300) for case_id, proc in e2e.items()}
    for case_id, (code, out, err, _) in finished.items():
        rss = int(Path(_rss_file(e2e_cases[case_id])).read_text())
        written = sorted(_tree(Path(e2e_cases[case_id]["cwd"])) - e2e_cases[case_id]["before"])
        results[f"e2e:{case_id}"] = {
            "code": code, "stdout": out, "stderr": err, "rss": rss, "written": written,
        }  # fmt: skip
    walls = [r["wall_s"] for r in results.values() if "wall_s" in r]
    print(
        f"\n{len(walls)} forked cases: max {max(walls):.2f} s, total {sum(walls):.1f} s; "
        f"all {time.monotonic() - started:.1f} s with {len(finished)} end-to-end runs"
    )
    return results


def test_corpus_is_large_enough():
    assert len(CASES) >= 40 and len(ROUND_TWO) >= 60
    cases = all_cases()
    assert len({c.id for c in cases}) == len(cases)


def _check_line(result: dict, case_id: str) -> str:
    err = result["stderr"]
    assert "Traceback" not in err, err
    assert result["code"] == 2, f"exit {result['code']}: {err}"
    assert err.endswith("\n") and err.count("\n") == 1, f"not one line: {err!r}"
    assert err.startswith("fedgame: "), err
    assert result["stdout"] == "", result["stdout"]
    assert result["written"] == [], f"{case_id} wrote {result['written']}"
    return err


@pytest.mark.parametrize(
    ("case_id", "case", "words"), invocations(), ids=[i for i, _, _ in invocations()]
)
def test_hostile_input_is_refused_in_one_line(outcomes, case_id, case, words):
    result = outcomes[case_id]
    assert not result["timed_out"], f"{case_id} ran past {TIME_BOUND_S} s"
    err = _check_line(result, case_id)
    assert result["wall_s"] < TIME_BOUND_S
    assert result["rss_growth_kib"] * 1024 < MEMORY_BOUND_BYTES
    for text in case.expect:
        assert text in err, f"{text!r} not in {err!r}"
    if case.names_file:
        assert "s.yaml" in err or "s.toml" in err, err


@pytest.mark.parametrize("case_id", END_TO_END)
def test_hostile_input_end_to_end(outcomes, case_id):
    result = outcomes[f"e2e:{case_id}"]
    _check_line(result, case_id)
    assert result["rss"] < END_TO_END_RSS_BYTES, f"peak RSS {result['rss'] >> 20} MiB"
