"""Evaluation in passes of ``FORWARD_ROWS`` samples: the same results, and when it is used."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

import fedgame.learning.batched as batched_mod
from fedgame.learning.batched import BatchedLearner
from fedgame.learning.evaluate import (
    FORWARD_ROWS,
    accuracy_and_loss,
    forward_rows,
    hidden_activations,
)
from fedgame.learning.models import CNN, MLP, LeNet5, LogReg, init_parameters
from fedgame.learning.settings import TrainingSettings

SHAPE = (1, 28, 28)
MODELS = {"logreg": LogReg(), "mlp": MLP(), "cnn": CNN(), "lenet5": LeNet5()}


def _model(kind: str, seed: int = 1) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    module = MODELS[kind].build(input_shape=SHAPE, num_classes=10)
    return module, init_parameters(module, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize(
    ("kind", "n", "rows"),
    [
        *[(kind, 2 * FORWARD_ROWS + 1, rows) for kind in ("logreg", "mlp")
          for rows in (8, 100, FORWARD_ROWS)],
        *[(kind, 201, rows) for kind in ("cnn", "lenet5") for rows in (8, 100)],
        *[(kind, 2 * FORWARD_ROWS + 1, FORWARD_ROWS) for kind in ("cnn", "lenet5")],
    ],
)  # fmt: skip
def test_passes_of_fewer_rows_give_the_same_bits_as_one_pass(kind, n, rows) -> None:
    """Each row's logits do not depend on the other rows of its pass, for every built-in
    model, so accuracy and loss are the same bits; with chunk sizes that are no multiple of
    the rows, one sample more than a multiple of them (where equal passes of ``rows`` would
    leave a pass of one row, which rounds differently) and a chunk of one row."""
    module, params = _model(kind)
    gen = torch.Generator().manual_seed(2)
    x = 3 * torch.randn((n, *SHAPE), generator=gen)
    y = torch.randint(0, 10, (n,), generator=gen)
    for batch_size in (n, 1000, n - 1):
        whole = accuracy_and_loss(module, params, x, y, batch_size=batch_size)
        passes = accuracy_and_loss(module, params, x, y, batch_size=batch_size, rows=rows)
        assert passes == whole  # exact: the same floats


def test_rows_below_one_are_refused() -> None:
    module, params = _model("logreg")
    x, y = torch.zeros((3, *SHAPE)), torch.zeros(3, dtype=torch.int64)
    with pytest.raises(ValueError, match="rows must be at least 1"):
        accuracy_and_loss(module, params, x, y, batch_size=3, rows=0)


def test_passes_are_nearly_equal_and_cover_every_row_once() -> None:
    module, params = _model("logreg")
    x = torch.arange(2 * 5 + 1, dtype=torch.float32)[:, None, None, None].expand(-1, *SHAPE)
    seen: list[int] = []
    hook = module[1].register_forward_hook(lambda m, i, o: seen.append(int(o.shape[0])))
    try:
        from fedgame.learning.evaluate import _logits

        out = _logits(module, params, x, 5)
    finally:
        hook.remove()
    assert seen == [3, 4, 4]  # 11 rows in ceil(11 / 5) = 3 passes, none of one row
    assert torch.equal(out, torch.func.functional_call(module, params, (x,)))


class _Pair(nn.Module):
    """A leaf whose output is a tuple: the input and its double."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, 2 * x


class _Pairs(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pair, self.head = _Pair(), nn.Linear(784, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a, b = self.pair(x)
        return self.head(a + b)


def test_hidden_activations_are_what_lies_between_input_and_logits() -> None:
    sample = torch.zeros((1, *SHAPE))
    assert hidden_activations(*_model("logreg"), sample) == 0  # flatten and logits only
    assert hidden_activations(*_model("mlp"), sample) == 64 + 64  # the hidden layer, its ReLU
    assert hidden_activations(*_model("cnn"), sample) > 10_000  # feature maps
    flat = torch.zeros(1, 784)
    bare = nn.Linear(784, 10)  # no flatten: input and logits only
    assert hidden_activations(bare, dict(bare.named_parameters()), flat) == 0
    mlp = nn.Sequential(nn.Linear(784, 64), nn.ReLU(), nn.Linear(64, 10))  # no flatten
    assert hidden_activations(mlp, dict(mlp.named_parameters()), flat) == 64 + 64
    pairs = _Pairs()  # a tuple output: its input is the input, its double a hidden value
    assert hidden_activations(pairs, dict(pairs.named_parameters()), flat) == 784


def test_only_a_one_thread_cpu_evaluation_of_a_model_with_hidden_layers_runs_in_passes() -> None:
    many, few = torch.zeros((FORWARD_ROWS + 1, *SHAPE)), torch.zeros((FORWARD_ROWS, *SHAPE))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert forward_rows(many, 128) == FORWARD_ROWS
        assert forward_rows(many, 0) is None  # a linear model: passes only cost it time
        assert forward_rows(few, 128) is None  # one pass is one pass
        assert forward_rows(many.to("meta"), 128) is None  # not the CPU
        torch.set_num_threads(2)
        assert forward_rows(many, 128) is None  # each pass would synchronise the threads
    finally:
        torch.set_num_threads(threads)


def test_the_learner_evaluates_in_passes_and_reports_what_one_pass_gives(monkeypatch) -> None:
    module, params = _model("mlp")
    gen = torch.Generator().manual_seed(3)
    n = FORWARD_ROWS + 500
    x = torch.randn((n, *SHAPE), generator=gen).numpy()
    y = torch.randint(0, 10, (n,), generator=gen).numpy()
    learner = BatchedLearner(
        module, params=params, x_train=x, y_train=y, x_test=x, y_test=y,
        client_indices=[np.arange(10)], settings=TrainingSettings(),
    )  # fmt: skip
    asked: list[int | None] = []

    def spy(*args, rows=None, **kwargs):
        asked.append(rows)
        return accuracy_and_loss(*args, rows=rows, **kwargs)

    monkeypatch.setattr(batched_mod, "accuracy_and_loss", spy)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        got = learner.evaluate()
        torch.set_num_threads(2)
        learner.evaluate()
    finally:
        torch.set_num_threads(threads)
    assert learner._hidden == 128
    assert asked == [FORWARD_ROWS, None]  # the threads are read at each evaluation
    flat = learner.layout.unflatten(learner.global_params)
    want = accuracy_and_loss(
        module, flat, learner.x_test, learner.y_test, batch_size=TrainingSettings().eval_batch_size
    )
    assert got == want
