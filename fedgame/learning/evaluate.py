"""Evaluation helpers: test accuracy and loss of one parameter set, in memory-bounded chunks."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

#: floor of the shifted logits z - max(z) before ``exp`` in evaluation: e^-80 ≈ 1.8e-35 is a
#: normal float32, and a term that small cannot change a sum that is at least 1 (the max's own)
EXP_FLOOR = -80.0


#: rows per forward pass of a one-thread CPU evaluation of a model with hidden layers
#: (:func:`forward_rows`)
FORWARD_ROWS = 1024


def hidden_activations(module: nn.Module, params: Mapping[str, Tensor], sample: Tensor) -> int:
    """Values a model computes for one sample (``[1, ...]``) besides its input and its
    logits: the sizes of its leaf modules' outputs (tensors, or the tensors of a tuple), less
    those that are views of the input (a flatten) and the logits themselves. 0 for a linear
    model; the hidden layers' widths for an MLP; every feature map for a CNN."""
    outputs: list[Tensor] = []

    def keep(_module: nn.Module, _inputs: Any, output: Any) -> None:
        found = output if isinstance(output, tuple | list) else (output,)
        outputs.extend(t for t in found if isinstance(t, Tensor))

    leaves = [m for m in module.modules() if next(m.children(), None) is None]
    hooks = [leaf.register_forward_hook(keep) for leaf in leaves]
    try:
        with torch.inference_mode():
            logits = functional_call(module, dict(params), (sample,))
    finally:
        for hook in hooks:
            hook.remove()
    base = sample.untyped_storage().data_ptr()
    return sum(
        t.numel() for t in outputs if t is not logits and t.untyped_storage().data_ptr() != base
    )


def forward_rows(x: Tensor, hidden: int) -> int | None:
    """Rows per forward pass for :func:`accuracy_and_loss` on ``x`` for a model with
    ``hidden`` activations per sample (:func:`hidden_activations`): :data:`FORWARD_ROWS` on
    the CPU at one thread when ``hidden > 0`` and ``x`` has more rows, else None (one pass per
    chunk of the batch size).

    A pass's hidden activations then stay in the CPU's caches: evaluating on 10,000
    Fashion-MNIST-shaped images took 20 against 37 ms for the MLP 784-64-10, 1.6 against 2.5 s
    for the CNN and 0.75 against 1.6 s for LeNet-5 (one thread, 2-core AMD EPYC), while a
    linear model, with nothing in between, was slower in passes (14 against 11 ms). At two
    threads on a busy machine passes were slower (each pass is a round of the thread pool's
    synchronisation), so they are kept to one thread. Each row's logits are the same bits
    whatever the pass's row count, down to 4 rows here (passes are at least
    ``FORWARD_ROWS / 2``; tested for every built-in model), so the results do not change.
    """
    one_thread = torch.get_num_threads() == 1
    if hidden <= 0 or not one_thread or x.device.type != "cpu" or x.shape[0] <= FORWARD_ROWS:
        return None
    return FORWARD_ROWS


def cross_entropy(logits: Tensor, y: Tensor) -> Tensor:
    """Per-sample cross-entropy ``logsumexp(z) - z_y`` (no reduction).

    Same value as ``F.cross_entropy(..., reduction="none")``, but on CPU ``logsumexp`` is much
    faster than ``log_softmax`` for few classes and many small batches.
    """
    return torch.logsumexp(logits, dim=-1) - logits.gather(-1, y.unsqueeze(-1)).squeeze(-1)


def _shifted_lse(logits: Tensor, top: Tensor) -> Tensor:
    """``logsumexp`` of ``logits`` given their row max ``top`` (``[..., 1]``).

    ``m + log Σ exp(max(z - m, EXP_FLOOR))``: equal to ``logsumexp`` up to rounding (floored
    terms are below float64's resolution next to the max's 1). The floor keeps ``exp`` off the
    CPU's slow path for underflowing arguments, which otherwise makes evaluating a model whose
    weights DP noise has grown about twice as slow.
    """
    terms = (logits - top).clamp_min(EXP_FLOOR).exp()
    return top.squeeze(-1) + terms.sum(dim=-1).log()


@torch.inference_mode()
def accuracy_and_loss(
    module: nn.Module,
    params: Mapping[str, Tensor],
    x: Tensor,
    y: Tensor,
    *,
    batch_size: int,
    rows: int | None = None,
) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``module`` with ``params`` on ``(x, y)``.

    Args:
        module: stateless module skeleton.
        params: named parameters plugged in with ``functional_call``.
        x: inputs ``[n, ...]`` on the parameters' device.
        y: integer labels ``[n]``.
        batch_size: samples per chunk: the loss and the count of correct predictions are
            summed chunk by chunk.
        rows: samples per forward pass within a chunk (None: the whole chunk; passes of
            nearly equal size, at least ``rows / 2``), their logits written into one tensor
            per chunk (:func:`forward_rows`): the sums, and so the results, are those of one
            pass per chunk as long as each row's logits do not depend on the other rows of
            its pass.

    Returns:
        ``(accuracy, loss)``; both NaN when ``x`` is empty.
    """
    if rows is not None and rows < 1:
        raise ValueError(f"rows must be at least 1 (or None), got {rows}")
    n = int(x.shape[0])
    if n == 0:
        return float("nan"), float("nan")
    totals = torch.zeros(2, dtype=torch.float64, device=x.device)  # [loss sum, correct]
    params = dict(params)
    for lo in range(0, n, batch_size):
        logits = _logits(module, params, x[lo : lo + batch_size], rows)
        yb = y[lo : lo + batch_size]
        if logits._base is not None:  # a view of the input or a parameter: work on a copy
            logits = logits.clone()
        top, predicted = logits.max(dim=-1)
        picked = logits.gather(-1, yb.unsqueeze(-1)).squeeze(-1)
        # logsumexp as ``_shifted_lse``, in place on the logits (no [n, classes] temporaries)
        terms = logits.sub_(top.unsqueeze(-1)).clamp_min_(EXP_FLOOR).exp_().sum(dim=-1)
        loss = (top + terms.log() - picked).sum()
        totals += torch.stack([loss.double(), (predicted == yb).sum().double()])
    total_loss, correct = totals.tolist()  # one device sync per evaluation
    return correct / n, total_loss / n


def _logits(module: nn.Module, params: dict[str, Tensor], x: Tensor, rows: int | None) -> Tensor:
    """The logits of ``x`` in one tensor, computed in ``ceil(n / rows)`` passes of nearly
    equal size (each at least ``rows / 2`` samples: a pass of a few rows would take another
    path through the BLAS, a matrix-vector product for one row, and round differently)."""
    n = int(x.shape[0])
    if rows is None or rows >= n:
        return functional_call(module, params, (x,))
    bounds = [n * i // -(-n // rows) for i in range(-(-n // rows) + 1)]
    out: Tensor | None = None
    for lo, hi in itertools.pairwise(bounds):
        logits = functional_call(module, params, (x[lo:hi],))
        if out is None:
            out = logits.new_empty((n, *logits.shape[1:]))
        out[lo:hi] = logits
    assert out is not None  # n > rows >= 1: at least two passes
    return out


@torch.inference_mode()
def accuracy_and_loss_models(
    module: nn.Module,
    params: Mapping[str, Tensor],
    x: Tensor,
    y: Tensor,
    *,
    batch_size: int,
) -> list[tuple[float, float]]:
    """:func:`accuracy_and_loss` of G parameter sets at once (``params`` ``[G, *shape]``).

    One ``vmap`` of ``functional_call`` over the G models per chunk of ``batch_size // G``
    samples (logits ``[G, chunk, C]``); the loss is the same shifted log-sum-exp. Equal to G
    calls of :func:`accuracy_and_loss` up to float rounding of the batched products (the
    loss to about 1e-6 relative in float32; a prediction can flip only on a tie of logits
    to that precision).
    """
    from torch.func import vmap

    g = int(next(iter(params.values())).shape[0])
    n = int(x.shape[0])
    if n == 0:
        return [(float("nan"), float("nan"))] * g
    forward = vmap(lambda p, xb: functional_call(module, p, (xb,)), in_dims=(0, None))
    totals = torch.zeros(g, 2, dtype=torch.float64, device=x.device)  # [loss sum, correct]
    params = dict(params)
    chunk = max(1, batch_size // g)  # G x chunk logits rows: one evaluation's memory
    for lo in range(0, n, chunk):
        xb, yb = x[lo : lo + chunk], y[lo : lo + chunk]
        logits = forward(params, xb)
        top, predicted = logits.max(dim=-1)
        picked = logits.gather(-1, yb.expand(g, -1).unsqueeze(-1)).squeeze(-1)
        loss = (_shifted_lse(logits, top.unsqueeze(-1)) - picked).sum(dim=-1)
        correct = (predicted == yb).sum(dim=-1)
        totals += torch.stack([loss.double(), correct.double()], dim=-1)
    return [(c / n, s / n) for s, c in totals.tolist()]
