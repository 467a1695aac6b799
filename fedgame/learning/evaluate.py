"""Evaluation helpers: test accuracy and loss of one parameter set, in memory-bounded chunks."""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor, nn
from torch.func import functional_call

#: floor of the shifted logits z - max(z) before ``exp`` in evaluation: e^-80 ≈ 1.8e-35 is a
#: normal float32, and a term that small cannot change a sum that is at least 1 (the max's own)
EXP_FLOOR = -80.0


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
) -> tuple[float, float]:
    """Accuracy and mean cross-entropy of ``module`` with ``params`` on ``(x, y)``.

    Args:
        module: stateless module skeleton.
        params: named parameters plugged in with ``functional_call``.
        x: inputs ``[n, ...]`` on the parameters' device.
        y: integer labels ``[n]``.
        batch_size: samples per forward pass.

    Returns:
        ``(accuracy, loss)``; both NaN when ``x`` is empty.
    """
    n = int(x.shape[0])
    if n == 0:
        return float("nan"), float("nan")
    totals = torch.zeros(2, dtype=torch.float64, device=x.device)  # [loss sum, correct]
    params = dict(params)
    for lo in range(0, n, batch_size):
        logits = functional_call(module, params, (x[lo : lo + batch_size],))
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
