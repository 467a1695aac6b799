"""Client-side loss and gradient queries that server-side planners simulate via the learner.

DPFL-BCS clients report two noisy losses per stage-1 round, Power-of-Choice clients report
their local loss, and the optimal-queries planner estimates smoothness constants on client
data (paper 002 §3.5). The simulator computes these on the batched learner's data: the model
passes the learner to ``prepare`` as ``ctx.learner``. Only the learner's public
API is used (``sample_batches``, ``train``, ``module``, ``layout``, ``x_train``, ``y_train``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from torch.func import functional_call, grad, vmap

from fedgame.learning.batched import cross_entropy


def learner_of(ctx: Any) -> Any | None:
    """The batched learner a ``SetupContext`` carries, or None (then planners fall back)."""
    return ctx.learner if ctx is not None else None


def _data(learner: Any, ids: Sequence[int], seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator(device=learner.device).manual_seed(seed)
    batches = learner.sample_batches(list(ids), round_index=0, generator=gen)
    k = len(ids)
    idx = batches.indices.reshape(k, -1).to(learner.device)
    w = batches.weights(learner.dtype).reshape(k, -1).to(learner.device)
    w = w / w.sum(dim=1, keepdim=True).clamp_min(1e-12)
    return learner.x_train[idx], learner.y_train[idx], w


def _loss_fn(learner: Any):
    def loss(flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor, w: torch.Tensor):
        logits = functional_call(learner.module, learner.layout.unflatten(flat), (x,))
        return (cross_entropy(logits, y) * w).sum()

    return loss


def client_losses(
    learner: Any, ids: Sequence[int], thetas: torch.Tensor | None = None, *, seed: int = 0
) -> np.ndarray:
    """Local loss F_n(theta_n) of each client in ``ids`` ([K]); default theta = global model.

    In ``fedsgd`` mode the learner's batches are the client's full data (the exact F_n);
    in ``local_sgd`` mode one round's worth of its minibatches (an unbiased estimate).
    """
    if not len(ids):
        return np.zeros(0)
    x, y, w = _data(learner, ids, seed)
    if thetas is None:
        thetas = learner.global_params.expand(len(ids), -1)
    with torch.no_grad():
        out = vmap(_loss_fn(learner))(thetas.to(learner.device, learner.dtype), x, y, w)
    return out.detach().cpu().numpy().astype(float)


def client_gradients(
    learner: Any, ids: Sequence[int], thetas: torch.Tensor, *, seed: int = 0
) -> torch.Tensor:
    """Full local gradients grad F_n(theta_n), ``[K, P]`` (for smoothness probes)."""
    x, y, w = _data(learner, ids, seed)
    return vmap(grad(_loss_fn(learner)))(thetas.to(learner.device, learner.dtype), x, y, w)


def sample_grad_sq(learner: Any, ids: Sequence[int], *, seed: int = 0) -> np.ndarray:
    """Mean over each client's samples of ||grad f(theta_global, zeta)||_2^2 ([K])."""
    x, y, w = _data(learner, ids, seed)
    flat = learner.global_params
    fn = _loss_fn(learner)

    def one(xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
        g = grad(fn)(flat, xs[None], ys[None], torch.ones(1, dtype=flat.dtype, device=flat.device))
        return (g * g).sum()

    per = vmap(vmap(one))(x, y)
    return (per * w).sum(dim=1).detach().cpu().numpy().astype(float)


def local_step_losses(
    learner: Any, ids: Sequence[int], *, round_index: int, clip: float, norm: str, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """(F_n(w^{t-1}), F_n(w_n^t)) with w_n^t the noise-free clipped local step (paper 000 §1.5)."""
    gen = torch.Generator(device=learner.device).manual_seed(seed)
    res = learner.train(
        list(ids), round_index=round_index, generator=gen, per_sample_clip=clip, clip_norm=norm
    )
    before = client_losses(learner, ids, seed=seed)
    after = client_losses(learner, ids, learner.global_params + res.updates, seed=seed)
    return before, after
