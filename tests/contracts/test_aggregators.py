"""Contract of every registered aggregator: the round's ``masks`` rng is handed only to the
aggregators that declare ``DrawsMasks``; every other one aggregates without it."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fedgame import registry
from fedgame.mechanisms.base import DrawsMasks
from fedgame.mechanisms.metrics import split_metrics
from fedgame.model import FedGameModel
from fedgame.views import ClientView

registry.ensure_loaded()
NAMES = registry.names("aggregation")


def view(cid: int, size: int) -> ClientView:
    return ClientView(cid, size, 0.0, 1.0, 5.0, 1e-5, 0.0, 1.0, 1e-6, 0.0, False)


@pytest.mark.parametrize("name", NAMES)
def test_aggregates_rows_with_the_rng_it_declares(name):
    agg = registry.create("aggregation", name)
    updates = torch.tensor([[1.0, -2.0], [3.0, 0.5], [2.0, 1.0]])
    clients = [view(0, 10), view(1, 10), view(2, 10)]
    rng = np.random.default_rng(0) if isinstance(agg, DrawsMasks) else None
    out, _ = split_metrics(agg.aggregate(updates, clients=clients, rng=rng))
    assert out is not None and out.shape == (2,)
    # every built-in aggregate of three equal-weight rows lies in their coordinate range
    assert torch.all(out >= updates.min(dim=0).values - 1e-5)
    assert torch.all(out <= updates.max(dim=0).values + 1e-5)


@pytest.mark.parametrize(("kind", "draws"), [("fedavg", False), ("secure", True)])
def test_the_server_derives_the_masks_stream_only_for_a_declaring_aggregator(kind, draws):
    model = FedGameModel(
        {
            "name": "masks",
            "rounds": 1,
            "population": {"clients": 4},
            "data": {"dataset": {"kind": "synthetic"}},
            "selection": {"kind": "uniform", "k": 4},
            "aggregation": {"kind": kind},
        }
    )
    seen: list[object] = []
    inner = model.server.aggregation.aggregate

    def spy(*args, **kwargs):
        rng = kwargs.get("rng")
        seen.append(None if rng is None else rng.bit_generator.state)
        return inner(*args, **kwargs)

    model.server.aggregation.aggregate = spy
    model.step()
    assert len(seen) == 1
    if draws:  # the round's own masks stream, untouched before the aggregator draws
        assert seen[0] == model.plan.rng("masks", 1).bit_generator.state
    else:
        assert seen[0] is None
