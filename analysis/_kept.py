"""Kept runs: each simulation's result stored under ``OUT/runs/``, so a rerun resumes.

An analysis script runs its jobs through :func:`run_kept`; the result of ``fn(job)`` (JSON
data) is written to ``OUT/runs/<key>.json`` as soon as that run ends, whole or not at all (a
temporary file renamed into place). A later call with the same ``--out`` reads the kept
results instead of running again, so an interrupted script (or ``make reproduce``) continues
where it stopped, and an ablation's ``--rows`` subsets share their runs.

The key is the SHA-1 of the job's ``scenario``, the function that computes the result
(``<script>.<function>``) and the code's identity (:func:`code_identity`): the git trees of
``fedgame/`` and ``analysis/`` at the checked-out commit, plus a hash of the uncommitted
changes there when there are any, so a kept run is reused only by the very same code (and
still by a later commit that changed nothing there, e.g. docs: a long ``make reproduce`` can
be finished over several sittings). A file that cannot
be read back (empty, cut short, another shape) counts as absent and the run is redone.
``--fresh`` (``fresh=True``) ignores the kept results and replaces them. Scripts that run a
``fedgame`` sweep (which resumes by itself) call :func:`own_folder` first: the same rules.

Standard library only: importing this module is instant.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the folders whose code decides a run's result
CODE = ("fedgame", "analysis")
#: the file naming the code identity that wrote a sweep folder (:func:`own_folder`)
CODE_MARK = "CODE"

Runner = Callable[[Callable[[Any], Any], Sequence[Any], int], Any]
#: runs this process read from the store and runs in all, over its ``run_kept`` calls (the
#: report's provenance line says how much of a table came from earlier runs)
TALLY = {"kept": 0, "runs": 0}


@functools.cache
def code_identity(root: Path = ROOT) -> str:
    """What identifies the code, once per process.

    ``git:<trees>`` for a clean checkout, ``<trees>`` a hash of the git tree ids of
    ``fedgame/`` and ``analysis/`` at HEAD (a commit that changes neither keeps it);
    ``git:<trees>+<hash>`` when they have uncommitted changes (the hash covers ``git diff
    HEAD`` there and the untracked, not ignored files there);
    ``version:<fedgame.__version__>`` outside a git checkout (or without git).
    """
    try:
        trees = _git(root, "ls-tree", "HEAD", "--", *CODE)
        head = hashlib.sha1(trees.encode()).hexdigest()[:16]
        diff = _git(root, "diff", "HEAD", "--binary", "--", *CODE)
        untracked = _git(root, "ls-files", "--others", "--exclude-standard", "-z", "--", *CODE)
    except (OSError, subprocess.CalledProcessError):
        import fedgame

        return f"version:{fedgame.__version__}"
    if not diff and not untracked:
        return f"git:{head}"
    digest = hashlib.sha1(diff.encode("utf-8", "surrogateescape"))
    for name in sorted(n for n in untracked.split("\0") if n):
        digest.update(name.encode())
        try:
            digest.update((root / name).read_bytes())
        except OSError:
            continue  # removed since git listed it
    return f"git:{head}+{digest.hexdigest()[:12]}"


def _git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args],
        check=True,
        capture_output=True,
        text=True,
        errors="surrogateescape",
        timeout=60,
    ).stdout


def function_name(fn: Callable[..., Any]) -> str:
    """``<script>.<function>`` of ``fn`` (a script run as ``__main__`` by its file name; in a
    spawned worker the script is ``__mp_main__``)."""
    module = fn.__module__
    if module in ("__main__", "__mp_main__"):
        main = sys.modules.get(module)
        module = Path(getattr(main, "__file__", None) or module).stem
    return f"{module}.{fn.__qualname__}"


def key_of(scenario: Any, fn: Callable[..., Any], code: str) -> str:
    """The store key: SHA-1 (16 hex digits) of the scenario, the function and the code."""
    text = json.dumps(
        {"scenario": scenario, "fn": function_name(fn), "code": code}, sort_keys=True, default=str
    )
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def read_kept(file: Path) -> dict[str, Any] | None:
    """The kept record in ``file`` (``{"result": ..., ...}``), or ``None`` when the file is
    missing or cannot be read back whole (empty, cut short, not a record)."""
    try:
        record = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return record if isinstance(record, dict) and "result" in record else None


def run_kept(
    fn: Callable[[dict[str, Any]], Any],
    jobs: Sequence[dict[str, Any]],
    out: Path,
    workers: int,
    *,
    fresh: bool = False,
    tags: Sequence[str] = (),
    runner: Runner | None = None,
) -> list[Any]:
    """``[fn(job) for job in jobs]``, each result kept in ``out/runs/<key>.json``.

    Jobs with the same scenario share one run (a scenario's result does not depend on the
    job's labels): ``tags`` names the job keys copied onto each job's own result (a dict),
    so that such jobs keep their labels.

    Args:
        fn: a module-level function (it may run in a spawned process); its result must be
            JSON data (lists, dicts, str, int, float including NaN, bool, None).
        jobs: dicts with a JSON-able ``"scenario"``; the rest of a job is not in the key, so
            whatever ``fn`` computes from it must follow from the scenario.
        out: the script's ``--out``; the store is ``out/runs``.
        workers: processes for the runs still to do.
        fresh: ignore kept results and replace them (``--fresh``).
        tags: job keys set on each result (``result | {tag: job[tag]}``).
        runner: ``runner(fn, jobs, workers)`` runs the jobs still to do (default
            ``_shared.run_jobs``); e.g. a pool whose processes are replaced every few runs.

    Prints one line: how many runs were kept from an earlier call.
    """
    if runner is None:
        import _shared

        runner = _shared.run_jobs
    store = Path(out) / "runs"
    store.mkdir(parents=True, exist_ok=True)
    code = code_identity()
    files = [store / f"{key_of(job['scenario'], fn, code)}.json" for job in jobs]
    distinct = dict.fromkeys(files)
    kept = {} if fresh else {f: r["result"] for f in distinct if (r := read_kept(f))}
    todo: dict[Path, dict[str, Any]] = {}
    for job, file in zip(jobs, files):
        if file not in kept:
            todo.setdefault(file, job)
    shared = f" ({len(jobs)} jobs)" if len(distinct) < len(jobs) else ""
    again = "; --fresh: none reused" if fresh else ""
    print(
        f"{len(distinct) - len(todo)} of {len(distinct)} runs{shared} kept from an earlier "
        f"run in {store}{again}",
        flush=True,
    )
    TALLY["kept"] += len(distinct) - len(todo)
    TALLY["runs"] += len(distinct)
    items = [(job, str(file), code) for file, job in todo.items()]
    runner(functools.partial(_run_and_keep, fn), items, workers)
    for file in todo:
        record = read_kept(file)
        if record is None:
            raise RuntimeError(f"{file}: the run finished but its result was not kept")
        kept[file] = record["result"]
    results = []
    for job, file in zip(jobs, files):
        result = copy.deepcopy(kept[file])  # jobs that share a run get their own copy
        results.append(result | {t: job[t] for t in tags} if tags else result)
    return results


def count_sweep(summary: Any) -> None:
    """Add a ``run_sweep`` call's runs to :data:`TALLY`: the runs it found finished in its
    folder (``summary.skipped``) count as kept, so the provenance line says so."""
    TALLY["kept"] += int(summary.skipped)
    TALLY["runs"] += int(summary.total)


def own_folder(folder: Path, *, fresh: bool) -> bool:
    """Make ``folder`` (where a script's ``fedgame`` sweep writes; the sweep resumes by
    itself, skipping finished runs) hold only runs of this code: remove it when ``fresh`` or
    when another code identity (or none) wrote it, then record this one in ``folder/CODE``.
    Returns whether an earlier folder was removed."""
    import shutil

    folder = Path(folder)
    code = code_identity()
    mark = folder / CODE_MARK
    stale = folder.exists() and (fresh or _read_text(mark) != code)
    if stale:
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    mark.write_text(code, encoding="utf-8")
    return stale


def _read_text(file: Path) -> str | None:
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _run_and_keep(fn: Callable[[dict[str, Any]], Any], item: tuple[Any, str, str]) -> None:
    """Run one job and write its record atomically (whole or absent)."""
    job, file, code = item
    scenario = json.loads(json.dumps(job["scenario"], default=str))  # as keyed
    record = {"fn": function_name(fn), "code": code, "scenario": scenario}
    record["result"] = fn(job)
    text = json.dumps(record, default=_not_json)  # the result's key order is kept
    tmp = Path(f"{file}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(file)  # an interrupted write leaves no half a result


def _not_json(value: Any) -> Any:
    raise TypeError(f"a kept result must be JSON data, got {type(value).__name__}: {value!r}")


def frame_to_json(frame: Any) -> dict[str, Any]:
    """A pandas DataFrame as JSON data (columns, dtypes, values) for :func:`frame_from_json`."""
    return {
        "columns": [str(c) for c in frame.columns],
        "dtypes": {str(c): str(t) for c, t in frame.dtypes.items()},
        "index": frame.index.tolist(),
        "data": {str(c): frame[c].tolist() for c in frame.columns},
    }


def frame_from_json(data: dict[str, Any]) -> Any:
    """The DataFrame :func:`frame_to_json` wrote: same columns, dtypes, values and index."""
    import pandas as pd

    frame = pd.DataFrame(data["data"], columns=data["columns"], index=data["index"])
    return frame.astype(data["dtypes"]) if len(frame.columns) else frame
