"""The batched coalition evaluator against the learner's own evaluation of each model."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from fedgame.learning.coalitions import CoalitionEvaluator
from fedgame.model import FedGameModel
from fedgame.scenario.load import validate


@pytest.fixture
def learner(tiny):
    data = copy.deepcopy(tiny)
    data["training"]["server_lr"] = 0.7
    return FedGameModel(validate(data)).learner


def independent_value(learner, theta: torch.Tensor) -> tuple[float, float]:
    """(accuracy, loss) of θ by the learner's own path (set the global model, evaluate)."""
    saved = learner.global_params
    learner.set_global_params(theta)
    try:
        return learner.evaluate()
    finally:
        learner.set_global_params(saved)


def test_each_coalition_is_the_global_model_plus_its_weighted_mean(learner):
    gen = torch.Generator().manual_seed(0)
    k, p = 4, learner.num_params
    updates = torch.randn(k, p, generator=gen, dtype=learner.dtype) * 0.5
    weights = np.array([1.0, 2.0, 3.0, 4.0])
    masks = np.array([[0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0], [1, 1, 1, 1]], dtype=bool)
    acc = CoalitionEvaluator(learner, updates, weights)(masks)
    loss = CoalitionEvaluator(learner, updates, weights, metric="loss")(masks)
    base = learner.global_params
    for row, a, neg in zip(masks, acc, loss, strict=True):
        w = weights * row
        mean = (torch.as_tensor(w, dtype=learner.dtype) @ updates) / w.sum() if w.any() else 0.0
        want_acc, want_loss = independent_value(learner, base + 0.7 * mean)
        assert a == pytest.approx(want_acc, abs=1e-12)
        assert -neg == pytest.approx(want_loss, rel=1e-5)


def test_chunks_and_subsets_do_not_change_the_values(learner):
    gen = torch.Generator().manual_seed(1)
    updates = torch.randn(5, learner.num_params, generator=gen, dtype=learner.dtype)
    masks = np.random.default_rng(2).random((37, 5)) < 0.5
    whole = CoalitionEvaluator(learner, updates, chunk=128)
    one = CoalitionEvaluator(learner, updates, chunk=1)
    np.testing.assert_allclose(whole(masks), one(masks), atol=1e-12)
    assert whole.evaluations == 37
    few = whole.using(samples=50, metric="loss")
    x, y = learner.x_test, learner.y_test
    learner.x_test, learner.y_test = x[:50], y[:50]
    try:
        np.testing.assert_allclose(
            few(masks), CoalitionEvaluator(learner, updates, metric="loss")(masks), atol=1e-9
        )
    finally:
        learner.x_test, learner.y_test = x, y


def test_bad_weights_are_refused(learner):
    with pytest.raises(ValueError, match="weights"):
        CoalitionEvaluator(learner, torch.zeros(2, learner.num_params), np.array([1.0, -1.0]))
