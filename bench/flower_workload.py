"""The Flower side of ``bench/flower_compare.py``: the Flower-style workload in Flower itself.

Runs in a Python that has Flower's simulation extra and torch (``flwr[simulation]``), not
fedgame: ``bench/flower_compare.py`` starts it with ``--flower-python``. The workload is
``scenarios/flower_style.yaml``'s: 100 clients holding an IID split of Fashion-MNIST's 60,000
training images (600 each, from a seeded permutation), 20 sampled per round
(``FedAvg(fraction_train=0.2)``, no federated evaluation), each doing 5 local SGD steps of
a batch of 32 (lr 0.05) on an MLP 784-64-10, the server averaging by examples and evaluating
the global model on the 10,000 test images after every round (``evaluate_fn``, as fedgame
does every round), 30 rounds, Ray backend (``--cpus-per-client`` CPUs per ClientApp).

Prints one JSON line: ``wall`` (seconds from this process's start to the end of the last
round), ``imports`` (seconds to import flwr and torch), ``rounds`` (seconds between
successive central evaluations, one per round), ``accuracy`` (test accuracy after the last
round) and the versions.

    /path/to/flower-venv/bin/python bench/flower_workload.py --rounds 30
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402
import gzip  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from functools import lru_cache  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict  # noqa: E402
from flwr.clientapp import ClientApp  # noqa: E402
from flwr.serverapp import Grid, ServerApp  # noqa: E402
from flwr.serverapp.strategy import FedAvg  # noqa: E402
from flwr.simulation import run_simulation  # noqa: E402

IMPORTED = time.perf_counter()
DATA = Path(os.environ.get("FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist"))
CLIENTS, PER_ROUND, STEPS, BATCH, LR = 100, 20, 5, 32, 0.05


def read_idx(name: str) -> np.ndarray:
    """One gzipped IDX file of Fashion-MNIST as an array (images scaled to [0, 1])."""
    with gzip.open(DATA / f"{name}.gz") as f:
        raw = f.read()
    dims = raw[3]
    shape = [int.from_bytes(raw[4 + 4 * i : 8 + 4 * i], "big") for i in range(dims)]
    values = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)
    return values.reshape(shape[0], -1).astype(np.float32) / 255.0 if dims > 1 else values


@lru_cache(maxsize=1)
def dataset() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Train and test tensors, read once per process (each Ray worker reads its own)."""
    x = torch.from_numpy(read_idx("train-images-idx3-ubyte"))
    y = torch.from_numpy(read_idx("train-labels-idx1-ubyte").astype(np.int64))
    xt = torch.from_numpy(read_idx("t10k-images-idx3-ubyte"))
    yt = torch.from_numpy(read_idx("t10k-labels-idx1-ubyte").astype(np.int64))
    return x, y, xt, yt


def shard(partition: int) -> np.ndarray:
    """Client ``partition``'s 600 training rows (IID: a seeded permutation cut in 100)."""
    order = np.random.default_rng(0).permutation(60_000)
    return np.array_split(order, CLIENTS)[partition]


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(784, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))


client = ClientApp()


@client.train()
def train(msg: Message, context: Context) -> Message:
    """5 local SGD steps of 32 random samples of this client's shard."""
    torch.set_num_threads(1)
    x, y, _, _ = dataset()
    partition = int(context.node_config["partition-id"])
    rows = torch.from_numpy(shard(partition))
    model = mlp()
    model.load_state_dict(msg.content["arrays"].to_torch_state_dict())
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    gen = torch.Generator().manual_seed(
        int(msg.content["config"]["server-round"]) * 1000 + partition
    )
    loss = torch.zeros(())
    for _ in range(STEPS):
        pick = rows[torch.randint(len(rows), (BATCH,), generator=gen)]
        opt.zero_grad()
        loss = F.cross_entropy(model(x[pick]), y[pick])
        loss.backward()
        opt.step()
    metrics = MetricRecord({"train_loss": loss.item(), "num-examples": len(rows)})
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()), "metrics": metrics})
    return Message(content=content, reply_to=msg)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--cpus-per-client", type=float, default=1.0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    marks: list[float] = []
    accuracy: list[float] = []

    def evaluate(server_round: int, arrays: ArrayRecord) -> MetricRecord:
        _, _, xt, yt = dataset()
        model = mlp()
        model.load_state_dict(arrays.to_torch_state_dict())
        with torch.inference_mode():
            logits = model(xt)
        acc = float((logits.argmax(1) == yt).float().mean())
        accuracy.append(acc)
        marks.append(time.perf_counter())
        return MetricRecord({"accuracy": acc, "loss": float(F.cross_entropy(logits, yt))})

    server = ServerApp()

    @server.main()
    def run(grid: Grid, context: Context) -> None:
        strategy = FedAvg(
            fraction_train=PER_ROUND / CLIENTS,
            fraction_evaluate=0.0,
            min_train_nodes=PER_ROUND,
            min_available_nodes=CLIENTS,
        )
        strategy.start(
            grid=grid,
            initial_arrays=ArrayRecord(mlp().state_dict()),
            num_rounds=args.rounds,
            evaluate_fn=evaluate,
        )

    # Ray's workers import the ClientApp from this file by its module name (not ``__main__``)
    here = str(Path(__file__).resolve().parent)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [here, os.environ.get("PYTHONPATH")]))
    from flower_workload import client as importable_client

    run_simulation(
        server_app=server,
        client_app=importable_client,
        num_supernodes=CLIENTS,
        backend_config={"client_resources": {"num_cpus": args.cpus_per_client, "num_gpus": 0.0}},
    )
    import flwr

    print(
        json.dumps(
            {
                "wall": marks[-1] - STARTED,
                "imports": IMPORTED - STARTED,
                "rounds": list(np.diff(marks)),
                "accuracy": accuracy[-1],
                "flwr": flwr.__version__,
                "torch": torch.__version__,
            }
        )
    )


if __name__ == "__main__":
    main()
