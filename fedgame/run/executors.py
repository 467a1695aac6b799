"""Where a sweep's runs execute: in this process, in a local process pool, or on Ray.

Every executor calls :func:`execute` on a :class:`~fedgame.run.grid.SweepRun` (the ``batched``
pool, :mod:`fedgame.run.batched`, runs a batch of them in lockstep) and hands its
:class:`Outcome` to a callback in the driver process, which writes the run folder. Workers
never write the results (a batch worker only spools pickled outcomes into a private temporary
folder the driver reads), so a killed worker or driver leaves no half-written result behind.

Local pool workers ignore SIGINT (a Ctrl-C in the terminal reaches the whole process group;
the driver stops the workers itself) and exit when the driver dies, even by ``kill -9``: on
Linux the kernel kills them (``PR_SET_PDEATHSIG``), and everywhere a watchdog thread in each
worker notices its parent changed and exits within :data:`PARENT_POLL_S` seconds.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import socket
import sys
import threading
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from fedgame.errors import Interrupted, ScenarioError
from fedgame.plugins import add_search_dirs, module_dirs
from fedgame.run.devices import WorkerPlan, plan_local_workers, ray_gpus, run_device
from fedgame.run.grid import SweepRun
from fedgame.run.single import RunResult
from fedgame.run.threads import CORES_ENV, ThreadChoice, allowed_cores
from fedgame.trust import TRUST_ENV, trusted

EXECUTORS = ("local", "batched", "ray", "serial")


@dataclass
class Outcome:
    """What became of one run: ``status`` is completed, diverged, degenerate,
    privacy_violation (a failure: :mod:`fedgame.privacy.invariant`), interrupted or failed.

    An interrupted run (its process got SIGINT/SIGTERM) keeps its finished rounds in
    ``result``; ``signum`` is the signal.
    """

    run: SweepRun
    status: str
    result: RunResult | None = None
    error: str = ""
    trace: str = ""
    seconds: float = 0.0
    warnings: tuple[str, ...] = ()
    signum: int = 0


OnDone = Callable[[Outcome], None]

#: seconds to wait for the futures of a broken process pool to be failed by the pool
BROKEN_POOL_WAIT_S = 30.0


#: thread-pool sizes for worker processes: one thread each, or workers oversubscribe the cores
SINGLE_THREAD_ENV = {
    "OMP_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
}


#: seconds between a worker's checks that its parent is still alive
PARENT_POLL_S = 0.2
#: exit status of a worker whose parent died
EXIT_ORPHANED = 70
_PR_SET_PDEATHSIG = 1
_watching = False


def init_worker(cores: int = 1) -> None:
    """Worker set-up: one torch thread and one BLAS/OpenMP thread per worker process between
    runs, and ``cores`` cores for each run's thread policy to count
    (:data:`~fedgame.run.threads.CORES_ENV`; :func:`~fedgame.run.threads.choose_threads`)."""
    import torch
    from threadpoolctl import threadpool_limits

    os.environ[CORES_ENV] = str(max(1, cores))
    torch.set_num_threads(1)
    threadpool_limits(limits=1)


def init_pool_worker(
    driver: int,
    slots: Any = None,
    plugin_dirs: Sequence[str] = (),
    trust: bool = False,
    cores: int = 1,
) -> None:
    """Local pool worker set-up: ignore SIGINT, die with ``driver`` (the process that started
    the pool), take this worker's environment (``CUDA_VISIBLE_DEVICES``: its GPU) from the
    ``slots`` queue when there is one, find the scenarios' plug-in modules where the driver
    found them (trusting them when the driver did), then :func:`init_worker` with this
    worker's share of the driver's cores (``cores``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_with_parent(driver)
    if slots is not None:
        os.environ.update(slots.get(timeout=60))  # before CUDA is first used in this process
    take_plugins(plugin_dirs, trust)
    init_worker(cores)


def take_plugins(dirs: Sequence[str], trust: bool) -> None:
    """A worker: search ``dirs`` first for scenario modules, and trust them iff the driver
    did (``FEDGAME_TRUST_PLUGINS``, set for this process only)."""
    add_search_dirs(dirs)
    os.environ[TRUST_ENV] = "1" if trust else "0"


def plugin_dirs(runs: Sequence[SweepRun]) -> tuple[str, ...]:
    """The folders the driver imported the runs' scenario plug-in modules from (each run
    imports its ``plugins`` when it validates its scenario; a worker needs their folders on
    its ``sys.path``)."""
    names = dict.fromkeys(name for run in runs for name in run.data.get("plugins") or ())
    return module_dirs(names)


def _driver_trusts(runs: Sequence[SweepRun]) -> bool:
    """Whether workers may import the runs' plug-in modules: the driver trusts them (it
    validated every run before, so a run with modules and no trust never gets here)."""
    return any(run.data.get("plugins") for run in runs) and trusted()


def exit_with_parent(parent: int) -> None:
    """End this process when its parent ``parent`` dies (see the module docstring).

    ``parent`` is passed in rather than read here: a parent that died while this process was
    starting has already been replaced by whoever adopted it.
    """
    global _watching
    if _watching:
        return
    _watching = True
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the kernel was asked
        os._exit(EXIT_ORPHANED)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="fedgame-parent-watch", daemon=True).start()


@contextmanager
def single_threaded_env() -> Iterator[None]:
    """Set :data:`SINGLE_THREAD_ENV` while worker processes are spawned, then restore."""
    saved = {k: os.environ.get(k) for k in SINGLE_THREAD_ENV}
    os.environ.update(SINGLE_THREAD_ENV)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def execute(run: SweepRun) -> Outcome:
    """Validate and simulate one run; any exception becomes a failed ``Outcome``; the Python
    warnings a finished run raised go to its ``warnings``."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = simulate_run(run)
    if outcome.result is not None and not outcome.signum:
        outcome.warnings = tuple(dict.fromkeys(str(w.message) for w in caught))
    return outcome


def simulate_run(run: SweepRun, *, threads: ThreadChoice | None = None) -> Outcome:
    """:func:`execute` without catching warnings (the caller does): ``threads`` is
    :func:`~fedgame.run.single.simulate`'s (a lockstep batch sets them for every run)."""
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    started = time.perf_counter()
    try:
        scenario = validate(run.data)
        result = simulate(scenario, replicate=run.replicate, run_id=run.run_id, threads=threads)
    except Interrupted as exc:
        return Outcome(
            run,
            "interrupted" if exc.result is not None else "failed",
            exc.result,
            error=f"run {exc.describe()}",
            seconds=time.perf_counter() - started,
            signum=exc.signum,
        )
    except Exception as exc:
        return Outcome(
            run,
            "failed",
            error=f"{type(exc).__name__}: {exc}",
            trace=traceback.format_exc(),
            seconds=time.perf_counter() - started,
        )
    status = str(result.manifest["status"])
    error = str(result.manifest["message"]) if status == "privacy_violation" else ""
    return Outcome(run, status, result, error=error, seconds=time.perf_counter() - started)


def failed(run: SweepRun, error: str) -> Outcome:
    return Outcome(run, "failed", error=error)


class SerialExecutor:
    """Runs in this process, one after the other (debugging, tests); each run chooses its
    threads (:mod:`fedgame.run.threads`) and restores this process's afterwards."""

    def run(self, runs: Sequence[SweepRun], on_done: OnDone) -> None:
        for run in runs:
            outcome = execute(run)
            on_done(outcome)
            if outcome.signum:  # this process was signalled: the sweep stops too
                raise Interrupted(outcome.signum)

    def close(self) -> None:
        pass


class LocalExecutor:
    """A spawn-based process pool; each worker's runs choose their threads from the worker's
    share of the cores (:mod:`fedgame.run.threads`; one thread for small models).

    Workers are planned from the runs' devices (:func:`~fedgame.run.devices.plan_local_workers`):
    ``workers_per_gpu`` per GPU of ``gpus`` (default: the visible ones), each with
    ``CUDA_VISIBLE_DEVICES`` set, when the runs train on CUDA, else ``workers`` CPU workers
    (default one per core). At most that many runs
    are in flight, so when a worker dies only the runs that were actually running are lost
    (recorded as failed); the rest go to a fresh pool.
    """

    def __init__(
        self,
        workers: int | None = None,
        *,
        workers_per_gpu: int = 1,
        gpus: Sequence[str] | None = None,
    ) -> None:
        self.requested = workers
        self.workers_per_gpu = workers_per_gpu
        self.gpus = None if gpus is None else list(gpus)
        self.workers = workers or os.cpu_count() or 1
        self.plan: WorkerPlan | None = None

    def run(self, runs: Sequence[SweepRun], on_done: OnDone) -> None:
        import multiprocessing

        pending = deque(runs)
        context = multiprocessing.get_context("spawn")
        self.plan = plan_local_workers(
            [run_device(r.data) for r in runs],
            workers=self.requested,
            workers_per_gpu=self.workers_per_gpu,
            gpus=self.gpus,
        )
        self.workers = self.plan.workers
        while pending:
            size = min(self.workers, len(pending))
            pool = self._start_pool(context, size, runs)
            try:
                unsettled = self._drain(pool, pending, on_done)
            except BaseException:
                _stop(pool)
                raise
            if unsettled is None:
                pool.shutdown(wait=True)
                continue
            _stop(pool)  # the pool broke: its remaining futures fail (or hold a result)
            for run in self._settle(unsettled, on_done):
                on_done(failed(run, "worker process died while running"))

    def _start_pool(self, context: Any, size: int, runs: Sequence[SweepRun]) -> ProcessPoolExecutor:
        """``size`` spawned workers, each taking one of the plan's environments (its GPU) and
        its share of the cores, with the runs' plug-in folders and trust."""
        assert self.plan is not None
        slots = None
        if any(self.plan.envs):
            slots = context.Queue()
            for env in self.plan.envs[:size]:
                slots.put(env)
        with single_threaded_env():
            return ProcessPoolExecutor(
                max_workers=size,
                mp_context=context,
                initializer=init_pool_worker,
                initargs=(
                    os.getpid(),
                    slots,
                    plugin_dirs(runs),
                    _driver_trusts(runs),
                    max(1, allowed_cores() // size),
                ),
            )

    def _drain(
        self, pool: ProcessPoolExecutor, pending: deque[SweepRun], on_done: OnDone
    ) -> dict[Any, SweepRun] | None:
        """Keep ``workers`` runs in flight until ``pending`` is empty (returns None) or the
        pool breaks (returns the futures then in flight; a run that could not be submitted
        stays pending)."""
        inflight: dict[Any, SweepRun] = {}
        while pending or inflight:
            while pending and len(inflight) < self.workers:
                run = pending.popleft()
                # workers start on submit, so a worker killed as it starts fails here; so can
                # the spawn of its replacement while the breaking pool closes its pipes
                # (ValueError: bad value(s) in fds_to_keep)
                try:
                    inflight[pool.submit(execute, run)] = run
                except (BrokenProcessPool, OSError, ValueError):
                    pending.appendleft(run)
                    return inflight
            done, _ = wait(inflight, return_when=FIRST_COMPLETED)
            if any(isinstance(f.exception(), BrokenProcessPool) for f in done):
                return inflight
            for future in done:
                _report(future, inflight.pop(future), on_done)
        return None

    @staticmethod
    def _settle(inflight: dict[Any, SweepRun], on_done: OnDone) -> list[SweepRun]:
        """After the pool broke and stopped: report the runs that finished anyway, return the
        lost ones."""
        wait(inflight, timeout=BROKEN_POOL_WAIT_S)  # a broken pool fails its futures at once
        lost = []
        for future, run in inflight.items():
            if not future.done() or isinstance(future.exception(), BrokenProcessPool):
                lost.append(run)
            else:
                _report(future, run, on_done)
        return lost

    def close(self) -> None:
        pass


def _report(future: Any, run: SweepRun, on_done: OnDone) -> None:
    """Hand a finished future's outcome to ``on_done`` (a result that could not come back,
    e.g. one that fails to unpickle, is a failed run)."""
    exc = future.exception()
    on_done(failed(run, f"{type(exc).__name__}: {exc}") if exc else future.result())


def _stop(pool: ProcessPoolExecutor) -> None:
    """Shut a (possibly broken) pool down without waiting on a worker that will never finish.

    A worker started just as another died can be missed by the pool's own clean-up, which
    then waits for it forever; killing every worker first makes the shutdown return.
    """
    processes = getattr(pool, "_processes", None) or {}  # no public way to reach the workers
    for process in list(processes.values()):
        if process.is_alive():
            process.kill()
    pool.shutdown(wait=True, cancel_futures=True)


class RayExecutor:
    """Each run a Ray task (``num_cpus=1``, and ``num_gpus=gpus_per_run`` when the run trains on
    CUDA: Ray hides the GPUs from a task that asks for none, and sets the task's
    ``CUDA_VISIBLE_DEVICES`` to the GPUs it grants); without an address, a local Ray with
    ``workers`` CPUs (default all) and the GPUs ``gpus`` (default: those Ray detects)."""

    def __init__(
        self,
        workers: int | None = None,
        address: str | None = None,
        *,
        gpus_per_run: float = 1.0,
        gpus: Sequence[str] | None = None,
    ) -> None:
        self.gpus_per_run = gpus_per_run
        try:
            import ray
        except ImportError:
            raise ScenarioError(
                "--executor", "ray", "needs Ray: pip install 'fedgame[distributed]'"
            ) from None
        self._ray = ray
        check_address(address)
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no reporting from simulations
        kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False}
        if address is None:
            kwargs["num_cpus"] = workers or os.cpu_count() or 1
            if gpus is not None:
                kwargs["num_gpus"] = len(gpus)
        try:
            # ray annotates logging_level as int but takes level names (its default is "info")
            ray.init(address=address, logging_level="ERROR", **kwargs)  # type: ignore[arg-type]
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ScenarioError(
                "--address", address, f"a reachable Ray cluster ({exc})".replace("\n", " ")
            ) from None
        self._task = ray.remote(num_cpus=1, max_retries=0)(_ray_execute)

    def run(self, runs: Sequence[SweepRun], on_done: OnDone) -> None:
        ray = self._ray
        cluster_gpus = float(ray.cluster_resources().get("GPU", 0.0))
        dirs, trust = plugin_dirs(runs), _driver_trusts(runs)
        refs = {}
        for run in runs:
            gpus = ray_gpus(
                run_device(run.data), gpus_per_run=self.gpus_per_run, cluster_gpus=cluster_gpus
            )
            task = self._task.options(num_gpus=gpus) if gpus else self._task
            refs[task.remote(run, dirs, trust)] = run
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                run = refs.pop(ref)
                try:
                    on_done(ray.get(ref))
                except ray.exceptions.RayError as exc:
                    on_done(failed(run, f"Ray task failed: {type(exc).__name__}: {exc}"))

    def close(self) -> None:
        self._ray.shutdown()


def _ray_execute(run: SweepRun, plugin_dirs: tuple[str, ...], trust: bool) -> Outcome:
    take_plugins(plugin_dirs, trust)
    init_worker()
    return execute(run)


def check_address(address: str | None, *, timeout: float = 3.0) -> None:
    """Fail fast (``ScenarioError``) when a ``host:port`` Ray address does not answer."""
    if address in (None, "auto", "local"):
        return
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ScenarioError("--address", address, "host:port, ray://host:port or auto")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise ScenarioError(
            "--address", address, f"a reachable Ray head node; connecting failed: {exc}"
        ) from None


def make_executor(
    kind: str,
    *,
    workers: int | None = None,
    address: str | None = None,
    workers_per_gpu: int = 1,
    gpus_per_run: float = 1.0,
    gpus: Sequence[str] | None = None,
    batch_runs: int | None = None,
) -> SerialExecutor | LocalExecutor | RayExecutor:
    """Build (and for Ray, connect) the executor called ``kind`` (GPU settings: the sweep's
    ``workers_per_gpu`` for the local pools, ``gpus_per_run`` for Ray tasks, and the GPU ids
    ``gpus`` they plan with, default the visible ones; ``batch_runs``: the ``batched`` pool's
    cap on the runs of a batch, default :data:`fedgame.run.batched.BATCH_RUNS`)."""
    if workers is not None and workers < 1:
        raise ScenarioError("--workers", workers, "a positive integer")
    if address is not None and kind != "ray":
        raise ScenarioError("--address", address, "only with --executor ray")
    if kind == "serial":
        return SerialExecutor()
    if kind == "local":
        return LocalExecutor(workers, workers_per_gpu=workers_per_gpu, gpus=gpus)
    if kind == "batched":
        from fedgame.run.batched import BATCH_RUNS, BatchedExecutor

        return BatchedExecutor(
            workers,
            batch_runs=batch_runs or BATCH_RUNS,
            workers_per_gpu=workers_per_gpu,
            gpus=gpus,
        )
    if kind == "ray":
        return RayExecutor(workers, address, gpus_per_run=gpus_per_run, gpus=gpus)
    raise ScenarioError("--executor", kind, f"one of {', '.join(EXECUTORS)}")
