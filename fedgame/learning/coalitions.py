"""The value of coalitions of a round's updates, evaluated as one batched computation.

For a round with K delivered (noised) updates u_1..u_K [K, P] and aggregation weights w_k,
the coalition S's model is θ_S = θ + η·Σ_(k∈S) w_k u_k / Σ_(k∈S) w_k (θ the global model
before the round, η the server learning rate; θ_∅ = θ), and its value v(S) is the accuracy
of θ_S on ``samples`` held-out examples (or minus its mean cross-entropy). C coalitions,
given as a boolean mask [C, K], cost one matmul for their aggregates ([C, K] @ [K, P]) and
one ``torch.func.vmap`` of ``functional_call`` over the C parameter vectors, in chunks of
``chunk`` models. No Python loop over coalitions does tensor work.

Left out of θ_S (documented simplifications): server momentum, and central noise a
mechanism adds to the aggregate after it is formed.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
import torch
from torch import Tensor
from torch.func import functional_call, vmap

from fedgame.learning.evaluate import cross_entropy

if TYPE_CHECKING:
    from fedgame.learning.batched import BatchedLearner

Metric = Literal["accuracy", "loss"]


class CoalitionEvaluator:
    """``evaluator(masks)`` → v(S) of each coalition row of ``masks`` (module doc).

    Args:
        learner: the run's learner (global model, module, test data, server learning rate).
        updates: the delivered updates ``[K, P]``.
        weights: their aggregation weights ``[K]`` (≥ 0; uniform when None).
        metric: ``accuracy`` (v = accuracy) or ``loss`` (v = −mean cross-entropy).
        samples: the first ``samples`` test examples are the valuation set (all when None).
        chunk: models evaluated per ``vmap`` call (bounds memory: chunk × samples logits).

    ``evaluations`` counts the coalitions evaluated so far; ``seconds`` is not kept here
    (the caller times the estimate).
    """

    def __init__(
        self,
        learner: BatchedLearner,
        updates: Tensor,
        weights: np.ndarray | None = None,
        *,
        metric: Metric = "accuracy",
        samples: int | None = None,
        chunk: int = 128,
    ) -> None:
        self.module = learner.module
        self.layout = learner.layout
        self.base = learner.global_params
        self.server_lr = float(learner.settings.server_lr)
        self.updates = updates.to(self.base.device, self.base.dtype)
        k = int(self.updates.shape[0])
        w = np.ones(k) if weights is None else np.asarray(weights, dtype=float)
        if w.shape != (k,) or np.any(w < 0) or not np.all(np.isfinite(w)):
            raise ValueError(f"expected {k} finite weights >= 0, got {w.tolist()}")
        self.weights = torch.as_tensor(w, dtype=self.base.dtype, device=self.base.device)
        n = None if samples is None else int(samples)
        self._x_all, self._y_all = learner.x_test, learner.y_test
        self.x = learner.x_test[:n]
        self.y = learner.y_test[:n]
        self.metric: Metric = metric
        self.chunk = max(1, int(chunk))
        self.evaluations = 0
        self._forward = vmap(self._logits)

    def using(
        self, *, metric: Metric | None = None, samples: int | None = None, chunk: int | None = None
    ) -> CoalitionEvaluator:
        """This evaluator with another metric, valuation-set size or chunk (a new object)."""
        new = copy.copy(self)
        if metric is not None:
            new.metric = metric
        if samples is not None:
            new.x, new.y = self._x_all[:samples], self._y_all[:samples]
        if chunk is not None:
            new.chunk = max(1, int(chunk))
        new.evaluations = 0
        new._forward = vmap(new._logits)
        return new

    @property
    def players(self) -> int:
        """K, the number of delivered updates."""
        return int(self.updates.shape[0])

    def _logits(self, flat: Tensor) -> Tensor:
        return functional_call(self.module, self.layout.unflatten(flat), (self.x,))

    @torch.inference_mode()
    def models(self, masks: np.ndarray) -> Tensor:
        """θ_S of each coalition row, ``[C, P]`` (one matmul)."""
        m = torch.as_tensor(np.asarray(masks, dtype=bool), device=self.base.device)
        w = m.to(self.base.dtype) * self.weights[None, :]
        total = w.sum(dim=1, keepdim=True)
        share = torch.where(total > 0, w / torch.where(total > 0, total, 1.0), 0.0)
        return self.base[None, :] + self.server_lr * (share @ self.updates)

    @torch.inference_mode()
    def __call__(self, masks: np.ndarray) -> np.ndarray:
        """v(S) for each row of the boolean ``masks`` ``[C, K]``, as a float64 array ``[C]``."""
        masks = np.asarray(masks, dtype=bool).reshape(-1, self.players)
        c = masks.shape[0]
        out = torch.empty(c, dtype=torch.float64, device=self.base.device)
        for lo in range(0, c, self.chunk):  # chunks of models, not coalitions one by one
            theta = self.models(masks[lo : lo + self.chunk])
            logits = self._forward(theta)  # [c, n, classes]
            if self.metric == "accuracy":
                hit = logits.argmax(dim=-1) == self.y[None, :]
                out[lo : lo + theta.shape[0]] = hit.double().mean(dim=1)
            else:
                ce = cross_entropy(logits, self.y[None, :].expand(theta.shape[0], -1))
                out[lo : lo + theta.shape[0]] = -ce.double().mean(dim=1)
        self.evaluations += c
        return out.cpu().numpy()


def aggregation_weights(aggregation: Any, clients: Sequence[Any]) -> np.ndarray | None:
    """The aggregator's weights w_k when it declares them (``WeightedSumAggregator``), else
    None (the evaluator then weighs the updates equally)."""
    from fedgame.mechanisms.base import WeightedSumAggregator

    if isinstance(aggregation, WeightedSumAggregator):
        return np.asarray(aggregation.weights(clients), dtype=float)
    return None
