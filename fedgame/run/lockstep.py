"""Several sweep runs stepped in lockstep in one process, their clients trained together.

Each run of a batch executes as it would alone (:func:`~fedgame.run.executors.simulate_run`:
validate, build, step, tables), in a thread of its own used as a coroutine: only one thread
runs at a time, and a run's thread pauses where its model asks the learner to train
(:data:`~fedgame.learning.batched.TRAIN_ROUTE`). When every unfinished run of the batch has
paused (each at its next round's training) the driver trains all their requests at once: the
requests of runs whose learners share a *training group* (:class:`TrainingGroups`: model spec,
local-training settings, parameter layout, dtype, device) and round go to one
:meth:`~fedgame.learning.batched.BatchedLearner.train_models` call, each client from its own
run's global model with the batches its own learner drew from its own random stream and its
own run's training data, so every update is the one the run computes alone (rows never mix).
Requests with per-step noise (DP-SGD) train alone (one call draws one stream's noise), as do
runs alone in their group.

Runs may differ in anything else (population, straggling, seeds and so data splits, the
game): they share no state but equal data tensors (one copy in memory instead of one a run).
A run that fails or diverges ends alone; a batched call that
raises is retried request by request, so the exception reaches only the run whose request
raises it. Python warnings are captured once for the batch and credited to the run whose
thread raised them (a warning raised in a batched call, to each run in it).
"""

from __future__ import annotations

import itertools
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedgame.learning.batched import TRAIN_ROUTE, Batches, LocalResult, shared_call_key
from fedgame.run.executors import Outcome, simulate_run
from fedgame.run.grid import SweepRun
from fedgame.run.threads import ThreadChoice

#: training keywords a batched call can share (others: the request trains alone)
_SHAREABLE = frozenset({"per_sample_clip", "clip_norm"})


@dataclass(frozen=True)
class Request:
    """A paused run's call to ``learner.train``: its clients, round, random stream, keywords."""

    learner: Any
    ids: np.ndarray
    round_index: int
    generator: torch.Generator
    hooks: dict[str, Any]


class TrainingGroups:
    """Which learners can train in one batched call, and the training data they share.

    Two learners share a group when their scenario's ``model`` (the spec), their training
    settings (all but the server's step), module class, parameter layout, dtype and device
    agree. Their training data may differ (a run's train/test split follows its seed): the
    group keeps each distinct training set once (learners with equal data share its tensors)
    and the concatenation of all of them, which a batched call reads, each learner's sample
    indices offset to its own part (so it reads exactly its own samples). A learner whose test
    data equal its group's first learner's takes those tensors too: one copy in memory.
    """

    def __init__(self) -> None:
        self._keys: list[str] = []
        self._first: list[Any] = []
        self._sources: list[list[Any]] = []  # per group: a learner holding each distinct set
        self._joined: list[tuple[torch.Tensor, torch.Tensor] | None] = []
        self._of: dict[int, tuple[int, int]] = {}  # id(learner) -> (group, source)

    def group(self, learner: Any, spec: Any) -> int:
        """The learner's group number (assigned when first seen)."""
        known = self._of.get(id(learner))
        if known is not None:
            return known[0]
        key = shared_call_key(learner, spec)
        if key in self._keys:
            g = self._keys.index(key)
        else:
            g = len(self._keys)
            self._keys.append(key)
            self._first.append(learner)
            self._sources.append([])
            self._joined.append(None)
        sources = self._sources[g]
        found = next(
            (
                j
                for j, other in enumerate(sources)
                if _equal(other.x_train, learner.x_train) and _equal(other.y_train, learner.y_train)
            ),
            None,
        )
        if found is None:
            found = len(sources)
            sources.append(learner)
            self._joined[g] = None
        else:
            learner.x_train, learner.y_train = sources[found].x_train, sources[found].y_train
        first = self._first[g]
        same_test = _equal(first.x_test, learner.x_test) and _equal(first.y_test, learner.y_test)
        if first is not learner and same_test:
            learner.x_test, learner.y_test = first.x_test, first.y_test
        self._of[id(learner)] = (g, found)
        return g

    def data(self, learner: Any) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The group's joined training data ``(x, y)`` and the offset of ``learner``'s part."""
        g, source = self._of[id(learner)]
        sources = self._sources[g]
        joined = self._joined[g]
        if joined is None and len(sources) == 1:
            joined = self._joined[g] = (sources[0].x_train, sources[0].y_train)
        elif joined is None:
            joined = self._joined[g] = (
                torch.cat([s.x_train for s in sources]),
                torch.cat([s.y_train for s in sources]),
            )
        offset = sum(int(s.x_train.shape[0]) for s in sources[:source])
        return joined[0], joined[1], offset


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a is b or (a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b)))


class _Runner:
    """One run in a thread that runs only while the driver waits for it (:meth:`resume`)."""

    def __init__(self, run: SweepRun, threads: ThreadChoice) -> None:
        self.run = run
        self.threads = threads
        self.request: Request | None = None  # while paused
        self.reply: Any = None  # the request's LocalResult, or the exception it raised
        self.outcome: Outcome | None = None
        self.warnings: list[str] = []
        self.trained = 0  # training requests served
        self.together = 0  # ... in a call shared with another run
        self._go = threading.Semaphore(0)
        self._back = threading.Semaphore(0)
        self._thread = threading.Thread(
            target=self._main, name=f"fedgame-run-{run.run_id}", daemon=True
        )

    def resume(self) -> None:
        """Let the run go on until it asks to train or finishes."""
        self.request = None
        if self._thread.ident is None:
            self._thread.start()
        else:
            self._go.release()
        self._back.acquire()

    def _main(self) -> None:
        TRAIN_ROUTE.set(self._route)
        try:
            self.outcome = simulate_run(self.run, threads=self.threads)
        except BaseException as exc:  # simulate_run catches; this is a bug
            self.outcome = Outcome(self.run, "failed", error=f"{type(exc).__name__}: {exc}")
        finally:
            self.request = None
            self._back.release()

    def _route(
        self,
        learner: Any,
        client_ids: Sequence[int] | np.ndarray,
        round_index: int,
        generator: torch.Generator,
        hooks: dict[str, Any],
    ) -> Any:
        ids = np.asarray(client_ids, dtype=np.int64)
        self.request = Request(learner, ids, round_index, generator, hooks)
        self._back.release()  # pause: the driver trains every paused run's request
        self._go.acquire()
        reply, self.reply = self.reply, None
        if isinstance(reply, BaseException):
            raise reply
        return reply


def run_batch(
    runs: Sequence[SweepRun],
    report: Callable[[Outcome], None],
    *,
    threads: ThreadChoice,
) -> None:
    """Run ``runs`` in lockstep (module doc), calling ``report`` with each run's outcome as
    it finishes; ``threads`` are the threads this process uses (set by the caller). A
    finished run's manifest says ``executor: batched`` and, under ``batch``, how many runs
    its batch held and in how many of its training calls its clients trained together with
    another run's (``rounds_together``, of ``rounds_trained``)."""
    groups = TrainingGroups()
    active = [_Runner(run, threads) for run in runs]
    try:
        _step_all(active, groups, report, len(runs))
    finally:  # the driver failed (reporting, say): unwind the paused runs' threads
        for runner in active:
            if runner.request is not None:
                runner.reply = RuntimeError("the batch stopped")
                runner.resume()


def _step_all(
    active: list[_Runner],
    groups: TrainingGroups,
    report: Callable[[Outcome], None],
    size: int,
) -> None:
    """Resume every run until it pauses or ends, serve the paused ones' training, repeat;
    ``active`` is kept to the runs not yet ended."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        while active:
            paused = []
            for runner in active:
                seen = len(caught)
                runner.resume()
                runner.warnings += [str(w.message) for w in caught[seen:]]
                if runner.request is not None:
                    paused.append(runner)
            ended = [r for r in active if r.request is None]
            active[:] = paused
            for runner in ended:
                _finish(runner, size, report)
            if paused:
                seen = len(caught)
                _train(paused, groups)
                for runner in paused:
                    runner.warnings += [str(w.message) for w in caught[seen:]]


def _finish(runner: _Runner, size: int, report: Callable[[Outcome], None]) -> None:
    outcome = runner.outcome
    assert outcome is not None  # a runner that did not pause has finished
    if outcome.result is not None:
        outcome.warnings = tuple(dict.fromkeys(runner.warnings))
        outcome.result.manifest["executor"] = "batched"
        outcome.result.manifest["batch"] = {
            "runs": size,
            "rounds_trained": runner.trained,
            "rounds_together": runner.together,
        }
    runner.outcome = None  # the batch keeps no finished run's tables
    report(outcome)


def _train(paused: Sequence[_Runner], groups: TrainingGroups) -> None:
    """Serve every paused run's training request: requests with equal :func:`_call_key` in
    one batched call, the others alone."""
    calls: dict[tuple[Any, ...], list[_Runner]] = {}
    for runner in paused:
        request = runner.request
        assert request is not None
        key = _call_key(request, groups.group(request.learner, _model_spec(runner.run)))
        runner.trained += 1
        if key is None:
            runner.reply = _alone(request)
        else:
            calls.setdefault(key, []).append(runner)
    for members in calls.values():
        if len(members) == 1:
            members[0].reply = _alone(members[0].request)  # type: ignore[arg-type]
            continue
        results, shared = _together([m.request for m in members], groups)  # type: ignore[misc]
        for runner, result in zip(members, results):
            runner.reply = result
            runner.together += shared


def _call_key(request: Request, group: int) -> tuple[Any, ...] | None:
    """Requests with equal keys train in one call; None: the request trains alone (per-step
    noise: one call draws one stream's noise, and each run has its own). The round enters
    through its learning rate only (all a round changes in local training), so a run a round
    ahead of the others (it trained nobody in some round) still trains with them."""
    hooks = request.hooks
    if set(hooks) - _SHAREABLE:
        return None
    lr = request.learner.settings.lr_at(request.round_index)
    return (group, lr, hooks.get("per_sample_clip"), hooks.get("clip_norm"))


def _together(requests: Sequence[Request], groups: TrainingGroups) -> tuple[list[Any], bool]:
    """One :meth:`~fedgame.learning.batched.BatchedLearner.train_models` call: each run's
    batches drawn by its own learner from its own stream (offset into the group's joined
    data), each client from its own run's global model. Returns each request's result (or
    the exception to raise in its run) and whether the call was shared: when it raises, each
    request trains alone on the batches it drew (one request's failure reaches only its run,
    and no stream is drawn from twice)."""
    drawn: list[Any] = []
    for r in requests:
        try:
            drawn.append(
                r.learner.sample_batches(r.ids, round_index=r.round_index, generator=r.generator)
            )
        except Exception as exc:
            drawn.append(exc)
    if any(isinstance(b, BaseException) for b in drawn):
        return [
            b if isinstance(b, BaseException) else _alone(r, b) for r, b in zip(requests, drawn)
        ], False
    indices, masks = [], []
    for r, b in zip(requests, drawn):
        x, y, offset = groups.data(r.learner)
        indices.append(b.indices + offset)
        masks.append(b.mask)
    sizes = [len(r.ids) for r in requests]
    try:
        result = requests[0].learner.train_models(
            torch.stack([r.learner.global_params for r in requests]),
            np.repeat(np.arange(len(requests)), sizes),
            np.concatenate([r.ids for r in requests]),
            round_index=requests[0].round_index,
            generator=requests[0].generator,
            batches=Batches(torch.cat(indices), torch.cat(masks)),
            data=(x, y),
            **requests[0].hooks,
        )
    except Exception:
        return [_alone(r, b) for r, b in zip(requests, drawn)], False
    bounds = np.cumsum([0, *sizes]).tolist()
    return [
        LocalResult(result.updates[lo:hi], result.train_loss[lo:hi])
        for lo, hi in itertools.pairwise(bounds)
    ], True


def _alone(request: Request, batches: Batches | None = None) -> Any:
    """The request trained by its own learner (on ``batches`` when already drawn), or the
    exception it raised (to raise again in the run's thread)."""
    try:
        return request.learner.train(
            request.ids,
            round_index=request.round_index,
            generator=request.generator,
            batches=batches,
            **request.hooks,
        )
    except Exception as exc:
        return exc


def _model_spec(run: SweepRun) -> Any:
    """The run's ``model`` section as written (equal sections: equal models)."""
    return run.data.get("model")
