"""Time one DP-SGD round of the batched learner: K clients, B samples each, per-sample clipping.

Prints, per model, the median wall time of ``BatchedLearner.train`` (one full-batch step with
per-sample L2 clipping, the path every DP-SGD and paper-000 mechanism takes) and, for
reference, of the same per-sample gradients taken with respect to the flat parameter vector
(what the learner did before: the backward of the flat vector's slicing writes every
parameter's gradient into its own ``[K, B, P]`` buffer). One torch thread, CPU unless
``--device cuda``.

    python bench/dpsgd_step.py                       # K = 20, B = 60, 28 x 28 inputs
    python bench/dpsgd_step.py --clients 20 --samples 600 --models logreg
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from torch.func import grad_and_value, vmap

from fedgame.learning.batched import BatchedLearner
from fedgame.learning.models import init_parameters
from fedgame.learning.settings import TrainingSettings
from fedgame.registry import create

MODELS = {
    "logreg": {},
    "mlp": {"hidden": [32]},
    "cnn": {"channels": [16, 32], "kernel_size": 5},
    "lenet5": {},
}


def learner_for(kind: str, args: argparse.Namespace) -> BatchedLearner:
    """A learner over random 1 x 28 x 28 images, ``args.samples`` per client."""
    rng = np.random.default_rng(0)
    n = args.clients * args.samples
    x = rng.standard_normal((n, 1, 28, 28)).astype(np.float32)
    y = rng.integers(0, 10, n)
    module = create("model", kind, MODELS[kind]).build(input_shape=(1, 28, 28), num_classes=10)
    params = init_parameters(module, generator=torch.Generator().manual_seed(0))
    settings = TrainingSettings(device=args.device, mode="fedsgd", per_sample_clip=1.0)
    parts = np.array_split(np.arange(n), args.clients)
    return BatchedLearner(
        module, params=params, x_train=x, y_train=y, x_test=x[:10], y_test=y[:10],
        client_indices=parts, settings=settings, device=args.device,
    )  # fmt: skip


def flat_vector_gradients(learner: BatchedLearner) -> object:
    """The per-sample gradients with respect to the flat vector (the reference path)."""

    def loss(flat: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return learner._named_sample_loss(learner.layout.unflatten(flat), x, y)

    return vmap(vmap(grad_and_value(loss), in_dims=(None, 0, 0)))


def median_seconds(fn: object, repeats: int) -> float:
    times = []
    for _ in range(repeats + 1):  # the first call builds vmap's plan: not timed
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times[1:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--clients", type=int, default=20, help="K clients a round (default 20)")
    p.add_argument("--samples", type=int, default=60, help="samples per client (default 60)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated model kinds")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds per figure (default 5)")
    p.add_argument("--device", default="cpu")
    args = p.parse_args()
    torch.set_num_threads(1)
    print(f"K = {args.clients} clients x B = {args.samples} samples, 1 x 28 x 28, one thread")
    print(f"{'model':8} {'params':>8} {'train round':>12} {'grads, flat vector':>19}")
    for kind in args.models.split(","):
        train_s, flat_s, params = time_model(kind, args)
        print(f"{kind:8} {params:8,d} {train_s * 1e3:9.0f} ms {flat_s * 1e3:16.0f} ms")


def time_model(kind: str, args: argparse.Namespace) -> tuple[float, float, int]:
    """(median s of a training round, median s of the flat-vector gradients, parameters)."""
    learner = learner_for(kind, args)
    ids = list(range(args.clients))
    gen = torch.Generator().manual_seed(0)
    train_s = median_seconds(lambda: learner.train(ids, round_index=0, generator=gen), 3)
    batches = learner.sample_batches(ids, round_index=0, generator=gen)
    x = learner.x_train[batches.indices[:, 0]]
    y = learner.y_train[batches.indices[:, 0]]
    theta = learner.global_params.expand(args.clients, -1).clone()
    flat = flat_vector_gradients(learner)
    flat_s = median_seconds(lambda: flat(theta, x, y), args.repeats)  # type: ignore[operator]
    return train_s, flat_s, learner.num_params


if __name__ == "__main__":
    main()
