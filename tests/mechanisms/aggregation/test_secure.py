"""Secure aggregation: masks cancel, dropouts are recovered or fail the round, median refused."""

from __future__ import annotations

import copy
import itertools

import numpy as np
import pytest
import torch

import fedgame.mechanisms.aggregation.robust  # noqa: F401  (registers median)
from fedgame.mechanisms.aggregation.secure import SecureAggregation
from fedgame.mechanisms.aggregation.weighted import FedAvg
from fedgame.privacy.secure import (
    client_masks,
    decode_fixed,
    encode_fixed,
    masked_uploads,
    prg_masks,
    unmask_sum,
)
from fedgame.views import ClientView


def view(cid: int, size: int) -> ClientView:
    return ClientView(cid, size, 0.0, 1.0, 5.0, 1e-5, 0.0, 1.0, 1e-6, 0.0, False)


def splitmix_reference(seed: int, j: int) -> int:
    """SplitMix64 on numpy uint64 (wrapping arithmetic is defined there)."""
    m = (1 << 64) - 1
    z = (seed + 0x9E3779B97F4A7C15 * j) & m
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & m
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & m
    return z ^ (z >> 31)


def test_prg_matches_splitmix64_reference():
    seeds = [0, 12345, 2**62 + 7]
    got = prg_masks(torch.tensor(seeds, dtype=torch.int64), 5, bits=62)
    for row, seed in zip(got.tolist(), seeds):
        assert row == [splitmix_reference(seed, j) & ((1 << 62) - 1) for j in range(1, 6)]


def test_fixed_point_round_trip_within_resolution():
    x = torch.tensor([-3.25, 0.0, 1e-7, 2.5e3], dtype=torch.float64)
    back = decode_fixed(encode_fixed(x, scale=2.0**16, bits=40), scale=2.0**16, bits=40)
    assert (back - x).abs().max() <= 0.5 / 2**16


def test_net_masks_cancel_and_hide():
    seeds = np.random.default_rng(0).integers(0, 2**62, size=6)
    net = client_masks(4, seeds, 8, bits=32)
    assert (net.sum(dim=0) & (2**32 - 1)).eq(0).all()
    assert (net != 0).all()  # each single upload is masked


@pytest.mark.parametrize("uploaded", list(itertools.product([False, True], repeat=4)))
def test_masked_sum_equals_plain_sum_for_every_dropout_set(uploaded):
    up = np.array(uploaded)
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(4, 16, generator=gen, dtype=torch.float64)
    seeds = np.random.default_rng(1).integers(0, 2**62, size=6)
    enc = encode_fixed(x, scale=2.0**20, bits=48)
    total = unmask_sum(masked_uploads(enc, seeds, bits=48), up, seeds, bits=48, recover=True)
    plain = x[torch.as_tensor(up)].sum(dim=0)
    assert (decode_fixed(total, scale=2.0**20, bits=48) - plain).abs().max() <= 4 / 2**20
    if not up.all():
        assert (
            unmask_sum(masked_uploads(enc, seeds, bits=48), up, seeds, bits=48, recover=False)
            is None
        )


@pytest.mark.parametrize("dropped", [(), (1,), (0, 3), (2, 3)])
def test_aggregator_equals_fedavg_of_uploaders(dropped):
    agg = SecureAggregation(SecureAggregation.Config())
    clients = [view(i, 10 * (i + 1)) for i in range(4)]
    senders = [c for c in clients if c.client_id not in dropped]
    lost = [c for c in clients if c.client_id in dropped]
    updates = torch.randn(len(senders), 30, generator=torch.Generator().manual_seed(5))
    out, metrics = agg.aggregate(
        updates, clients=senders, dropped=lost, rng=np.random.default_rng(2)
    )
    plain = FedAvg(None).aggregate(updates, clients=senders)
    assert (out - plain).abs().max() < 1e-5
    assert metrics["secure_dropped"] == len(dropped)


def test_recovery_disabled_fails_round():
    agg = SecureAggregation(SecureAggregation.Config(recover_dropouts=False, inner="mean"))
    updates = torch.ones(2, 5)
    out, metrics = agg.aggregate(
        updates,
        clients=[view(0, 5), view(2, 5)],
        dropped=[view(1, 5)],
        rng=np.random.default_rng(0),
    )
    assert out is None and metrics["secure_recovered"] == 0.0
    ok, _ = agg.aggregate(updates, clients=[view(0, 5), view(2, 5)], rng=np.random.default_rng(0))
    assert ok is not None and torch.allclose(ok, torch.ones(5), atol=1e-5)


def test_end_to_end_failed_rounds_are_flagged(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    data = copy.deepcopy(tiny)
    data["population"]["straggle_prob"] = 0.6
    data["aggregation"] = {"kind": "secure", "recover_dropouts": False}
    rounds = simulate(validate(data)).rounds
    assert rounds["aggregation_failed"].all()
    assert rounds["test_accuracy"].nunique() == 1  # the model never changed
    data["aggregation"]["recover_dropouts"] = True
    rounds = simulate(validate(data)).rounds
    assert not rounds["aggregation_failed"].any()
    assert (rounds["secure_error"] < 1e-4).all()


def test_secure_over_median_refused(tiny, write_scenario, capsys):
    from fedgame.cli import main

    data = copy.deepcopy(tiny)
    data["aggregation"] = {"kind": "secure", "inner": {"kind": "median"}}
    assert main(["validate", str(write_scenario(data))]) == 2
    err = capsys.readouterr().err
    assert "'aggregation.inner.kind'" in err and "weighted-sum" in err
