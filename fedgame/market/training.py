"""Local training of every federation's selected clients in a round: one function.

Each server keeps its own :class:`~fedgame.learning.batched.BatchedLearner` (its own global
model). Servers whose learners share an architecture, data and local-training settings (a
*learner group*, :func:`learner_groups`, fixed when the market is built) train their clients
in ONE :meth:`~fedgame.learning.batched.BatchedLearner.train_models` call: client i starts
from its own server's global model (issue 35 item 4). Each server's batches are still drawn
by its own learner from its own random stream (``sample_batches``), and rows never mix, so
every client's update is the one its server's learner alone computes (bit for bit on the
market's shipped scenarios, checked by their golden digests). A job that asks for per-step
noise (DP-SGD) draws ``[K, P]`` noise a step from its own stream, which one call over
several streams cannot keep: such a job trains alone, as do jobs whose learner group,
round or per-sample clipping differ.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fedgame.learning.batched import shared_call_key


@dataclass(frozen=True)
class TrainingJob:
    """One server's training in a round: its learner, the client ids it trains, the round
    index, its own random stream, its privacy plan's training hooks and its learner group
    (jobs of one group may train in one call; ``-1``: never batched with another job)."""

    learner: Any
    ids: np.ndarray
    round_index: int
    generator: torch.Generator
    hooks: dict[str, Any]
    group: int = -1


def learner_groups(learners: Sequence[Any], specs: Sequence[Any]) -> list[int]:
    """A group number per learner: equal for learners that can train in one batched call.

    ``specs[j]`` describes learner j's task (its scenario's ``model`` and ``data`` keys, any
    JSON-able value); two learners share a group when their specs, training settings (all but
    the server's step), module class, parameter layout, dtype, device and data agree (the
    data compared once, here).
    """
    keys: list[tuple[str, Any]] = []
    out: list[int] = []
    for learner, spec in zip(learners, specs, strict=True):
        key = shared_call_key(learner, spec)
        found = next(
            (g for g, (k, first) in enumerate(keys) if k == key and _same_data(first, learner)),
            None,
        )
        if found is None:
            keys.append((key, learner))
            found = len(keys) - 1
        out.append(found)
    return out


def _same_data(a: Any, b: Any) -> bool:
    """Whether two learners hold the same training/test data and client shards."""
    if a is b:
        return True
    pairs = [
        (a.x_train, b.x_train),
        (a.y_train, b.y_train),
        (a.x_test, b.x_test),
        (a.y_test, b.y_test),
        (a._index.flat, b._index.flat),
        (a._index.offsets, b._index.offsets),
        (a._index.counts, b._index.counts),
    ]
    return all(x.shape == y.shape and bool(torch.equal(x, y)) for x, y in pairs)


def _batch_key(job: TrainingJob) -> tuple[Any, ...] | None:
    """Jobs with equal keys train in one call; None: the job trains alone."""
    hooks = job.hooks
    if job.group < 0 or hooks.get("step_noise_std") is not None:
        return None
    if set(hooks) - {"per_sample_clip", "clip_norm"}:
        return None  # a hook this function does not know how to share
    return (job.group, job.round_index, hooks.get("per_sample_clip"), hooks.get("clip_norm"))


def train_federations(jobs: Sequence[TrainingJob | None]) -> list[Any]:
    """Each job's ``LocalResult`` (None for a server that trains nobody this round); the
    jobs of one learner group train in one ``train_models`` call (module doc)."""
    out: list[Any] = [None] * len(jobs)
    together: dict[tuple[Any, ...], list[int]] = {}
    for j, job in enumerate(jobs):
        if job is None or len(job.ids) == 0:
            continue
        key = _batch_key(job)
        if key is None:
            out[j] = _alone(job)
        else:
            together.setdefault(key, []).append(j)
    for members in together.values():
        if len(members) == 1:
            out[members[0]] = _alone(jobs[members[0]])  # type: ignore[arg-type]
            continue
        group = [jobs[j] for j in members]
        for j, result in zip(members, _together(group)):  # type: ignore[arg-type]
            out[j] = result
    return out


def _alone(job: TrainingJob) -> Any:
    return job.learner.train(
        job.ids, round_index=job.round_index, generator=job.generator, **job.hooks
    )


def _together(jobs: Sequence[TrainingJob]) -> list[Any]:
    """One ``train_models`` call for jobs of one learner group: each job's batches drawn by
    its own learner from its own stream, each client from its own server's model."""
    from fedgame.learning.batched import Batches, LocalResult

    lead = jobs[0].learner
    drawn = [
        job.learner.sample_batches(job.ids, round_index=job.round_index, generator=job.generator)
        for job in jobs
    ]
    batches = Batches(torch.cat([b.indices for b in drawn]), torch.cat([b.mask for b in drawn]))
    sizes = [len(job.ids) for job in jobs]
    models = torch.stack([job.learner.global_params for job in jobs])
    model_of = np.repeat(np.arange(len(jobs)), sizes)
    ids = np.concatenate([np.asarray(job.ids, dtype=np.int64) for job in jobs])
    hooks = jobs[0].hooks
    result = lead.train_models(
        models,
        model_of,
        ids,
        round_index=jobs[0].round_index,
        generator=jobs[0].generator,
        batches=batches,
        **hooks,
    )
    bounds = np.cumsum([0, *sizes]).tolist()
    return [
        LocalResult(result.updates[lo:hi], result.train_loss[lo:hi])
        for lo, hi in itertools.pairwise(bounds)
    ]


def evaluate_federations(learners: Sequence[Any], groups: Sequence[int]) -> list[Any]:
    """``(test accuracy, test loss)`` of each learner's global model; the learners of one
    group in one :meth:`~fedgame.learning.batched.BatchedLearner.evaluate_models` call
    (equal to their own ``evaluate`` up to float rounding of the batched products, so not
    bit for bit: the market's ``batched_evaluation`` option)."""
    out: list[Any] = [None] * len(learners)
    members: dict[int, list[int]] = {}
    for j, g in enumerate(groups):
        members.setdefault(g if g >= 0 else -1 - j, []).append(j)
    for js in members.values():
        if len(js) == 1:
            out[js[0]] = learners[js[0]].evaluate()
            continue
        models = torch.stack([learners[j].global_params for j in js])
        for j, res in zip(js, learners[js[0]].evaluate_models(models)):
            out[j] = res
    return out
