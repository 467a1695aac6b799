"""The market's one training call: servers of one learner group train in one batched
``train_models`` call, bit for bit what each server's learner computes alone."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from fedgame.api import load_scenario
from fedgame.learning.batched import BatchedLearner
from fedgame.learning.models import MLP, init_parameters
from fedgame.learning.settings import TrainingSettings
from fedgame.market.model import MarketModel
from fedgame.market.training import (
    TrainingJob,
    evaluate_federations,
    learner_groups,
    train_federations,
)

N_CLIENTS = 9
SPEC = {"model": "mlp", "data": "toy"}


def learner(seed: int, *, shift: float = 0.0, **settings: object) -> BatchedLearner:
    """One server's learner over the shared toy data (``shift`` moves its training inputs);
    ``seed`` draws its own initial model."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N_CLIENTS * 20, 12)).astype(np.float32) + shift
    y = rng.integers(0, 4, len(x))
    module = MLP(MLP.Config(hidden=[8])).build(input_shape=(12,), num_classes=4)
    params = init_parameters(module, generator=torch.Generator().manual_seed(seed))
    base: dict[str, object] = {"device": "cpu", "local_steps": 3, "batch_size": 5, "lr": 0.3}
    s = TrainingSettings(**{**base, **settings})  # type: ignore[arg-type]
    return BatchedLearner(
        module,
        params=params,
        x_train=x,
        y_train=y,
        x_test=x[:50],
        y_test=y[:50],
        client_indices=np.array_split(np.arange(len(x)), N_CLIENTS),
        settings=s,
    )


def jobs(learners, hooks=None, groups=None):
    ids = [np.array([0, 3, 1, 7]), np.array([8, 2]), np.array([5, 3, 6])]
    return [
        TrainingJob(
            ln,
            ids[j],
            2,
            torch.Generator().manual_seed(100 + j),
            dict(hooks or {}),
            (groups or [0] * len(learners))[j],
        )
        for j, ln in enumerate(learners)
    ]


def alone(job):
    """The job on its own learner, with a fresh copy of its stream."""
    gen = torch.Generator().manual_seed(int(job.generator.initial_seed()))
    return job.learner.train(job.ids, round_index=job.round_index, generator=gen, **job.hooks)


def count_calls(monkeypatch) -> dict[str, int]:
    calls = {"train_models": 0, "train": 0}
    for name in calls:
        original = getattr(BatchedLearner, name)

        def wrapped(self, *a, _name=name, _original=original, **k):
            calls[_name] += 1
            return _original(self, *a, **k)

        monkeypatch.setattr(BatchedLearner, name, wrapped)
    return calls


@pytest.mark.parametrize(
    ("settings", "hooks"),
    [
        ({}, {}),
        ({"mode": "fedsgd"}, {}),
        ({"weight_decay": 0.01}, {"per_sample_clip": 0.5}),
        ({}, {"per_sample_clip": 0.2, "clip_norm": "l1"}),
    ],
)
def test_one_group_trains_in_one_call_bit_for_bit_as_each_learner_alone(
    monkeypatch, settings, hooks
):
    learners = [learner(seed, **settings) for seed in (1, 2, 3)]
    todo = jobs(learners, hooks)
    want = [alone(job) for job in jobs(learners, hooks)]
    calls = count_calls(monkeypatch)
    got = train_federations(todo)
    assert calls == {"train_models": 1, "train": 0}
    for g, w in zip(got, want):
        assert torch.equal(g.updates, w.updates)
        assert torch.equal(g.train_loss, w.train_loss)
    # the models differ, so the updates do too: each client started from its own server's
    assert not torch.equal(got[0].updates[1], got[2].updates[1])


def test_step_noise_trains_alone_from_its_own_stream(monkeypatch):
    learners = [learner(seed) for seed in (1, 2, 3)]
    noisy = {"step_noise_std": torch.full((4,), 0.3)}
    todo = jobs(learners)
    todo[0] = dataclasses.replace(todo[0], hooks=noisy)
    want = [alone(job) for job in todo]
    calls = count_calls(monkeypatch)
    got = train_federations(todo)
    assert calls == {"train_models": 1, "train": 1}
    for g, w in zip(got, want):
        assert torch.equal(g.updates, w.updates)


def test_idle_servers_and_other_groups(monkeypatch):
    learners = [learner(seed) for seed in (1, 2, 3)]
    todo: list[TrainingJob | None] = list(jobs(learners, groups=[0, 1, 0]))
    todo.append(None)
    want = [alone(job) for job in todo if job is not None]
    calls = count_calls(monkeypatch)
    got = train_federations(todo)
    assert calls == {"train_models": 1, "train": 1}  # servers 0 and 2 together, 1 alone
    assert got[3] is None
    for g, w in zip(got[:3], want):
        assert torch.equal(g.updates, w.updates)


def test_learner_groups_split_on_what_one_call_cannot_mix():
    same = [learner(1), learner(2, server_lr=0.5, server_momentum=0.9)]
    assert learner_groups(same, [SPEC, SPEC]) == [0, 0]
    assert learner_groups(same, [SPEC, {**SPEC, "model": "cnn"}]) == [0, 1]
    for other in (
        learner(2, lr=0.1),
        learner(2, local_steps=2),
        learner(2, batch_size=4),
        learner(2, per_sample_clip=1.0),
        learner(2, shift=1.0),  # other data
    ):
        assert learner_groups([learner(1), other, learner(3)], [SPEC] * 3) == [0, 1, 0]


def test_batched_evaluation_matches_each_learner_up_to_rounding():
    learners = [learner(seed) for seed in (1, 2, 3)]
    got = evaluate_federations(learners, [0, 1, 0])
    for (acc, loss), ln in zip(got, learners):
        want_acc, want_loss = ln.evaluate()
        assert acc == want_acc
        assert loss == pytest.approx(want_loss, rel=1e-5)


def market(tiny, **market_rules):
    data = dict(tiny)
    data.update(
        rounds=2,
        incentive={"kind": "qi_dpfl", "lam": 0.01},
        privacy={"kind": "zcdp_gaussian", "clip": 1.0},
        selection={"kind": "all"},
        market=market_rules,
        servers=[{"name": "A"}, {"name": "B"}, {"name": "C", "training": {"lr": 0.01}}],
    )
    data["population"] = {**data["population"], "clients": 8}
    data["population"]["budget"] = {"epsilon": 50.0, "delta": 1e-5}
    return load_scenario(data)


def test_the_market_groups_servers_and_batched_evaluation_is_an_option(tiny):
    plain = MarketModel(market(tiny))
    assert plain.learner_groups == [0, 0, 1]  # C trains with another learning rate
    batched = MarketModel(market(tiny, batched_evaluation=True))
    for m in (plain, batched):
        while m.running:
            m.step()
    a, b = plain.frames()[0], batched.frames()[0]
    assert list(a.columns) == list(b.columns)
    assert np.array_equal(a["test_accuracy"], b["test_accuracy"])
    np.testing.assert_allclose(a["test_loss"], b["test_loss"], rtol=1e-5)
