"""Run a sweep: every grid point x replicate, resumable, on a local pool or on Ray.

Layout of ``<out>/<name>/sweep-<id>/`` (see :mod:`fedgame.run.grid` for the ids)::

    sweep.json            the plan (grid, replicates, runs), the last invocation's summary
                          and ``history``: every invocation (command, executor, start/end,
                          done/skipped/failed), oldest first
    sweep.parquet         one row per run x round: rounds table + swept keys, replicate,
                          run_id, status (written at the end, atomically)
    runs/<run-id>/        each run's folder as for ``fedgame run``; manifest.json is last

A run is finished iff its ``manifest.json`` says ``completed`` or ``diverged`` and its folder
is intact (:func:`fedgame.run.store.run_folder_problem`: every file present, Parquet footers
readable, as many rounds as the manifest says); rerunning the same command skips those and
reruns the rest (a crashed run's folder has no manifest, a failed run's manifest says
``failed`` and carries the error, an interrupted one says ``interrupted``). A finished run
whose folder is damaged (a truncated table, an unreadable manifest) is recorded in
``SweepSummary.repaired`` and ``sweep.json`` and run again.

Before anything is written the output folder is checked (creatable, writable) and the memory
of the runs that execute at once (as many as the executor's plan runs at once:
:func:`fedgame.run.devices.planned_concurrency`, e.g. visible GPUs x ``workers_per_gpu`` for a
local sweep on CUDA; for the ``batched`` executor, its workers times the runs of a batch,
``sweep.batch_runs`` lowered until they fit) is checked against the limit
(:func:`fedgame.scenario.preflight.check_memory`). Each run's manifest names the
``executor`` that ran it. SIGINT or SIGTERM stops the sweep: the
workers are stopped, the finished runs stay written, ``sweep.json`` says ``interrupted``, and
:class:`~fedgame.errors.Interrupted` is raised with the summary attached.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fedgame.analysis.sweep import FINISHED, build_sweep_frame
from fedgame.columns import arrow_table, cast_columns
from fedgame.errors import Interrupted, ResultsError, ScenarioError
from fedgame.run import store
from fedgame.run.devices import planned_concurrency, run_device, visible_gpus
from fedgame.run.executors import Outcome, make_executor
from fedgame.run.grid import SweepPlan, SweepRun
from fedgame.run.interrupts import StopOnSignal, signal_of
from fedgame.run.single import RunResult, run_tables
from fedgame.scenario.preflight import (
    check_concurrency,
    check_output,
    check_results_tree,
    memory_limit,
)


@dataclass
class SweepSummary:
    """Counts of one ``run_sweep`` call and where the results are."""

    sweep_dir: Path
    total: int
    skipped: int = 0
    done: int = 0
    diverged: int = 0
    #: finished runs with degenerate play, by kind (lone_player, ...): how many runs had it
    degenerate: dict[str, int] = field(default_factory=dict)
    degenerate_runs: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    #: finished runs whose folders were damaged, with what was wrong; they were run again
    repaired: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    status: str = "completed"

    def line(self) -> str:
        repaired = f", {len(self.repaired)} damaged and rerun" if self.repaired else ""
        return (
            f"{self.total} runs: {self.done} done ({self.diverged} diverged), "
            f"{self.skipped} skipped (already finished), {len(self.failed)} failed"
            f"{repaired} in {self.seconds:.1f} s"
        )

    def count_degenerate(self, manifest: dict[str, Any]) -> None:
        """Count one finished run's degenerate play (its manifest's ``warnings`` by kind)."""
        kinds = manifest.get("warnings") or {}
        if kinds:
            self.degenerate_runs += 1
            for kind in kinds:
                self.degenerate[kind] = self.degenerate.get(kind, 0) + 1

    def degenerate_line(self) -> str | None:
        """``degenerate play in 4 of 18 runs: lone_player in 4, ...`` (None: none); runs
        skipped as already finished are not counted."""
        if not self.degenerate_runs:
            return None
        kinds = ", ".join(f"{kind} in {n}" for kind, n in sorted(self.degenerate.items()))
        skipped = ", not counting those finished before" if self.skipped else ""
        return (
            f"degenerate play in {self.degenerate_runs} of {self.done} runs{skipped}: {kinds} "
            "(see 'warnings' in each run's manifest.json and the sweep table's 'degenerate')"
        )


def run_status(run_dir: Path) -> str | None:
    """The status in ``run_dir``'s manifest, or None when there is no readable manifest."""
    try:
        return str(store.read_manifest(run_dir).get("status"))
    except (OSError, ValueError):
        return None


def run_sweep(
    plan: SweepPlan,
    *,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: bool = True,
    gpus: Sequence[str] | None = None,
    command: str | None = None,
) -> SweepSummary:
    """Execute every unfinished run of ``plan`` and write ``sweep.parquet``.

    ``sweep.json`` keeps one ``history`` entry per call (a resume adds one, never rewrites
    the earlier ones): ``command`` (default: this process's command line), the executor, the
    start and end (UTC, ISO 8601), the status and the counts of runs done, skipped, failed.

    The output folder, the memory of the concurrent runs and the executor (Ray connected) are
    checked before anything is written, so a bad setting raises ``ScenarioError`` with nothing
    run. ``gpus`` are the GPU ids the executor plans its workers (local) or its cluster (a
    local Ray) with; default: those visible here (:func:`fedgame.run.devices.visible_gpus`).
    """
    started = time.perf_counter()
    check_output(plan.sweep_dir, key=plan.out_key, value=str(plan.out))
    check_sweep_tree(plan)
    todo, repaired = plan_work(plan)
    summary = SweepSummary(plan.sweep_dir, len(plan.runs), skipped=len(plan.runs) - len(todo))
    summary.repaired = repaired
    if todo and executor != "serial" and gpus is None:
        gpus = visible_gpus()
    batch_runs = plan.batch_runs
    if todo and address is None:  # a Ray cluster's memory is not this machine's
        limit, source = memory_limit()
        concurrent = _concurrent(plan, todo, executor=executor, workers=workers, gpus=gpus)
        if executor == "batched":  # each worker holds a batch: as many runs as fit
            from fedgame.run.batched import fit_batch_runs

            batch_runs = fit_batch_runs(
                batch_runs,
                runs=len(todo),
                workers=concurrent,
                per_run=plan.memory_per_run,
                limit=limit,
            )
            concurrent = min(len(todo), concurrent * batch_runs)
        check_concurrency(plan.memory_per_run, concurrent=concurrent, limit=limit, source=source)
    pool = (
        make_executor(
            executor,
            workers=workers,
            address=address,
            workers_per_gpu=plan.workers_per_gpu,
            gpus_per_run=plan.gpus_per_run,
            gpus=gpus,
            batch_runs=batch_runs,
        )
        if todo
        else None
    )
    sweep_dir = plan.sweep_dir
    store.make_folders(plan.out, plan.name, sweep_dir.name, "runs")
    history = _history(sweep_dir)
    history.append(
        {
            "command": command if command is not None else command_line(),
            "executor": executor,
            "workers": workers,
            **({"address": address} if address else {}),
            "started": _now(),
            "ended": None,
            "status": "running",
            "done": 0,
            "skipped": summary.skipped,
            "failed": 0,
        }
    )
    (sweep_dir / "sweep.parquet").unlink(missing_ok=True)
    _write_sweep_json(plan, status="running", summary=summary, history=history)
    for run in todo:
        shutil.rmtree(plan.run_dir(run), ignore_errors=True)
    bar = _bar(len(todo), plan.name, enabled=progress)

    def on_done(outcome: Outcome) -> None:
        if outcome.result is not None:
            outcome.result.manifest.setdefault("executor", executor)
        write_outcome(outcome, plan.run_dir(outcome.run))
        if outcome.status in ("failed", "interrupted", "privacy_violation"):
            summary.failed[outcome.run.run_id] = outcome.error
        else:
            summary.done += 1
            summary.diverged += outcome.status == "diverged"
            if outcome.result is not None:
                summary.count_degenerate(outcome.result.manifest)
        if bar is not None:
            bar.set_postfix(done=summary.done, failed=len(summary.failed), refresh=False)
            bar.update(1)

    signum = 0
    with StopOnSignal() as stop:
        try:
            if pool is not None:
                pool.run(todo, on_done)
            stop.disarm()
        except KeyboardInterrupt as exc:
            stop.disarm()
            signum, summary.status = signal_of(exc), "interrupted"
        finally:
            if pool is not None:
                pool.close()
            if bar is not None:
                bar.close()
        try:
            frame = build_sweep_frame(sweep_dir, plan.describe()["runs"])
        except (OSError, ValueError) as exc:  # a run's table went missing meanwhile
            raise ResultsError(sweep_dir, f"its runs' tables cannot be read ({exc})") from None
        sweep_table = arrow_table(cast_columns(frame, "sweep"), "sweep")
        store.atomic_write_parquet(sweep_dir / "sweep.parquet", sweep_table)
        summary.seconds = time.perf_counter() - started
        history[-1].update(
            ended=_now(),
            status=summary.status,
            done=summary.done,
            diverged=summary.diverged,
            failed=len(summary.failed),
            repaired=len(summary.repaired),
            seconds=round(summary.seconds, 3),
        )
        _write_sweep_json(plan, status=summary.status, summary=summary, history=history)
    if signum:
        raise Interrupted(signum, summary)
    stop.raise_pending(summary)
    return summary


def check_sweep_tree(plan: SweepPlan) -> None:
    """Refuse, before anything is written, a sweep folder fedgame could only write through a
    link or over something that is not its own: a link or a file at ``<name>``,
    ``sweep-<id>``, ``runs`` or a run's folder, a folder or link at ``sweep.json`` or
    ``sweep.parquet``."""
    key, value = plan.out_key, str(plan.out)
    check_results_tree(plan.out, plan.name, plan.sweep_dir.name, "runs", key=key, value=value)
    for run in plan.runs:
        check_results_tree(plan.sweep_dir, "runs", run.run_id, key=key, value=value)
    for name in ("sweep.json", "sweep.parquet"):
        path = plan.sweep_dir / name
        problem = store.not_a_plain_file(path) if os.path.lexists(path) else None
        if problem:
            raise ScenarioError(key, value, f"a results folder fedgame can write; {path} {problem}")


def plan_work(plan: SweepPlan) -> tuple[list[SweepRun], dict[str, str]]:
    """The runs to execute, and the finished-but-damaged ones among them (id -> problem)."""
    todo: list[SweepRun] = []
    repaired: dict[str, str] = {}
    for run in plan.runs:
        run_dir = plan.run_dir(run)
        if not run_dir.exists():
            todo.append(run)
            continue
        status = run_status(run_dir)
        problem = store.run_folder_problem(run_dir)
        if status in FINISHED and problem is None:
            continue
        if status in FINISHED or (status is None and (run_dir / "manifest.json").exists()):
            repaired[run.run_id] = problem or "unreadable"
        todo.append(run)
    return todo, repaired


def _concurrent(
    plan: SweepPlan,
    todo: Sequence[SweepRun],
    *,
    executor: str,
    workers: int | None,
    gpus: Sequence[str] | None,
) -> int:
    """How many of ``todo`` run at once: the executor's own plan for their devices."""
    return planned_concurrency(
        executor,
        [run_device(run.data) for run in todo],
        workers=workers,
        workers_per_gpu=plan.workers_per_gpu,
        gpus_per_run=plan.gpus_per_run,
        gpus=gpus,
    )


def write_outcome(outcome: Outcome, run_dir: Path) -> None:
    """Write a run folder (tables first, manifest last) or a failed run's manifest."""
    run = outcome.run
    sweep_info = {"point": run.point, "replicate": run.replicate, "seconds": outcome.seconds}
    if outcome.result is None:
        manifest = {
            "scenario": run.data.get("name"),
            "run_id": run.run_id,
            "replicate": run.replicate,
            "status": "failed",
            "message": outcome.error,
            "traceback": outcome.trace,
            "sweep": sweep_info,
        }
        store.make_folders(run_dir.parent, run_dir.name)
        store.write_manifest(run_dir, manifest)
        return
    result: RunResult = outcome.result
    result.manifest["run_id"] = run.run_id
    result.manifest["sweep"] = sweep_info
    # ``warnings`` is the run's degenerate play (by kind); Python warnings have their own key
    result.manifest["runtime_warnings"] = list(outcome.warnings)
    store.make_folders(run_dir.parent, run_dir.name)
    rounds, clients = run_tables(result)
    store.write_run_files(
        run_dir,
        rounds=rounds,
        clients=clients,
        scenario=result.scenario,
        manifest=result.manifest,
    )


def command_line(argv: Sequence[str] | None = None) -> str:
    """This process's command line as a shell would take it (``fedgame sweep ...``; ``python
    -m fedgame ...`` for the module).

    >>> command_line(["/x/.venv/bin/fedgame", "sweep", "a b.yaml"])
    "fedgame sweep 'a b.yaml'"
    """
    args = list(sys.argv if argv is None else argv)
    if not args:
        return ""
    head = Path(args[0]).name
    prefix = ["python", "-m", "fedgame"] if head == "__main__.py" else [head]
    return shlex.join([*prefix, *args[1:]])


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _history(sweep_dir: Path) -> list[dict[str, Any]]:
    """The invocations an earlier ``sweep.json`` recorded (none when it is absent or
    unreadable; a ``sweep.json`` from before the history began counts its summary as one)."""
    try:
        info = json.loads((sweep_dir / "sweep.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    if not isinstance(info, dict):
        return []
    history = info.get("history")
    if isinstance(history, list):
        return [entry for entry in history if isinstance(entry, dict)]
    old = info.get("summary")
    if isinstance(old, dict):
        failed = old.get("failed")
        return [
            {
                "command": None,
                "executor": None,
                "started": None,
                "ended": None,
                "status": info.get("status"),
                "done": old.get("done"),
                "skipped": old.get("skipped"),
                "failed": len(failed) if isinstance(failed, dict) else failed,
            }
        ]
    return []


def _write_sweep_json(
    plan: SweepPlan,
    *,
    status: str,
    summary: SweepSummary | None = None,
    history: list[dict[str, Any]] | None = None,
) -> None:
    info: dict[str, Any] = {"status": status, **plan.describe()}
    if summary is not None:
        info["summary"] = {
            "total": summary.total,
            "done": summary.done,
            "diverged": summary.diverged,
            "degenerate_runs": summary.degenerate_runs,
            "degenerate": summary.degenerate,
            "skipped": summary.skipped,
            "failed": summary.failed,
            "repaired": summary.repaired,
            "seconds": summary.seconds,
        }
    if history is not None:
        info["history"] = history
    store.atomic_write_text(plan.sweep_dir / "sweep.json", json.dumps(info, indent=2, default=str))


def _bar(total: int, name: str, *, enabled: bool) -> Any:
    if not enabled or total == 0:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=f"sweep {name}", unit="run")


__all__ = [
    "SweepPlan",
    "SweepRun",
    "SweepSummary",
    "command_line",
    "run_status",
    "run_sweep",
    "write_outcome",
]
