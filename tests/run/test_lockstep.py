"""Runs stepped in lockstep in one process (``fedgame.run.lockstep``) give each run's own tables,
bit for bit, and a run that fails or diverges ends alone."""

from __future__ import annotations

import copy
import struct
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from fedgame.run.executors import execute
from fedgame.run.grid import SweepRun
from fedgame.run.lockstep import run_batch
from fedgame.run.threads import ThreadChoice

ONE = ThreadChoice(1, "policy", "test")
#: manifest keys that differ between two executions of one run whatever executes them
VOLATILE = {"timings", "created", "threads", "executor", "batch", "git_dirty"}


def _run(tiny: dict, run_id: str, replicate: int = 0, **sections) -> SweepRun:
    data = copy.deepcopy(tiny)
    for dotted, value in sections.items():
        *path, last = dotted.split("__")
        node = data
        for key in path:
            node = node.setdefault(key, {})
        node[last] = value
    return SweepRun(run_id, dict(sections), replicate, data)


def _truncated_mnist(folder: Path) -> Path:
    """IDX files whose headers pass the checks but whose training images stop short."""
    folder.mkdir()
    for name, shape in (
        ("train-images-idx3-ubyte", (40, 28, 28)),
        ("train-labels-idx1-ubyte", (40,)),
        ("t10k-images-idx3-ubyte", (10, 28, 28)),
        ("t10k-labels-idx1-ubyte", (10,)),
    ):
        header = bytes([0, 0, 0x08, len(shape)]) + struct.pack(f">{len(shape)}I", *shape)
        payload = bytes(int(np.prod(shape)))
        if name.startswith("train-images"):
            payload = payload[:100]
        (folder / name).write_bytes(header + payload)
    return folder


def _batch(runs):
    got = {}
    run_batch(runs, lambda outcome: got.setdefault(outcome.run.run_id, outcome), threads=ONE)
    assert sorted(got) == sorted(r.run_id for r in runs)  # each reported once
    return got


def _same_as_alone(outcome, alone):
    assert outcome.status == alone.status, (outcome.error, alone.error)
    if alone.result is None:
        return
    rounds = outcome.result.rounds.drop(columns=["wall_time_s"])
    pd.testing.assert_frame_equal(rounds, alone.result.rounds.drop(columns=["wall_time_s"]))
    pd.testing.assert_frame_equal(outcome.result.clients, alone.result.clients)
    mine = {k: v for k, v in outcome.result.manifest.items() if k not in VOLATILE}
    theirs = {k: v for k, v in alone.result.manifest.items() if k not in VOLATILE}
    assert mine == theirs
    assert outcome.warnings == alone.warnings


def test_runs_differing_in_population_stragglers_seed_and_game_train_together(tiny):
    tiny["rounds"] = 4
    runs = [
        _run(tiny, "a", population__clients=8),
        _run(tiny, "b", population__clients=16, population__straggle_prob=0.4),
        _run(tiny, "c", replicate=1),  # another seed stream: another train/test split
        _run(tiny, "d", seed=11, incentive={"kind": "fixed"}),
        _run(tiny, "e", model={"kind": "mlp"}),  # another architecture: its own group
        _run(tiny, "f", privacy={"kind": "dpsgd_local", "clip": 1.0}),  # per-step noise
    ]
    got = _batch(runs)
    for run in runs:
        _same_as_alone(got[run.run_id], execute(run))
    batch = {k: got[k].result.manifest["batch"] for k in got}
    assert {b["runs"] for b in batch.values()} == {6}, batch
    assert all(b["rounds_trained"] == 4 for k, b in batch.items() if k != "d"), batch
    for k in "abc":  # logreg, same settings: every round in one call
        assert batch[k]["rounds_together"] == 4
    # the fixed offer leaves a round without participants: "d" trains the next round's
    # clients as the others train this round's, in the same call (the learning rate agrees)
    assert batch["d"]["rounds_together"] == batch["d"]["rounds_trained"] > 0
    assert batch["e"]["rounds_together"] == 0  # alone in its group
    assert batch["f"]["rounds_together"] == 0  # DP-SGD noise: its own stream
    assert {o.result.manifest["executor"] for o in got.values()} == {"batched"}


def test_a_failing_and_a_diverging_run_end_alone(tiny, tmp_path):
    tiny["rounds"] = 5
    folder = _truncated_mnist(tmp_path / "mnist")
    runs = [
        _run(tiny, "ok1"),
        _run(tiny, "bad", data__dataset={"kind": "mnist", "path": str(folder)}),
        _run(tiny, "boom", training__server_lr=1e38),
        _run(tiny, "ok2", population__clients=20),
    ]
    got = _batch(runs)
    assert got["bad"].status == "failed" and "truncated" in got["bad"].error
    assert got["boom"].status == "diverged"
    assert got["boom"].result.manifest["rounds_completed"] < 5
    for run in runs:
        _same_as_alone(got[run.run_id], execute(run))
    assert got["ok1"].result.manifest["batch"]["rounds_together"] == 5


def test_a_batched_call_that_raises_reaches_only_the_run_whose_request_raises(tiny, monkeypatch):
    from fedgame.learning.batched import BatchedLearner

    tiny["rounds"] = 2
    runs = [_run(tiny, "x"), _run(tiny, "y", population__clients=9)]
    real = BatchedLearner.train

    def fussy(self, client_ids, **kwargs):  # the 9-client run's learner, asked by the batch
        if len(self.client_sizes) == 9 and kwargs.get("batches") is not None:
            raise RuntimeError("this learner refuses")
        return real(self, client_ids, **kwargs)

    def refuse(*args, **kwargs):
        raise RuntimeError("the batched call failed")

    monkeypatch.setattr(BatchedLearner, "train_models", refuse)
    retried = _batch(runs)  # each request again alone: both runs go on
    assert [retried[k].result.manifest["batch"]["rounds_together"] for k in "xy"] == [0, 0]
    monkeypatch.setattr(BatchedLearner, "train", fussy)
    got = _batch(runs)
    assert got["y"].status == "failed" and "this learner refuses" in got["y"].error
    assert got["x"].status == "completed"
    monkeypatch.undo()
    for run in runs:
        _same_as_alone(retried[run.run_id], execute(run))
    _same_as_alone(got["x"], execute(runs[0]))


def test_train_models_on_joined_data_equals_each_learner_alone():
    """Two learners with different data: one call on their joined data (each learner's
    batches offset to its part) gives each learner's own update."""
    from fedgame.learning.batched import BatchedLearner, Batches
    from fedgame.learning.settings import TrainingSettings

    gen = torch.Generator().manual_seed(0)
    module = torch.nn.Linear(4, 3)
    params = {k: v.detach().clone() for k, v in module.named_parameters()}
    settings = TrainingSettings(local_steps=3, batch_size=5, lr=0.2)
    learners = []
    for n in (30, 50):
        x = torch.randn(n, 4, generator=gen)
        y = torch.randint(0, 3, (n,), generator=gen)
        shards = np.array_split(np.arange(n), 3)
        learners.append(
            BatchedLearner(
                module,
                params=params,
                x_train=x,
                y_train=y,
                x_test=x,
                y_test=y,
                client_indices=shards,
                settings=settings,
            )
        )
    learners[1].set_global_params(learners[1].global_params + 0.5)
    ids = [np.array([0, 2]), np.array([1, 2, 0])]
    drawn = [
        L.sample_batches(i, round_index=0, generator=torch.Generator().manual_seed(7 + j))
        for j, (L, i) in enumerate(zip(learners, ids))
    ]
    alone = [
        L.train(i, round_index=0, generator=torch.Generator(), batches=b)
        for L, i, b in zip(learners, ids, drawn)
    ]
    x = torch.cat([L.x_train for L in learners])
    y = torch.cat([L.y_train for L in learners])
    batches = Batches(
        torch.cat([drawn[0].indices, drawn[1].indices + 30]),
        torch.cat([drawn[0].mask, drawn[1].mask]),
    )
    joined = learners[0].train_models(
        torch.stack([L.global_params for L in learners]),
        [0, 0, 1, 1, 1],
        np.concatenate(ids),
        round_index=0,
        generator=torch.Generator(),
        batches=batches,
        data=(x, y),
    )
    assert torch.equal(joined.updates[:2], alone[0].updates)
    assert torch.equal(joined.updates[2:], alone[1].updates)
    assert torch.equal(joined.train_loss, torch.cat([a.train_loss for a in alone]))
    with pytest.raises(ValueError, match="batches"):
        learners[0].train_models(
            learners[0].global_params[None], [0], [0], round_index=0, generator=gen, data=(x, y)
        )


def test_a_failing_report_stops_the_batch_leaving_no_thread_behind(tiny):
    import threading

    runs = [_run(tiny, "short", rounds=1), _run(tiny, "long", rounds=50)]
    before = threading.active_count()

    def report(outcome):
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        run_batch(runs, report, threads=ONE)
    deadline = 50
    while threading.active_count() > before and deadline:
        threading.Event().wait(0.1)
        deadline -= 1
    assert threading.active_count() == before
