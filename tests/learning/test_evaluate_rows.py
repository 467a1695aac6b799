"""Evaluation in passes of ``FORWARD_ROWS`` samples: the same results, and when it is used."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

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


@pytest.mark.parametrize("kind", list(MODELS))
@pytest.mark.parametrize("rows", [8, 100, FORWARD_ROWS])
def test_passes_of_fewer_rows_give_the_same_bits_as_one_pass(kind, rows) -> None:
    """Each row's logits do not depend on the other rows of its pass, for every built-in
    model, so accuracy and loss are the same bits; with chunk sizes that are no multiple of
    the rows, one sample more than a multiple of them (where equal passes of ``rows`` would
    leave a pass of one row, which rounds differently) and a chunk of one row."""
    module, params = _model(kind)
    gen = torch.Generator().manual_seed(2)
    n = 2 * FORWARD_ROWS + 1 if kind in ("logreg", "mlp") else 2 * 100 + 1
    x = 3 * torch.randn((n, *SHAPE), generator=gen)
    y = torch.randint(0, 10, (n,), generator=gen)
    for batch_size in (n, 1000, n - 1):
        whole = accuracy_and_loss(module, params, x, y, batch_size=batch_size)
        passes = accuracy_and_loss(module, params, x, y, batch_size=batch_size, rows=rows)
        assert passes == whole  # exact: the same floats


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


def test_hidden_activations_are_what_lies_between_input_and_logits() -> None:
    sample = torch.zeros((1, *SHAPE))
    assert hidden_activations(*_model("logreg"), sample) == 0  # flatten and logits only
    assert hidden_activations(*_model("mlp"), sample) == 64 + 64  # the hidden layer, its ReLU
    assert hidden_activations(*_model("cnn"), sample) > 10_000  # feature maps
    bare = nn.Linear(784, 10)  # no flatten: input and logits only
    params = dict(bare.named_parameters())
    assert hidden_activations(bare, params, torch.zeros(1, 784)) == 0


def test_only_a_cpu_evaluation_of_a_model_with_hidden_layers_runs_in_passes() -> None:
    many, few = torch.zeros((FORWARD_ROWS + 1, *SHAPE)), torch.zeros((FORWARD_ROWS, *SHAPE))
    assert forward_rows(*_model("mlp"), many) == FORWARD_ROWS
    assert forward_rows(*_model("cnn"), many) == FORWARD_ROWS
    assert forward_rows(*_model("logreg"), many) is None  # passes only cost it time
    assert forward_rows(*_model("mlp"), few) is None  # one pass is one pass
    assert forward_rows(*_model("mlp"), many.to("meta")) is None  # not the CPU


def test_the_learner_evaluates_in_passes_and_reports_what_one_pass_gives() -> None:
    module, params = _model("mlp")
    gen = torch.Generator().manual_seed(3)
    n = FORWARD_ROWS + 500
    x = torch.randn((n, *SHAPE), generator=gen).numpy()
    y = torch.randint(0, 10, (n,), generator=gen).numpy()
    learner = BatchedLearner(
        module, params=params, x_train=x, y_train=y, x_test=x, y_test=y,
        client_indices=[np.arange(10)], settings=TrainingSettings(),
    )  # fmt: skip
    got = learner.evaluate()
    assert learner._eval_rows == FORWARD_ROWS
    flat = learner.layout.unflatten(learner.global_params)
    want = accuracy_and_loss(
        module, flat, learner.x_test, learner.y_test, batch_size=TrainingSettings().eval_batch_size
    )
    assert got == want
