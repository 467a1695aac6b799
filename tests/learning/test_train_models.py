"""Several global models in one learner: ``train_models`` and ``evaluate_models`` against G
separate learners (each holding one of the models as its global model)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgame.learning.batched import BatchedLearner
from fedgame.learning.models import MLP, init_parameters
from fedgame.learning.settings import TrainingSettings

G, N_CLIENTS = 3, 9


def learner(**settings: object) -> BatchedLearner:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((N_CLIENTS * 20, 12)).astype(np.float32)
    y = rng.integers(0, 4, len(x))
    module = MLP(MLP.Config(hidden=[8])).build(input_shape=(12,), num_classes=4)
    params = init_parameters(module, generator=torch.Generator().manual_seed(1))
    s = TrainingSettings(device="cpu", local_steps=3, batch_size=5, lr=0.3, **settings)
    shards = np.array_split(np.arange(len(x)), N_CLIENTS)
    return BatchedLearner(
        module,
        params=params,
        x_train=x,
        y_train=y,
        x_test=x[:50],
        y_test=y[:50],
        client_indices=shards,
        settings=s,
    )


def models(base: BatchedLearner) -> torch.Tensor:
    """G different global models: the learner's, moved by independent random steps."""
    gen = torch.Generator().manual_seed(7)
    noise = torch.randn((G, base.num_params), generator=gen)
    return base.global_params + 0.5 * noise * torch.arange(G)[:, None]


@pytest.mark.parametrize("clip", [None, 0.5])
def test_each_client_trains_from_its_own_model_as_a_separate_learner_would(clip):
    many = learner()
    starts = models(many)
    ids = np.array([0, 3, 1, 7, 8, 2, 5])
    tags = np.array([2, 0, 1, 1, 2, 0, 2])
    batches = many.sample_batches(ids, round_index=0, generator=torch.Generator().manual_seed(3))
    got = many.train_models(
        starts,
        tags,
        ids,
        round_index=2,
        generator=torch.Generator(),
        batches=batches,
        per_sample_clip=clip,
    )
    for g in range(G):
        rows = np.flatnonzero(tags == g)
        one = learner()
        one.set_global_params(starts[g])
        sub = type(batches)(batches.indices[rows], batches.mask[rows])
        want = one.train(
            ids[rows], round_index=2, generator=torch.Generator(), batches=sub, per_sample_clip=clip
        )
        # row-independent arithmetic: the rows agree to float32 rounding of batched products
        torch.testing.assert_close(got.updates[rows], want.updates, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(got.train_loss[rows], want.train_loss, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got.updates[tags == 0].mean(0), got.updates[tags == 2].mean(0))


def test_one_model_is_train_bit_for_bit():
    a, b = learner(weight_decay=0.01), learner(weight_decay=0.01)
    ids = np.arange(N_CLIENTS)
    std = torch.full((N_CLIENTS,), 0.1)
    got = a.train_models(
        a.global_params[None],
        np.zeros(N_CLIENTS),
        ids,
        round_index=0,
        generator=torch.Generator().manual_seed(4),
        step_noise_std=std,
    )
    want = b.train(
        ids, round_index=0, generator=torch.Generator().manual_seed(4), step_noise_std=std
    )
    assert torch.equal(got.updates, want.updates)
    assert torch.equal(got.train_loss, want.train_loss)


def test_evaluate_models_matches_separate_evaluations():
    many = learner(eval_batch_size=16)  # several chunks: 50 samples, 16 // 3 = 5 per chunk
    starts = models(many)
    got = many.evaluate_models(starts)
    for g in range(G):
        many.set_global_params(starts[g])
        acc, loss = many.evaluate()
        assert got[g][0] == pytest.approx(acc, abs=1e-12)
        assert got[g][1] == pytest.approx(loss, rel=1e-5)
    assert len({round(loss, 6) for _, loss in got}) == G  # the models differ


def test_bad_shapes_and_tags_are_refused():
    one = learner()
    good = models(one)
    with pytest.raises(ValueError, match="models must be"):
        one.train_models(good[:, :-1], [0], [0], round_index=0, generator=torch.Generator())
    with pytest.raises(ValueError, match="one model per client"):
        one.train_models(good, [0, 1], [0], round_index=0, generator=torch.Generator())
    with pytest.raises(ValueError, match=r"model_of must lie in \[0, 3\)"):
        one.train_models(good, [3], [0], round_index=0, generator=torch.Generator())
    with pytest.raises(ValueError, match="models must be"):
        one.evaluate_models(good[0])
