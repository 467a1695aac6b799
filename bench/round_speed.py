"""Seconds per federated round: batched learner vs a plain per-client torch loop.

Setting: N clients (default 1000), K selected per round (default 100), multinomial logistic
regression on MNIST-1D shaped data (40 features, 10 classes; the ``mnist1d`` dataset when it is
available, else random data of that shape), 5 local SGD steps of batch 32, then each client's
update is clipped to L2 norm 1 and gets its own Gaussian noise N(0, sigma_k^2 I), the
server averages and applies the updates, and the global model is evaluated on the 10 000
held-out test samples (the learner's per-round work, as in every fedgame round).

Columns:
  (a) fedgame end to end (``FedGameModel.step()``: agents, accounting, DataCollector),
  (b) the batched learner alone (``BatchedLearner.train`` + batched clip/noise/aggregate +
      ``BatchedLearner.evaluate``),
  (c) the reference sequential loop (``fedgame.learning.reference.sequential_train`` + a
      per-client clip/noise loop + a plain forward pass over the test set), from the same
      batch indices,
and the ratios (c)/(b) and (a)/(b), then the median of the per-round differences (a) − (b)
(the agents' bookkeeping, in ms: steadier than the ratio, whose denominator moves with the
machine). The last line also gives (a)/(b) with (b)'s evaluation taken out (then (a)'s
evaluation counts as overhead).

Populations of (a): ``uniform`` (every client ``always``), ``mixed`` (half ``always``, 30 %
``fixed`` at rho 0.05, 20 % a second ``always`` type) and ``strategic`` (60 %
``best_response``, 30 % ``learning``, 10 % ``fixed`` at rho 0.05, playing the ``qi_dpfl``
contest under ``zcdp_gaussian`` noise): three agent types each, every one answering in batch
(``respond_all``). Where N exceeds the training samples, each client draws its own shard of
``--samples // N`` (at least 8) samples from the shared pool (partition ``sampled``) for
(a), (b) and (c) alike.

Named cases (``--case``; the first output line names the case):
  ``uniform-1000``: N = 1000, uniform (the default; target (a)/(b) <= 1.3x),
  ``uniform-100000``: N = 100,000, uniform (target <= 1.5x),
  ``mixed-1000``: N = 1000, the ``strategic`` mix of three behaviours (target <= 1.3x),
  ``mixed-100000``: N = 100,000, the ``strategic`` mix (target <= 1.5x).
``--clients`` and ``--population`` override a case's settings.

Usage: ``python bench/round_speed.py [--case NAME] [--clients N] [--selected K]
[--population uniform|mixed|strategic] [--threads N] [--rounds R] [--warmup W]
[--device cpu|cuda|cuda:N|auto] [--phases]`` (on a GPU: ``--device cuda``; ``--phases``: the
median time of each of (a)'s phases instead, and their sum outside the learner's).
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.func import functional_call

from fedgame.learning.batched import BatchedLearner, clip_scale
from fedgame.learning.models import LogReg, init_parameters
from fedgame.learning.reference import sequential_train
from fedgame.learning.settings import TrainingSettings


def load_data(num_train: int, *, seed: int) -> tuple[np.ndarray, ...]:
    """``(x_train, y_train, x_test, y_test, source)``: MNIST-1D with the split (a) uses (80 %
    train, 20 % test), else random data of the same shapes."""
    rng = np.random.default_rng(seed)
    try:
        from fedgame.data.mnist1d import Mnist1D

        ds = Mnist1D(Mnist1D.Config(num_samples=int(num_train / 0.8) + 10)).load(
            rng=rng, num_clients=1
        )
        return ds.x_train[:num_train], ds.y_train[:num_train], ds.x_test, ds.y_test, "mnist1d"
    except ImportError:
        num_test = num_train // 4
        x = rng.standard_normal((num_train + num_test, 40)).astype(np.float32)
        y = rng.integers(0, 10, num_train + num_test)
        return x[:num_train], y[:num_train], x[num_train:], y[num_train:], "random (40 features)"


def end_to_end_model(args: argparse.Namespace):
    """(a) a ``FedGameModel`` on the same setting; one ``step()`` is one round end to end.

    The whole round: faults, offer, responses, selection, batched training, clip + Gaussian
    noise per client, upload, aggregation, evaluation, accounting and DataCollector rows.
    """
    from fedgame.model import FedGameModel
    from fedgame.scenario.load import validate

    data: dict[str, Any] = {
        "name": "bench",
        "seed": args.seed,
        "rounds": args.warmup + args.rounds,
        "population": {
            "clients": args.clients,
            "budget": {"epsilon": {"dist": "uniform", "low": 5.0, "high": 50.0}},
        },
        "data": {
            "dataset": {"kind": "mnist1d", "num_samples": int(args.samples / 0.8) + 10},
            "partition": partition(args),
        },
        "model": "logreg",
        "training": {"local_steps": 5, "batch_size": 32, "lr": 0.05, "device": args.device},
        "selection": {"kind": "uniform", "k": args.selected},
        "privacy": {"kind": "gaussian", "clip": 1.0},
        "network": {"faults": "none"},
        "output": {"clients": "active" if args.clients > 10_000 else "all"},
    }
    if args.population == "mixed":
        data["population"]["behaviours"] = MIXED
    elif args.population == "strategic":
        data["population"]["behaviours"] = STRATEGIC
        data["incentive"] = {"kind": "qi_dpfl"}
        data["privacy"] = {"kind": "zcdp_gaussian", "clip": 1.0}
    return FedGameModel(validate(data))


#: the mixed-behaviour population of ``--population mixed``
MIXED = [
    {"kind": "always", "share": 0.5},
    {"kind": "fixed", "share": 0.3, "rho": 0.05},
    {"kind": "always", "share": 0.2, "name": "loyal"},
]

#: the three strategic behaviours of ``--population strategic`` (the ``mixed-*`` cases)
STRATEGIC = [
    {"kind": "best_response", "share": 0.6},
    {"kind": "learning", "share": 0.3},
    {"kind": "fixed", "share": 0.1, "rho": 0.05},
]

#: ``--case`` name -> (N, population, target of (a)/(b))
CASES = {
    "uniform-1000": (1000, "uniform", 1.3),
    "uniform-100000": (100_000, "uniform", 1.5),
    "mixed-1000": (1000, "strategic", 1.3),
    "mixed-100000": (100_000, "strategic", 1.5),
}


#: ``FedGameModel.step()``'s phases, in order; all but train and aggregate (the learner's
#: round, with evaluation) are the agents' bookkeeping
PHASES = (
    "network", "offer", "respond", "select", "train",
    "privatise", "upload", "aggregate", "settle", "collect",
)  # fmt: skip


def phase_times(args: argparse.Namespace) -> None:
    """``--phases``: the median wall time of each phase of (a) over ``--rounds`` rounds
    after ``--warmup``, and their sum outside the learner's two phases."""
    model = end_to_end_model(args)
    times: dict[str, list[float]] = {name: [] for name in PHASES}
    for name in PHASES:
        phase = getattr(model, f"phase_{name}")

        def timed(phase=phase, name=name) -> None:  # type: ignore[no-untyped-def]
            started = time.perf_counter()
            phase()
            times[name].append(time.perf_counter() - started)

        setattr(model, f"phase_{name}", timed)
    for _ in range(args.warmup):
        model.step()
    for spent in times.values():
        spent.clear()
    for _ in range(args.rounds):
        model.step()
    print(f"{args.case}: N = {args.clients}, {describe(args.population)}, {args.rounds} rounds")
    medians = {name: 1000 * float(np.median(spent)) for name, spent in times.items()}
    for name, ms in medians.items():
        print(f"  {name:<10} {ms:8.2f} ms")
    books = sum(ms for name, ms in medians.items() if name not in ("train", "aggregate"))
    print(f"bookkeeping (every phase but train and aggregate): {books:.2f} ms")


def describe(population: str) -> str:
    """The behaviours of a population, e.g. ``best_response 60%, learning 30%, fixed 10%``."""
    mix = {"mixed": MIXED, "strategic": STRATEGIC}.get(population)
    if mix is None:
        return "always 100%"
    return ", ".join(f"{b.get('name', b['kind'])} {b['share']:.0%}" for b in mix)


def partition(args: argparse.Namespace) -> dict[str, Any]:
    """``iid`` while every client can have its own samples, else per-client shared shards."""
    if args.clients <= args.samples:
        return {"kind": "iid"}
    return {"kind": "sampled", "size": max(8, args.samples // args.clients)}


def main() -> None:
    """Parse flags, time (a), (b), (c) and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--case", choices=list(CASES), default="uniform-1000")
    parser.add_argument("--clients", type=int, default=None, help="default: the case's N")
    parser.add_argument("--selected", type=int, default=100)
    parser.add_argument("--samples", type=int, default=40000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:N or auto")
    parser.add_argument(
        "--population",
        choices=["uniform", "mixed", "strategic"],
        default=None,
        help="default: the case's population",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--phases", action="store_true", help="(a) only: the median time of each phase"
    )
    args = parser.parse_args()
    case_clients, case_population, target = CASES[args.case]
    if args.clients is None:
        args.clients = case_clients
    if args.population is None:
        args.population = case_population
    if args.phases:
        torch.set_num_threads(args.threads)
        phase_times(args)
        return
    named = args.clients == case_clients and args.population == case_population
    if not named:  # the target of the size class
        target = 1.3 if args.clients <= 10_000 else 1.5
    torch.set_num_threads(args.threads)

    x, y, x_test, y_test, source = load_data(args.samples, seed=args.seed)
    rng = np.random.default_rng(args.seed + 1)
    if args.clients <= args.samples:
        client_indices = np.array_split(rng.permutation(len(y)), args.clients)
    else:  # the shared-pool shards (a) uses; a ClientShards reads as a list of arrays
        from fedgame.data.sampled import Sampled

        size = int(partition(args)["size"])
        client_indices = Sampled(Sampled.Config(size=size)).split(
            y, num_clients=args.clients, rng=rng
        )
    settings = TrainingSettings(local_steps=5, batch_size=32, lr=0.05, device=args.device)
    module = LogReg().build(input_shape=(40,), num_classes=10)
    gen = torch.Generator()
    gen.manual_seed(args.seed)
    params = init_parameters(module, generator=gen)
    learner = BatchedLearner(
        module,
        params=params,
        x_train=x,
        y_train=y,
        x_test=x_test,
        y_test=y_test,
        client_indices=client_indices,
        settings=settings,
        device=args.device,
    )
    sigma = torch.from_numpy(rng.uniform(0.001, 0.01, args.clients)).float().to(learner.device)
    cpu_gen = gen  # (c) runs on the CPU
    gen = torch.Generator(device=learner.device)  # (b): every tensor on the run's device
    gen.manual_seed(args.seed)
    selections = [
        rng.choice(args.clients, size=args.selected, replace=False).tolist()
        for _ in range(args.warmup + args.rounds)
    ]

    def round_batched(t: int) -> None:
        ids = selections[t]
        res = learner.train(ids, round_index=t, generator=gen)
        u = res.updates
        u = u * clip_scale(u.norm(dim=1), bound=1.0)[:, None]
        noise = torch.randn(u.shape, generator=gen, device=u.device)
        u = u + sigma[torch.as_tensor(ids, device=u.device)][:, None] * noise
        learner.apply_update(u.mean(dim=0))
        start = time.perf_counter()
        learner.evaluate()
        batched_eval_times.append(time.perf_counter() - start)

    batched_eval_times: list[float] = []
    x_t, y_t = torch.from_numpy(x), torch.from_numpy(y)
    x_test_t, y_test_t = torch.from_numpy(x_test), torch.from_numpy(y_test).long()

    @torch.no_grad()
    def plain_evaluate() -> tuple[float, float]:
        """Test accuracy and loss the usual way: one forward pass and ``F.cross_entropy``."""
        glob = learner.layout.unflatten(learner.global_params.cpu())
        logits = functional_call(module, glob, x_test_t)
        loss = F.cross_entropy(logits, y_test_t)
        accuracy = (logits.argmax(dim=1) == y_test_t).float().mean()
        return float(accuracy), float(loss)

    def round_sequential(t: int) -> None:
        ids = selections[t]
        batches = learner.sample_batches(ids, round_index=t, generator=gen)
        glob = learner.layout.unflatten(learner.global_params.cpu())
        res = sequential_train(
            module,
            params=glob,
            x_train=x_t,
            y_train=y_t,
            client_indices=client_indices,
            client_ids=ids,
            batches=batches.__class__(batches.indices.cpu(), batches.mask.cpu()),
            settings=settings,
            round_index=t,
        )
        total = torch.zeros(learner.num_params)
        for k, cid in enumerate(ids):
            u = res.updates[k]
            u = u * min(1.0, 1.0 / max(float(u.norm()), 1e-12))
            u = u + float(sigma[cid]) * torch.randn(u.shape, generator=cpu_gen)
            total += u
        learner.apply_update(total / len(ids))
        plain_evaluate()

    model = end_to_end_model(args)

    def round_end_to_end(t: int) -> None:
        model.step()

    def interleaved(*fns) -> list[list[float]]:
        """Wall time of each round of each variant, the variants taking turns round by round
        so that a machine slowing down or speeding up affects them alike."""
        for t in range(args.warmup):
            for fn in fns:
                fn(t)
        times: list[list[float]] = [[] for _ in fns]
        for t in range(args.warmup, args.warmup + args.rounds):
            for fn, spent in zip(fns, times):
                start = time.perf_counter()
                fn(t)
                if learner.device.type == "cuda":
                    torch.cuda.synchronize()
                spent.append(time.perf_counter() - start)
        return times

    import warnings

    warnings.simplefilter("ignore")
    a_times, b_times = interleaved(round_end_to_end, round_batched)
    a, b = float(np.median(a_times)), float(np.median(b_times))
    bookkeeping = float(np.median(np.subtract(a_times, b_times)))  # paired: same machine state
    (c_times,) = interleaved(round_sequential)
    c = float(np.median(c_times))
    print(
        f"case: {args.case if named else 'custom'}; population {args.population} "
        f"({describe(args.population)})"
    )
    print(
        f"data: {source}; N={args.clients} K={args.selected} population={args.population} "
        f"logreg, 5 local steps, batch 32; "
        f"threads={args.threads} device={learner.device}; {args.rounds} rounds after "
        f"{args.warmup} warm-up (median; (a) and (b) take turns each round)"
    )
    print(f"{'variant':<34}{'s/round':>10}")
    print(f"{'(a) fedgame end to end':<34}{a:>10.4f}")
    print(f"{'(b) batched learner':<34}{b:>10.4f}")
    print(f"{'(c) sequential per-client loop':<34}{c:>10.4f}")
    print(f"{'speed-up (c)/(b)':<34}{c / b:>9.1f}x   (target >= 8x)")
    print(f"{'overhead (a)/(b)':<34}{a / b:>9.2f}x   (target <= {target}x)")
    print(f"{'(a) - (b), paired by round':<34}{bookkeeping * 1e3:>8.1f} ms  (bookkeeping)")
    b_train = b - float(np.median(batched_eval_times[-args.rounds :]))
    print(f"{'(a)/(b without its evaluation)':<34}{a / b_train:>9.2f}x   (evaluation as overhead)")


if __name__ == "__main__":
    main()
