"""Plain per-client reference trainer: a Python loop over clients with ordinary autograd.

It reproduces :class:`fedgame.learning.batched.BatchedLearner` step for step from the same
batch indices, so tests can check the batched computation against it, and the speed
benchmark can time the naive approach. Not used by simulations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call

from fedgame.learning.batched import Batches, LocalResult
from fedgame.learning.settings import TrainingSettings


def sequential_train(
    module: nn.Module,
    *,
    params: dict[str, Tensor],
    x_train: Tensor,
    y_train: Tensor,
    client_indices: Sequence[np.ndarray],
    client_ids: Sequence[int],
    batches: Batches,
    settings: TrainingSettings,
    round_index: int,
    step_noise: Tensor | None = None,
) -> LocalResult:
    """Train each client in turn with ``loss.backward()`` on its own parameter copy.

    Args:
        module: stateless module skeleton.
        params: global parameters (named tensors).
        x_train: all training inputs.
        y_train: all training labels.
        client_indices: each client's sample indices (batches must come from them).
        client_ids: the K clients, in the order of ``batches``.
        batches: the sample indices and mask per client and step.
        settings: local-training settings.
        round_index: 0-based round, for the learning-rate schedule.
        step_noise: ``[K, steps, P]`` noise added to each step's gradient (already scaled).

    Returns:
        Flat updates ``[K, P]`` (parameters concatenated in ``params`` order) and losses.
    """
    lr = settings.lr_at(round_index)
    y_train = torch.as_tensor(y_train).long()
    updates, losses = [], []
    for k, cid in enumerate(client_ids):
        allowed = set(np.asarray(client_indices[cid]).tolist())
        local = {n: p.detach().clone().requires_grad_(True) for n, p in params.items()}
        total = 0.0
        steps = batches.indices.shape[1]
        for s in range(steps):
            idx = batches.indices[k, s][batches.mask[k, s]]
            if not set(idx.tolist()) <= allowed:
                raise ValueError(f"batch of client {cid} uses samples it does not hold")
            grads, loss = _step(module, local, x_train[idx], y_train[idx], settings)
            total += loss
            with torch.no_grad():
                offset = 0
                for n, p in local.items():
                    g = grads[n]
                    if step_noise is not None:
                        g = g + step_noise[k, s, offset : offset + p.numel()].view_as(p)
                    p -= lr * (g + settings.weight_decay * p)
                    offset += p.numel()
        flat = torch.cat([(local[n] - params[n]).detach().reshape(-1) for n in params])
        updates.append(flat)
        losses.append(total / steps)
    dtype = next(iter(params.values())).dtype
    p_total = sum(p.numel() for p in params.values())
    out = torch.stack(updates) if updates else torch.zeros(0, p_total, dtype=dtype)
    return LocalResult(out, torch.tensor(losses, dtype=dtype))


def _step(
    module: nn.Module,
    local: dict[str, Tensor],
    x: Tensor,
    y: Tensor,
    settings: TrainingSettings,
) -> tuple[dict[str, Tensor], float]:
    """Mean gradient of one step (per-sample clipped if configured) and the mean loss."""
    if x.shape[0] == 0:
        return {n: torch.zeros_like(p) for n, p in local.items()}, 0.0
    if settings.per_sample_clip is None:
        loss = F.cross_entropy(functional_call(module, local, (x,)), y)
        grads = torch.autograd.grad(loss, list(local.values()))
        return dict(zip(local, grads)), float(loss.detach())
    clip = settings.per_sample_clip
    acc = {n: torch.zeros_like(p) for n, p in local.items()}
    total = 0.0
    for i in range(x.shape[0]):
        loss = F.cross_entropy(functional_call(module, local, (x[i : i + 1],)), y[i : i + 1])
        grads = torch.autograd.grad(loss, list(local.values()))
        flat = torch.cat([g.reshape(-1) for g in grads])
        norm = flat.abs().sum() if settings.clip_norm == "l1" else flat.norm()
        factor = min(1.0, clip / max(float(norm), 1e-30))
        for n, g in zip(local, grads):
            acc[n] += factor * g
        total += float(loss.detach())
    n_samples = x.shape[0]
    return {n: a / n_samples for n, a in acc.items()}, total / n_samples
