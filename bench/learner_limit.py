"""The batched learner's round against a plain ``torch.func`` vmap of the same work.

Both sides run one round of K clients (default the Flower workload: K = 20, 5 local SGD steps
of batch 32, lr 0.05, 784 features, 10 classes, evaluation on 10,000 test samples) from the
same global model and the same sample indices (``BatchedLearner.sample_batches``):

  (b) fedgame: ``BatchedLearner.train`` + ``BatchedLearner.evaluate``,
  (v) plain vmap: per-parameter tensors ``[K, ...]`` updated in place of a pytree by
      ``vmap(grad_and_value(loss))`` each step (DP-SGD: ``vmap`` over clients of ``vmap`` over
      samples of ``grad``, L2 norm over all parameters, clip, weighted sum), the updates
      flattened once, and one forward pass over the test set for accuracy and loss.

Rounds alternate which side runs first; the ratio is paired by round (median of (b)/(v) over
the rounds). Both sides' updates are compared (largest absolute difference), so the two
compute the same thing. The data are random (uniform pixels, uniform labels): the work
depends on the shapes only. ``--device`` (default cpu; ``cuda`` on a GPU, where each side is
timed between two ``torch.cuda.synchronize``), ``--threads`` torch threads (default 1).

    python bench/learner_limit.py                          # mlp and logreg, without and with DP
    python bench/learner_limit.py --models mlp --dp off --rounds 40
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call, grad_and_value, vmap

from fedgame.learning.batched import BatchedLearner, Batches
from fedgame.learning.models import ParamLayout, init_parameters
from fedgame.learning.settings import TrainingSettings
from fedgame.registry import create

MODELS = {"mlp": {"hidden": [64]}, "logreg": {}}


def learner_for(kind: str, args: argparse.Namespace, *, clip: float | None) -> BatchedLearner:
    """A learner over random 784-feature data: ``args.population`` clients of ``--samples``."""
    rng = np.random.default_rng(0)
    n = args.population * args.samples
    x = rng.random((n, 784), dtype=np.float32)
    y = rng.integers(0, 10, n)
    xt = rng.random((args.test, 784), dtype=np.float32)
    yt = rng.integers(0, 10, args.test)
    module = create("model", kind, MODELS[kind]).build(input_shape=(784,), num_classes=10)
    params = init_parameters(module, generator=torch.Generator().manual_seed(0))
    shards = [np.arange(i * args.samples, (i + 1) * args.samples) for i in range(args.population)]
    settings = TrainingSettings(
        local_steps=args.steps, batch_size=args.batch, lr=args.lr, per_sample_clip=clip
    )
    return BatchedLearner(
        module,
        params=params,
        x_train=x,
        y_train=y,
        x_test=xt,
        y_test=yt,
        client_indices=shards,
        settings=settings,
        device=args.device,
    )


class PlainVmap:
    """The same round written directly with ``torch.func`` (no flat vector during the steps)."""

    def __init__(self, learner: BatchedLearner, *, clip: float | None) -> None:
        self.m = learner
        self.layout = ParamLayout.of(learner.layout.unflatten(learner.global_params))
        self.clip = clip
        module = learner.module

        def client_loss(p: dict[str, Tensor], x: Tensor, y: Tensor, w: Tensor) -> Tensor:
            logits = functional_call(module, p, (x,))
            return (F.cross_entropy(logits, y, reduction="none") * w).sum()

        def sample_loss(p: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
            logits = functional_call(module, p, (x.unsqueeze(0),))
            return F.cross_entropy(logits, y.unsqueeze(0))

        self.client_grad = vmap(grad_and_value(client_loss))
        self.sample_grad = vmap(vmap(grad_and_value(sample_loss), in_dims=(None, 0, 0)))

    def round(self, batches: Batches) -> tuple[Tensor, tuple[float, float]]:
        """Updates ``[K, P]`` and ``(accuracy, loss)`` of the global model."""
        m = self.m
        start = m.layout.unflatten(m._global)
        k = batches.indices.shape[0]
        params = {n: p.expand(k, *p.shape).clone() for n, p in start.items()}
        weights = batches.weights(m.dtype)
        lr = m.settings.lr
        for s in range(batches.indices.shape[1]):
            idx, w = batches.indices[:, s], weights[:, s]
            x, y = m.x_train[idx], m.y_train[idx]
            if self.clip is None:
                grads, _ = self.client_grad(params, x, y, w)
            else:
                each, _ = self.sample_grad(params, x, y)
                sq = sum(g.reshape(*g.shape[:2], -1).square().sum(-1) for g in each.values())
                scale = w / torch.clamp(torch.sqrt(sq) / self.clip, min=1.0)
                grads = {n: torch.einsum("kb,kb...->k...", scale, g) for n, g in each.items()}
            params = {n: p - lr * grads[n] for n, p in params.items()}
        flat = torch.cat([params[n].reshape(k, -1) for n in m.layout.names], dim=1)
        updates = flat - m._global
        with torch.inference_mode():
            logits = functional_call(m.module, start, (m.x_test,))
            acc = (logits.argmax(-1) == m.y_test).double().mean().item()
            loss = F.cross_entropy(logits, m.y_test).item()
        return updates, (acc, loss)


def timed(fn: Callable[[], object], device: torch.device) -> tuple[float, object]:
    """Wall seconds of ``fn()``; on CUDA the queued kernels are waited for on both ends."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    out = fn()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t0, out


def run_case(kind: str, dp: bool, args: argparse.Namespace) -> dict[str, float]:
    clip = 1.0 if dp else None
    learner = learner_for(kind, args, clip=clip)
    plain = PlainVmap(learner, clip=clip)
    gen = torch.Generator(device=learner.device).manual_seed(1)
    ids = np.arange(args.clients)
    tb: list[float] = []
    tv: list[float] = []
    diff = 0.0
    for r in range(args.warmup + args.rounds):
        batches = learner.sample_batches(ids, round_index=r, generator=gen)

        def ours(b: Batches = batches) -> Tensor:
            res = learner.train(ids, round_index=0, generator=gen, batches=b)
            learner.evaluate()
            return res.updates

        def theirs(b: Batches = batches) -> Tensor:
            return plain.round(b)[0]

        order = [("b", ours), ("v", theirs)] if r % 2 == 0 else [("v", theirs), ("b", ours)]
        got: dict[str, tuple[float, object]] = {
            name: timed(fn, learner.device) for name, fn in order
        }
        ub, uv = got["b"][1], got["v"][1]
        assert isinstance(ub, Tensor) and isinstance(uv, Tensor)
        diff = max(diff, float((ub - uv).abs().max()))
        if r >= args.warmup:
            tb.append(got["b"][0])
            tv.append(got["v"][0])
    ratios = [b / v for b, v in zip(tb, tv)]
    return {
        "b": statistics.median(tb),
        "v": statistics.median(tv),
        "ratio": statistics.median(ratios),
        "q1": statistics.quantiles(ratios, n=4, method="inclusive")[0],
        "q3": statistics.quantiles(ratios, n=4, method="inclusive")[2],
        "diff": diff,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=["mlp", "logreg"], choices=sorted(MODELS))
    p.add_argument("--dp", choices=["off", "on", "both"], default="both")
    p.add_argument("--clients", type=int, default=20, help="K clients trained per round")
    p.add_argument("--population", type=int, default=100, help="clients holding data")
    p.add_argument("--samples", type=int, default=600, help="training samples per client")
    p.add_argument("--test", type=int, default=10_000, help="test samples evaluated per round")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    load = os.getloadavg()
    print(
        f"K={args.clients}, {args.steps} steps of {args.batch}, {args.test} test samples, "
        f"{args.threads} thread(s), device {args.device}, torch {torch.__version__}, load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
    )
    print(f"{'case':<14} {'(b) ms':>8} {'(v) ms':>8} {'(b)/(v)':>8} {'IQR':>12} {'max |du|':>9}")
    dps = {"off": [False], "on": [True], "both": [False, True]}[args.dp]
    for kind in args.models:
        for dp in dps:
            r = run_case(kind, dp, args)
            name = f"{kind}{' dp-sgd' if dp else ''}"
            iqr = f"{r['q1']:.2f}-{r['q3']:.2f}"
            print(
                f"{name:<14} {r['b'] * 1e3:8.1f} {r['v'] * 1e3:8.1f} {r['ratio']:8.2f} "
                f"{iqr:>12} {r['diff']:9.1e}"
            )
    load = os.getloadavg()
    print(f"load average after: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    main()
