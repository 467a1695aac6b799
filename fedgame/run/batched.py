"""The ``batched`` sweep executor: a local process pool whose workers each step a batch of runs
in lockstep, training the batch's clients in one batched computation (:mod:`fedgame.run.lockstep`).

Runs are split into batches (:func:`make_batches`): runs with the same ``model``, ``training``
and ``data.dataset`` keys go together (runs of different keys would train apart anyway), at
most ``sweep.batch_runs`` a batch (the memory bound: a worker holds its batch's runs at once),
and split further until every worker has a batch. Workers are planned as the ``local``
executor's (:func:`~fedgame.run.devices.plan_local_workers`: one per core, or
``workers_per_gpu`` per GPU) and set their threads for the batch's combined step
(:func:`~fedgame.run.threads.choose_threads` with ``runs``).

Each run's outcome comes back as soon as the run finishes: the worker pickles it into a private
spool folder (written under a temporary name, then renamed) and the driver, polling the folder,
writes the run's folder as the other executors do. So a run that finishes early in a batch is
written at once, and when a worker dies (or the sweep is stopped) every outcome already spooled
is still written; the runs its batch was still running are recorded as failed (worker death)
or left unwritten (Ctrl-C: rerun to resume), as with the ``local`` pool.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import pickle
import shutil
import tempfile
from collections import deque
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from fedgame.run.devices import plan_local_workers, run_device
from fedgame.run.executors import (
    BROKEN_POOL_WAIT_S,
    LocalExecutor,
    OnDone,
    Outcome,
    _stop,
    failed,
)
from fedgame.run.grid import SweepRun

#: default cap on the runs of one batch (``sweep.batch_runs``)
BATCH_RUNS = 16
#: seconds between the driver's looks at the spool folder
POLL_S = 0.1
#: keys whose equal values let runs train together (see :func:`make_batches`)
_BATCH_KEYS = ("model", "training")


def batch_key(run: SweepRun) -> str:
    """Runs with equal keys can train together: their ``model``, ``training`` and
    ``data.dataset`` as written."""
    data = run.data.get("data") or {}
    parts = [run.data.get(key) for key in _BATCH_KEYS]
    return json.dumps([*parts, data.get("dataset")], sort_keys=True, default=str)


def fit_batch_runs(cap: int, *, runs: int, workers: int, per_run: int, limit: int) -> int:
    """The runs of a batch: at most ``cap``, no more than ``runs`` spread over ``workers``
    need, and few enough that ``workers`` batches of runs of ``per_run`` bytes fit in
    ``limit`` bytes (never under one: the memory check then refuses as for ``local``)."""
    fit = limit // max(1, per_run * workers)
    return max(1, min(cap, fit, -(-runs // max(1, workers))))


def make_batches(runs: Sequence[SweepRun], *, workers: int, cap: int) -> list[list[SweepRun]]:
    """Split ``runs`` into batches of runs with one :func:`batch_key`, at most ``cap`` runs
    each, as even in size as can be, and at least ``workers`` batches while there are runs to
    spread (the largest batches are split first)."""
    groups: dict[str, list[SweepRun]] = {}
    for run in runs:
        groups.setdefault(batch_key(run), []).append(run)
    parts = {key: math.ceil(len(members) / cap) for key, members in groups.items()}
    while sum(parts.values()) < workers:
        splittable = [k for k in groups if parts[k] < len(groups[k])]
        if not splittable:
            break
        widest = max(splittable, key=lambda k: len(groups[k]) / parts[k])
        parts[widest] += 1
    batches = []
    for key, members in groups.items():
        n, size = parts[key], len(members)
        bounds = [round(i * size / n) for i in range(n + 1)]
        batches += [members[lo:hi] for lo, hi in itertools.pairwise(bounds) if hi > lo]
    return batches


def execute_batch(runs: Sequence[SweepRun], spool: str) -> list[str]:
    """Worker: run ``runs`` in lockstep, spooling each outcome into ``spool`` as it finishes;
    returns the run ids spooled."""
    from fedgame.learning.device import device_name
    from fedgame.run.lockstep import run_batch
    from fedgame.run.threads import ThreadChoice, choose_threads, using_threads
    from fedgame.scenario.load import validate

    try:
        first = validate(runs[0].data)
        threads = choose_threads(first, device=device_name(first.training.device), runs=len(runs))
    except Exception:  # the run fails in its own thread, with its own message
        threads = ThreadChoice(1, "policy", "the batch's first run is not valid")
    sent: list[str] = []

    def report(outcome: Outcome) -> None:
        spool_outcome(outcome, Path(spool))
        sent.append(outcome.run.run_id)

    with using_threads(threads.threads):
        run_batch(runs, report, threads=threads)
    return sent


def spool_outcome(outcome: Outcome, spool: Path) -> None:
    """Write ``outcome`` to ``spool/<run id>.pkl`` (temporary name first, then renamed); an
    outcome that cannot be pickled is spooled as a failed run saying so."""
    try:
        payload = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        payload = pickle.dumps(failed(outcome.run, f"its outcome could not be sent: {exc}"))
    final = spool / f"{outcome.run.run_id}.pkl"
    temporary = spool / f".{outcome.run.run_id}.pkl.tmp"
    temporary.write_bytes(payload)
    os.replace(temporary, final)


class BatchedExecutor(LocalExecutor):
    """The ``local`` pool, each worker running a batch of runs in lockstep (module doc);
    ``batch_runs`` caps a batch."""

    def __init__(
        self,
        workers: int | None = None,
        *,
        batch_runs: int = BATCH_RUNS,
        workers_per_gpu: int = 1,
        gpus: Sequence[str] | None = None,
    ) -> None:
        super().__init__(workers, workers_per_gpu=workers_per_gpu, gpus=gpus)
        self.batch_runs = batch_runs
        self.batches: list[list[SweepRun]] = []

    def run(self, runs: Sequence[SweepRun], on_done: OnDone) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.plan = plan_local_workers(
            [run_device(r.data) for r in runs],
            workers=self.requested,
            workers_per_gpu=self.workers_per_gpu,
            gpus=self.gpus,
        )
        self.batches = make_batches(runs, workers=self.plan.workers, cap=self.batch_runs)
        self.workers = min(self.plan.workers, len(self.batches))
        pending = deque(self.batches)
        by_id = {run.run_id: run for run in runs}
        spool = Path(tempfile.mkdtemp(prefix="fedgame-batch-"))
        reported: set[str] = set()
        try:
            while pending:
                size = min(self.workers, len(pending))
                pool = self._start_pool(context, size, runs)
                try:
                    lost = self._drain_batches(pool, pending, spool, reported, on_done, size, by_id)
                except BaseException:
                    _collect(spool, reported, on_done, by_id)  # runs finished before the stop
                    _stop(pool)
                    raise
                if lost is None:
                    pool.shutdown(wait=True)
                    continue
                _stop(pool)
                wait(lost, timeout=BROKEN_POOL_WAIT_S)
                _collect(spool, reported, on_done, by_id)
                for batch in lost.values():
                    for run in batch:
                        if run.run_id not in reported:
                            reported.add(run.run_id)
                            on_done(failed(run, "worker process died while running"))
        finally:
            shutil.rmtree(spool, ignore_errors=True)

    def _drain_batches(
        self,
        pool: ProcessPoolExecutor,
        pending: deque[list[SweepRun]],
        spool: Path,
        reported: set[str],
        on_done: OnDone,
        size: int,
        by_id: dict[str, SweepRun],
    ) -> dict[Any, list[SweepRun]] | None:
        """Keep ``size`` batches in flight until ``pending`` is empty (returns None) or the
        pool breaks (returns the batches then in flight)."""
        inflight: dict[Any, list[SweepRun]] = {}
        while pending or inflight:
            while pending and len(inflight) < size:
                batch = pending.popleft()
                try:
                    inflight[pool.submit(execute_batch, batch, str(spool))] = batch
                except (BrokenProcessPool, OSError):
                    pending.appendleft(batch)
                    return inflight
            done, _ = wait(inflight, timeout=POLL_S, return_when=FIRST_COMPLETED)
            _collect(spool, reported, on_done, by_id)
            if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                return inflight
            for future in done:
                batch = inflight.pop(future)
                exc = future.exception()
                _collect(spool, reported, on_done, by_id)
                for run in batch:
                    if run.run_id not in reported:
                        reported.add(run.run_id)
                        why = f"{type(exc).__name__}: {exc}" if exc else "no outcome came back"
                        on_done(failed(run, why))
        return None


def _collect(spool: Path, reported: set[str], on_done: OnDone, runs: dict[str, SweepRun]) -> None:
    """Hand every outcome spooled so far to ``on_done`` (oldest first), deleting its file; an
    outcome that cannot be read back is a failed run (``runs``: the sweep's, by id)."""
    files = sorted(spool.glob("*.pkl"), key=lambda p: p.stat().st_mtime_ns)
    for path in files:
        run_id = path.name.removesuffix(".pkl")
        try:
            outcome = pickle.loads(path.read_bytes())
        except Exception as exc:
            problem = f"its outcome could not be read back: {type(exc).__name__}: {exc}"
            outcome = failed(runs[run_id], problem) if run_id in runs else None
        path.unlink(missing_ok=True)
        if outcome is not None and run_id not in reported:
            reported.add(run_id)
            on_done(outcome)
