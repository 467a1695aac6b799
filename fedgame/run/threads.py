"""How many CPU threads a run's torch (and BLAS/OpenMP) computations use.

Torch's default is one intra-op thread per core. For fedgame's small models that is a loss
even on idle cores (an op on a few hundred thousand values costs less than waking and joining
a second thread) and a large one on a busy machine: a thread whose core another process holds
stalls every op of the round at its join (a quickstart round: 30 ms at one thread, 250 ms at
two with one other busy process on two cores). So each run chooses its threads
(:func:`choose_threads`) from

* the work of one local step, ``K x B x P`` multiply-accumulates for the forward pass of the
  ``K`` clients trained at once on ``B`` samples each with a ``P``-parameter model (the
  memory estimate's model size, :mod:`fedgame.scenario.footprint`): below
  :data:`SMALL_STEP_MACS` one thread; above it one thread per :data:`MACS_PER_THREAD`, at
  most the free cores;
* the cores free to this process (:func:`free_cores`): those it may run on
  (``os.sched_getaffinity``, capped by :data:`CORES_ENV`, a pool worker's share) less the
  load of other processes, never under one. The load is what the other processes keep busy
  now: on Linux the busy time of the allowed cores over :data:`SAMPLE_S` (``/proc/stat``)
  less this process's own; elsewhere the 1-minute load average less this process's recent
  CPU use. The load average lags a minute behind: right after a 45 s simulation in another
  process it still read 1.5 on the idle 2-core machine, and a run that took one thread for
  it trained at 108-121 ms a round against 72-78 ms at two.

A run on a GPU uses one CPU thread (the CPU only drives the device and the agents). The
scenario's ``training.threads`` (a positive integer) overrides the choice. The manifest
records the threads, the cores counted and why (``threads``). :func:`using_threads` sets them
for the run and restores the caller's settings afterwards, so a library call leaves torch as
it found it.

Threads do not change the tables, as far as measured: torch splits a matrix product and a
reduction along a dimension between threads by output element, so each value is summed in the
same order at any thread count; only a reduction of a whole tensor of more than 32,768 values
(torch's grain size) to one number sums per-thread partial results (``x.sum()`` of 4 million
values moves in its last bits between 1, 2 and 4 threads). The quickstart's tables are
identical at 1 and 2 threads, and ``tests/run/test_threads.py`` compares a run of a
38,410-parameter MLP with per-sample clipping at 1, 2 and 3 threads, table for table.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedgame.scenario.schema import Scenario

#: forward multiply-accumulates of one local step (all clients trained at once) below which a
#: run uses one thread: an op of that size takes well under a millisecond on one core
SMALL_STEP_MACS = 1 << 24
#: one more thread per this many multiply-accumulates of a local step (above the small size)
MACS_PER_THREAD = 1 << 24
#: environment variable capping the cores a process counts as its own (a pool worker's share)
CORES_ENV = "FEDGAME_CORES"
#: seconds over which the allowed cores' busy time is sampled (Linux)
SAMPLE_S = 0.1


@dataclass(frozen=True)
class ThreadChoice:
    """The threads a run uses and why (``source``: ``policy`` or ``training.threads``)."""

    threads: int
    source: str
    why: str
    cores: int | None = None
    step_macs: int | None = None

    def manifest(self) -> dict[str, Any]:
        """The manifest's ``threads`` entry."""
        return {
            "threads": self.threads,
            "source": self.source,
            "why": self.why,
            "free_cores": self.cores,
            "step_macs": self.step_macs,
        }


@dataclass
class _OwnUse:
    """This process's CPU time at its last :func:`free_cores` call (to tell its own load
    from other processes')."""

    wall: float | None = None
    cpu: float = 0.0


_own = _OwnUse()


def _own_busy() -> float:
    """Cores this process kept busy since the previous call (0 on the first, or after a
    minute: the load average has forgotten it by then)."""
    now, times = time.monotonic(), os.times()
    cpu = times.user + times.system
    busy = 0.0
    if _own.wall is not None and 0 < now - _own.wall < 60:
        busy = (cpu - _own.cpu) / (now - _own.wall)
    _own.wall, _own.cpu = now, cpu
    return max(0.0, busy)


def allowed_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by :data:`CORES_ENV`."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    cap = os.environ.get(CORES_ENV, "")
    if cap.isdigit() and int(cap) > 0:
        cores = min(cores, int(cap))
    return max(1, cores)


def free_cores(*, sample: bool = True) -> tuple[int, str]:
    """``(cores, description)``: the allowed cores less other processes' load, at least 1.

    Other processes' load (rounded to the nearest core) is, with ``sample`` on Linux, the
    busy time of the allowed cores over :data:`SAMPLE_S` less this process's own
    (:func:`busy_cores`); otherwise the 1-minute load average less what this process used
    since its previous call (a serial sweep's own earlier runs are in the load average too).
    """
    cores = allowed_cores()
    busy = busy_cores() if sample else None
    if busy is not None:
        others = busy
        found = f"{cores} allowed cores, {others:.2f} busy with other processes now"
    else:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this platform
            return cores, f"{cores} allowed cores (no load average)"
        others = max(0.0, load - _own_busy())
        found = f"{cores} allowed cores, load average {load:.2f} ({others:.2f} from others)"
    free = max(1, min(cores, cores - math.floor(others + 0.5)))
    return free, found


def _cpu_times(cpus: set[int]) -> tuple[float, float] | None:
    """(busy, total) jiffies of ``cpus`` from ``/proc/stat``, or None where it cannot be
    read (not Linux)."""
    busy = total = 0.0
    try:
        with open("/proc/stat", encoding="ascii") as stat:
            for line in stat:
                name, *fields = line.split()
                if not name.startswith("cpu") or name == "cpu":
                    continue
                if not name[3:].isdigit() or int(name[3:]) not in cpus:
                    continue
                ticks = [float(f) for f in fields[:8]]  # user ... steal
                idle = ticks[3] + ticks[4]  # idle + iowait
                busy += sum(ticks) - idle
                total += sum(ticks)
    except (OSError, ValueError, IndexError):
        return None
    return (busy, total) if total > 0 else None


def busy_cores(window: float = SAMPLE_S) -> float | None:
    """Cores of this process's affinity that other processes keep busy, measured over
    ``window`` seconds (``/proc/stat`` less this process's CPU time); None off Linux."""
    try:
        cpus = os.sched_getaffinity(0)
    except AttributeError:  # not Linux
        return None
    before, own_before = _cpu_times(cpus), os.times()
    if before is None:
        return None
    time.sleep(window)
    after, own_after = _cpu_times(cpus), os.times()
    if after is None or after[1] <= before[1]:
        return None
    share = (after[0] - before[0]) / (after[1] - before[1])  # of the allowed cores' time
    tick = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    elapsed = (after[1] - before[1]) / tick / len(cpus)  # seconds of the window, per core
    own = (own_after.user + own_after.system) - (own_before.user + own_before.system)
    own_cores = own / elapsed if elapsed > 0 else 0.0
    return max(0.0, share * len(cpus) - own_cores)


def step_macs(scenario: Scenario) -> int | None:
    """Forward multiply-accumulates of one local step of the clients trained at once
    (``K x B x P``), or None when the model or data cannot state its size."""
    from fedgame.scenario.footprint import dataset_footprint, model_size, trained_per_round

    data = dataset_footprint(scenario)
    model = model_size(scenario, data) if data is not None else None
    if data is None or model is None:
        return None
    train = scenario.training
    batch = train.batch_size
    if train.mode == "fedsgd":
        batch = math.ceil(data.num_train / scenario.population.clients)
    return trained_per_round(scenario) * batch * model.num_params


def choose_threads(scenario: Scenario, *, device: str = "cpu", runs: int = 1) -> ThreadChoice:
    """The threads for a run of ``scenario`` training on ``device`` (see the module), or for
    ``runs`` such runs trained together (a lockstep batch: ``runs`` times the step's work)."""
    asked = scenario.training.threads
    if asked != "auto":
        return ThreadChoice(int(asked), "training.threads", f"training.threads: {asked}")
    if device.startswith("cuda"):
        return ThreadChoice(1, "policy", f"the model trains on {device}")
    one = step_macs(scenario)
    macs = None if one is None else one * runs
    small = macs is None or macs < SMALL_STEP_MACS
    cores, found = free_cores(sample=not small)  # one thread whatever the load: no sample
    if macs is None:
        return ThreadChoice(1, "policy", "the model's size is unknown", cores)
    size = f"a local step of {macs:,} multiply-accumulates"
    if runs > 1:
        size = f"{size} ({runs} runs trained together)"
    if macs < SMALL_STEP_MACS:
        why = f"{size} (under {SMALL_STEP_MACS:,}: one thread)"
        return ThreadChoice(1, "policy", why, cores, macs)
    wanted = math.ceil(macs / MACS_PER_THREAD)
    threads = max(1, min(wanted, cores))
    why = f"{size} (one thread per {MACS_PER_THREAD:,}: {wanted}); {cores} free: {found}"
    return ThreadChoice(threads, "policy", why, cores, macs)


@contextmanager
def using_threads(threads: int) -> Iterator[None]:
    """Run the block with ``threads`` torch intra-op threads and BLAS/OpenMP thread pools
    (threadpoolctl), then restore the caller's settings.

    This imports torch; a run imports ``fedgame.model`` (mesa, then torch) first, because
    mesa's module loggers inspect the call stack and every loaded module when ``mesa.model``
    is imported: after torch's modules are loaded that took 0.6-0.9 s instead of 0.4 s on
    the loaded 2-core machine (``python -X importtime``, self time of ``mesa.model``).
    """
    import torch
    from threadpoolctl import threadpool_limits

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        with threadpool_limits(limits=threads):
            yield
    finally:
        torch.set_num_threads(before)


#: the environment variables that size torch's, OpenMP's and the BLAS libraries' thread pools
THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def set_process_threads(threads: int) -> None:
    """Use ``threads`` threads in this whole process from now on (the dashboard): the thread
    pools' environment variables (read when torch and the BLAS libraries load: called before
    they load, as ``fedgame dashboard`` does, every thread the server starts later begins with
    them), then the pools of the libraries loaded. Not restored: for a process that serves
    one scenario."""
    os.environ.update({name: str(threads) for name in THREAD_ENV})
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(threads)
    threadpool_limits(limits=threads)
