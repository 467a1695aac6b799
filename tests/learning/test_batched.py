"""The batched learner against the sequential reference, and its own invariants."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import fedgame.learning.batched as batched_mod
from fedgame.errors import DivergenceError
from fedgame.learning.batched import (
    BatchedLearner,
    Batches,
    clip_scale,
    cross_entropy,
    gather_rows,
    resolve_device,
)
from fedgame.learning.evaluate import accuracy_and_loss
from fedgame.learning.models import CNN, MLP, LeNet5, LogReg, init_parameters
from fedgame.learning.reference import sequential_train
from fedgame.learning.settings import TrainingSettings

MODELS = {
    "logreg": LogReg,
    "mlp": lambda: MLP(MLP.Config(hidden=[6])),
    "cnn": CNN,
    "lenet5": lambda: LeNet5(LeNet5.Config(activation="tanh")),
}


def _gen(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


def make(kind="logreg", shape=(1, 8, 8), sizes=(9, 3, 12, 7, 0, 5), seed=0, **training):
    """A learner over random data split into clients of the given sizes."""
    rng = np.random.default_rng(seed)
    n = sum(sizes)
    x = rng.standard_normal((n, *shape)).astype(np.float32)
    y = rng.integers(0, 4, n)
    cuts = np.cumsum(sizes)[:-1]
    parts = np.split(rng.permutation(n), cuts)
    module = MODELS[kind]().build(input_shape=shape, num_classes=4)
    params = init_parameters(module, generator=_gen(seed))
    s = TrainingSettings(device="cpu", **{"local_steps": 2, "batch_size": 4, **training})
    learner = BatchedLearner(
        module, params=params, x_train=x, y_train=y, x_test=x, y_test=y,
        client_indices=parts, settings=s,
    )  # fmt: skip
    return learner, params, x, y, parts


def reference(learner, params, x, y, parts, ids, batches, round_index=0, step_noise=None):
    return sequential_train(
        learner.module, params=params, x_train=torch.from_numpy(x), y_train=torch.from_numpy(y),
        client_indices=parts, client_ids=ids, batches=batches, settings=learner.settings,
        round_index=round_index, step_noise=step_noise,
    )  # fmt: skip


CLIPS = [{}, {"per_sample_clip": 0.3}, {"per_sample_clip": 0.3, "clip_norm": "l1"}]


@pytest.mark.parametrize("kind", ["logreg", "mlp", "cnn"])
@pytest.mark.parametrize("shape", [(1, 28, 28), (1, 8, 8)])
@pytest.mark.parametrize("mode", ["local_sgd", "fedsgd"])
@pytest.mark.parametrize("clip", CLIPS, ids=["noclip", "l2", "l1"])
def test_batched_matches_sequential(kind, shape, mode, clip) -> None:
    learner, params, x, y, parts = make(
        kind, shape, sizes=(5, 3, 2, 6), mode=mode, weight_decay=0.01, lr=0.2, **clip
    )
    ids = [3, 1, 0]
    batches = learner.sample_batches(ids, round_index=0, generator=_gen(1))
    got = learner.train(ids, round_index=0, generator=_gen(2), batches=batches)
    want = reference(learner, params, x, y, parts, ids, batches)
    assert got.updates.shape == (3, learner.num_params)
    assert got.updates.abs().max() > 1e-4  # something happened
    torch.testing.assert_close(got.updates, want.updates, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(got.train_loss, want.train_loss, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["local_sgd", "fedsgd"])
@pytest.mark.parametrize("clip", CLIPS, ids=["noclip", "l2", "l1"])
def test_batched_lenet5_matches_sequential(mode, clip) -> None:
    learner, params, x, y, parts = make(
        "lenet5", (1, 12, 12), sizes=(5, 3, 2, 6), mode=mode, weight_decay=0.01, lr=0.2, **clip
    )
    ids = [3, 1, 0]
    batches = learner.sample_batches(ids, round_index=0, generator=_gen(1))
    got = learner.train(ids, round_index=0, generator=_gen(2), batches=batches)
    want = reference(learner, params, x, y, parts, ids, batches)
    assert got.updates.abs().max() > 1e-4
    torch.testing.assert_close(got.updates, want.updates, rtol=1e-4, atol=1e-5)


def test_step_noise_matches_reference_draws() -> None:
    learner, params, x, y, parts = make("mlp", per_sample_clip=1.0)
    ids = [0, 2]
    batches = learner.sample_batches(ids, round_index=0, generator=_gen(1))
    std = torch.tensor([0.5, 0.05])
    gen = _gen(9)
    draws = [torch.randn(2, learner.num_params, generator=gen) for _ in range(2)]
    noise = torch.stack(draws, dim=1) * std[:, None, None]
    got = learner.train(ids, round_index=0, generator=_gen(9), batches=batches, step_noise_std=std)
    want = reference(learner, params, x, y, parts, ids, batches, step_noise=noise)
    torch.testing.assert_close(got.updates, want.updates, rtol=1e-4, atol=1e-5)


def test_step_noise_has_the_requested_std() -> None:
    learner, *_ = make("mlp", mode="fedsgd", lr=1.0, shape=(1, 28, 28))
    ids = [0, 2, 3]
    std = torch.tensor([0.0, 0.1, 1.0])
    batches = learner.sample_batches(ids, round_index=0, generator=_gen(0))
    clean = learner.train(ids, round_index=0, generator=_gen(0), batches=batches).updates
    noisy = learner.train(
        ids, round_index=0, generator=_gen(0), batches=batches, step_noise_std=std
    ).updates
    empirical = (noisy - clean).std(dim=1)  # lr = 1, one step: the difference is -noise
    assert empirical[0] == 0
    torch.testing.assert_close(empirical[1:], std[1:], rtol=0.05, atol=0.0)


def test_clip_scale_worked_values() -> None:
    scale = clip_scale(torch.tensor([0.0, 0.5, 2.0, 4.0]), bound=1.0)
    assert scale.tolist() == [1.0, 1.0, 0.5, 0.25]


@given(norms=st.lists(st.floats(0.0, 1e6), min_size=1, max_size=20), bound=st.floats(1e-3, 1e3))
@settings(max_examples=50, deadline=None)
def test_clipped_norms_never_exceed_the_bound(norms, bound) -> None:
    t = torch.tensor(norms, dtype=torch.float64)
    assert bool((t * clip_scale(t, bound=bound) <= bound * (1 + 1e-12)).all())


@pytest.mark.parametrize("norm,ord_", [("l2", 2), ("l1", 1)])
def test_clipped_per_sample_gradient_has_norm_at_most_c(norm, ord_) -> None:
    clip, lr = 0.01, 0.5  # raw per-sample gradients are far larger than 0.01
    learner, *_ = make(
        "mlp", lr=lr, per_sample_clip=clip, clip_norm=norm, local_steps=1, batch_size=1
    )
    res = learner.train([0, 2, 3], round_index=0, generator=_gen(0))
    sizes = torch.linalg.vector_norm(res.updates, ord=ord_, dim=1)  # = lr * |clipped grad|
    torch.testing.assert_close(sizes, torch.full((3,), lr * clip), rtol=1e-5, atol=0.0)
    batch, *_ = make("mlp", mode="fedsgd", lr=lr, per_sample_clip=clip, clip_norm=norm)
    mean = batch.train([0, 2, 3], round_index=0, generator=_gen(0)).updates
    assert bool((torch.linalg.vector_norm(mean, ord=ord_, dim=1) <= lr * clip * 1.00001).all())


def test_lr_schedule_scales_a_fedsgd_step() -> None:
    learner, *_ = make(mode="fedsgd", lr=0.1, lr_decay_tau=2.0)
    r0 = learner.train([0, 1], round_index=0, generator=_gen(0)).updates
    r4 = learner.train([0, 1], round_index=4, generator=_gen(0)).updates
    assert learner.settings.lr_at(4) == pytest.approx(0.1 / 3)
    torch.testing.assert_close(r4, r0 / 3)


def test_chunked_steps_equal_unchunked(monkeypatch) -> None:
    learner, *_ = make("mlp", mode="fedsgd", per_sample_clip=0.5)
    ids = [0, 2, 3]
    whole = learner.train(ids, round_index=0, generator=_gen(0))
    monkeypatch.setattr(batched_mod, "_CHUNK_ELEMENTS", 7 * learner.num_params)
    chunked = learner.train(ids, round_index=0, generator=_gen(0))
    torch.testing.assert_close(chunked.updates, whole.updates)
    torch.testing.assert_close(chunked.train_loss, whole.train_loss)


def test_client_without_data_gets_a_zero_update() -> None:
    learner, *_ = make()
    res = learner.train([4, 0], round_index=0, generator=_gen(0))
    assert bool((res.updates[0] == 0).all()) and res.train_loss[0] == 0
    assert res.updates[1].abs().max() > 0


def test_no_clients_gives_empty_result() -> None:
    learner, *_ = make()
    res = learner.train([], round_index=0, generator=_gen(0))
    assert res.updates.shape == (0, learner.num_params) and res.train_loss.shape == (0,)


@given(sizes=st.lists(st.integers(0, 15), min_size=1, max_size=6), seed=st.integers(0, 99))
@settings(max_examples=25, deadline=None)
def test_local_sgd_batches_cycle_through_a_permutation(sizes, seed) -> None:
    learner, _, _, _, parts = make(sizes=(*sizes, 1), local_steps=3, batch_size=4)
    ids = list(range(len(sizes)))
    b = learner.sample_batches(ids, round_index=0, generator=_gen(seed))
    assert b.indices.shape == (len(ids), 3, 4) and b.indices.dtype == torch.int64
    for k, cid in enumerate(ids):
        n = len(parts[cid])
        flat = b.indices[k].reshape(-1).tolist()
        assert bool(b.mask[k].all()) == (n > 0)
        if n == 0:
            continue
        if n <= 12:  # the first n positions are a permutation of all its samples
            assert sorted(flat[:n]) == sorted(parts[cid].tolist())
        else:  # no sample repeats before the permutation is exhausted
            assert len(set(flat)) == 12
        assert set(flat) <= set(parts[cid].tolist())
        assert flat == [flat[i % n] for i in range(12)]  # cyclic: repeats once exhausted


def test_fedsgd_batches_cover_each_client_once() -> None:
    learner, _, _, _, parts = make(mode="fedsgd")
    b = learner.sample_batches([2, 4, 1], round_index=0, generator=_gen(0))
    assert b.indices.shape[1] == 1
    for k, cid in enumerate([2, 4, 1]):
        got = b.indices[k, 0][b.mask[k, 0]].tolist()
        assert sorted(got) == sorted(parts[cid].tolist())


def test_batches_differ_between_generators() -> None:
    learner, *_ = make()
    a = learner.sample_batches([0, 2], round_index=0, generator=_gen(0)).indices
    b = learner.sample_batches([0, 2], round_index=0, generator=_gen(1)).indices
    assert not torch.equal(a, b)


def test_weights_are_a_masked_mean() -> None:
    mask = torch.tensor([[[True, True, False, False]], [[False] * 4]])
    w = Batches(torch.zeros(2, 1, 4, dtype=torch.int64), mask).weights(torch.float32)
    assert w.tolist() == [[[0.5, 0.5, 0.0, 0.0]], [[0.0] * 4]]


def test_apply_update_and_divergence() -> None:
    learner, *_ = make(server_lr=0.5)
    before = learner.global_params
    learner.apply_update(torch.ones(learner.num_params))
    torch.testing.assert_close(learner.global_params, before + 0.5)
    bad = torch.zeros(learner.num_params)
    bad[3] = float("nan")
    with pytest.raises(DivergenceError):
        learner.apply_update(bad)
    torch.testing.assert_close(learner.global_params, before + 0.5)  # unchanged on error


def test_server_momentum_is_fedavgm() -> None:
    """``v <- beta v + delta``, ``theta <- theta + server_lr v``: two updates of 1 then 2 with
    beta 0.5 and server_lr 0.5 move theta by 0.5 * 1, then 0.5 * (0.5 + 2)."""
    learner, *_ = make(server_lr=0.5, server_momentum=0.5)
    before = learner.global_params
    learner.apply_update(torch.ones(learner.num_params))
    torch.testing.assert_close(learner.global_params, before + 0.5)
    learner.apply_update(2 * torch.ones(learner.num_params))
    torch.testing.assert_close(learner.global_params, before + 0.5 + 1.25)
    bad = torch.full((learner.num_params,), float("nan"))
    with pytest.raises(DivergenceError):
        learner.apply_update(bad)
    learner.apply_update(torch.zeros(learner.num_params))  # the failed update left v alone
    torch.testing.assert_close(learner.global_params, before + 0.5 + 1.25 + 0.625)


def test_server_momentum_must_be_below_one() -> None:
    from pydantic import ValidationError

    for bad in (-0.1, 1.0):
        with pytest.raises(ValidationError, match="server_momentum"):
            TrainingSettings(server_momentum=bad)


def test_global_params_is_a_copy_and_settable() -> None:
    learner, *_ = make()
    g = learner.global_params
    g += 1.0
    assert not torch.equal(g, learner.global_params)
    learner.set_global_params(g)
    assert torch.equal(g, learner.global_params)
    with pytest.raises(ValueError):
        learner.set_global_params(torch.zeros(3))


def test_evaluate_accuracy_rises_on_separable_data() -> None:
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    x = (rng.standard_normal((400, 2)) + 3.0 * (2 * y[:, None] - 1)).astype(np.float32)
    module = LogReg().build(input_shape=(2,), num_classes=2)
    params = init_parameters(module, generator=_gen(0))
    s = TrainingSettings(device="cpu", local_steps=3, batch_size=8, lr=0.1, eval_batch_size=64)
    parts = np.array_split(np.arange(300), 10)
    learner = BatchedLearner(
        module, params=params, x_train=x[:300], y_train=y[:300], x_test=x[300:], y_test=y[300:],
        client_indices=parts, settings=s,
    )  # fmt: skip
    learner.set_global_params(torch.zeros(learner.num_params))
    acc0, loss0 = learner.evaluate()
    assert loss0 == pytest.approx(np.log(2), rel=1e-5)
    gen = _gen(0)
    for t in range(5):
        res = learner.train(list(range(10)), round_index=t, generator=gen)
        learner.apply_update(res.updates.mean(dim=0))
    acc, loss = learner.evaluate()
    assert acc > 0.95 and acc > acc0 and loss < 0.5 * loss0


def test_resolve_device() -> None:
    want = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == want
    assert resolve_device("cpu") == torch.device("cpu")


def test_cross_entropy_matches_torch_and_worked_value() -> None:
    assert cross_entropy(torch.zeros(2, 5), torch.tensor([0, 3])).tolist() == pytest.approx(
        [np.log(5)] * 2
    )
    logits, y = torch.randn(3, 6, 4), torch.randint(0, 4, (3, 6))
    want = F.cross_entropy(logits.reshape(-1, 4), y.reshape(-1), reduction="none")
    torch.testing.assert_close(cross_entropy(logits, y), want.reshape(3, 6))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("scale", [1.0, 50.0, 1e4])
def test_evaluation_matches_torch_for_large_logits(dtype, scale) -> None:
    """DP noise grows the weights: evaluation's floored logsumexp still equals torch's loss."""
    gen = torch.Generator().manual_seed(int(scale))
    module = LogReg().build(input_shape=(6,), num_classes=10).to(dtype)
    params = {
        k: torch.randn(v.shape, generator=gen, dtype=dtype) * scale
        for k, v in module.named_parameters()
    }
    x = torch.randn(300, 6, generator=gen, dtype=dtype)
    y = torch.randint(0, 10, (300,), generator=gen)
    acc, loss = accuracy_and_loss(module, params, x, y, batch_size=128)
    logits = torch.func.functional_call(module, params, (x,))
    want = F.cross_entropy(logits.double(), y).item()
    assert loss == pytest.approx(want, rel=10 * torch.finfo(dtype).eps)
    assert acc == pytest.approx((logits.argmax(-1) == y).double().mean().item())


def test_reference_rejects_foreign_samples() -> None:
    learner, params, x, y, parts = make()
    batches = learner.sample_batches([0], round_index=0, generator=_gen(0))
    with pytest.raises(ValueError, match="does not hold"):
        reference(learner, params, x, y, parts, [1], batches)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_matches_cpu() -> None:
    cpu, params, x, y, parts = make("cnn", per_sample_clip=0.5)
    gpu = BatchedLearner(
        cpu.module, params=params, x_train=x, y_train=y, x_test=x, y_test=y,
        client_indices=parts, settings=cpu.settings, device="cuda",
    )  # fmt: skip
    batches = cpu.sample_batches([0, 2], round_index=0, generator=_gen(0))
    std = torch.tensor([0.0, 0.0])
    want = cpu.train([0, 2], round_index=0, generator=_gen(0), batches=batches)
    gen = torch.Generator(device="cuda")
    got = gpu.train([0, 2], round_index=0, generator=gen, batches=batches, step_noise_std=std)
    assert got.updates.device.type == "cuda"
    torch.testing.assert_close(got.updates.cpu(), want.updates, rtol=1e-4, atol=1e-5)
    assert gpu.sample_batches([0, 2], round_index=0, generator=gen).indices.device.type == "cuda"
    assert gpu.evaluate()[0] == pytest.approx(cpu.evaluate()[0])


@given(
    rows=st.integers(1, 30),
    index_shape=st.lists(st.integers(0, 5), min_size=1, max_size=3),
    feature_shape=st.lists(st.integers(1, 4), max_size=3),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None)
def test_gather_rows_is_advanced_indexing(rows, index_shape, feature_shape, seed):
    """``gather_rows(t, i)`` is ``t[i]``: values, dtype and shape, for float images and int
    labels, any index shape (empty included) and non-contiguous index slices."""
    g = torch.Generator().manual_seed(seed)
    images = torch.randn((rows, *feature_shape), generator=g)
    labels = torch.randint(0, 10, (rows,), generator=g)
    index = torch.randint(0, rows, (*index_shape, 2), generator=g)[..., 0]  # a strided view
    for table in (images, labels):
        got, want = gather_rows(table, index), table[index]
        assert got.dtype == want.dtype and got.shape == want.shape
        assert torch.equal(got, want)


def test_sgd_step_updates_in_place_only_tensors_it_owns() -> None:
    """The step is ``param - lr * grad`` bit for bit in every layout. It writes in place
    into a parameter that owns its memory, and scales in place a gradient that owns its
    memory (contiguous or transposed, as a linear layer's weight gradient comes) and no
    other parameter reads; never a view of a larger tensor, an expanded or overlapping one."""
    g = torch.Generator().manual_seed(3)
    param = torch.randn(4, 6, 5, generator=g)
    lr = 0.05
    transposed = torch.randn(4, 5, 6, generator=g).transpose(1, 2)  # owns its memory
    base = torch.randn(4, 6, 10, generator=g)
    layouts = {
        "contiguous": (transposed.contiguous(), True),
        "transposed": (transposed, True),
        "slice of a larger tensor": (base[:, :, :5], False),
        "expanded": (torch.randn(1, 6, 5, generator=g).expand(4, 6, 5), False),
        "overlapping, the size of its storage": (
            torch.randn(4 * 6 * 5, generator=g).as_strided((4, 6, 5), (30, 1, 5)),
            False,
        ),
    }
    for name, (grad, owned) in layouts.items():
        assert batched_mod._owns_dense(grad) is owned, name
        want = param - lr * grad
        grad_before, base_before = grad.clone(), base.clone()
        mine = param.clone()
        mine_grad = grad.clone(memory_format=torch.preserve_format) if owned else grad
        got = batched_mod._sgd_step(mine, mine_grad, lr)
        assert torch.equal(got, want), name
        assert got.data_ptr() == mine.data_ptr(), name  # the parameter is the step's own
        assert torch.equal(base, base_before), name
        if owned:
            assert torch.equal(mine_grad, lr * grad), name  # scaled in place
        else:
            assert torch.equal(grad, grad_before), name  # never written
    # a gradient another parameter still reads is not scaled in place
    shared = transposed.clone(memory_format=torch.preserve_format)
    got = batched_mod._sgd_step(param.clone(), shared, lr, grad_shared=True)
    assert torch.equal(got, param - lr * transposed) and torch.equal(shared, transposed)
    # a parameter that is a view of a larger tensor is not written either
    before = base.clone()
    view = base[:, :, :5]
    got = batched_mod._sgd_step(view, transposed.clone(), lr)
    assert torch.equal(got, before[:, :, :5] - lr * transposed)
    assert got.data_ptr() != view.data_ptr() and torch.equal(base, before)


class TwinLinear(torch.nn.Module):
    """A linear layer whose weight is the sum of two parameters: autograd hands both the
    same gradient tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.empty(4, 64, device="meta"))
        self.delta = torch.nn.Parameter(torch.empty(4, 64, device="meta"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x.flatten(1), self.weight + self.delta)


def test_parameters_sharing_one_gradient_tensor_step_like_the_reference() -> None:
    """Two parameters with one gradient tensor (a sum in the forward pass) each step by
    lr times it: the in-place step never scales a gradient another parameter still reads."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((20, 1, 8, 8)).astype(np.float32)
    y = rng.integers(0, 4, 20)
    parts = [np.arange(10), np.arange(10, 20)]
    module = TwinLinear()
    params = init_parameters(module, generator=torch.Generator().manual_seed(0))
    s = TrainingSettings(device="cpu", local_steps=2, batch_size=4, lr=0.5)
    learner = BatchedLearner(
        module, params=params, x_train=x, y_train=y, x_test=x, y_test=y,
        client_indices=parts, settings=s,
    )  # fmt: skip
    batches = learner.sample_batches(
        [0, 1], round_index=0, generator=torch.Generator().manual_seed(1)
    )
    got = learner.train(
        [0, 1], round_index=0, generator=torch.Generator().manual_seed(2), batches=batches
    )
    want = sequential_train(
        module, params=params, x_train=torch.from_numpy(x), y_train=torch.from_numpy(y),
        client_indices=parts, client_ids=[0, 1], batches=batches, settings=s, round_index=0,
    )  # fmt: skip
    torch.testing.assert_close(got.updates, want.updates, rtol=1e-5, atol=1e-6)
