"""Preflight checks: dataset footprints, output location, memory estimate and limit, device."""

from __future__ import annotations

import gzip
import os
import struct

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame import registry
from fedgame.data.datasets import Digits
from fedgame.errors import ScenarioError
from fedgame.scenario.footprint import estimate, human_bytes, layer_widths
from fedgame.scenario.load import validate
from fedgame.scenario.preflight import (
    MEMORY_LIMIT_ENV,
    available_memory,
    check_output,
    memory_limit,
    parse_size,
    preflight,
)


def _idx(array: np.ndarray) -> bytes:
    return (
        bytes([0, 0, 0x08, array.ndim])
        + struct.pack(f">{array.ndim}I", *array.shape)
        + (array.astype(np.uint8).tobytes())
    )


def _fake_mnist(folder, n_train=30, n_test=7, *, gz=False):
    for name, array in (
        ("train-images-idx3-ubyte", np.zeros((n_train, 28, 28))),
        ("train-labels-idx1-ubyte", np.arange(n_train) % 10),
        ("t10k-images-idx3-ubyte", np.zeros((n_test, 28, 28))),
        ("t10k-labels-idx1-ubyte", np.arange(n_test) % 10),
    ):
        data = _idx(array)
        if gz:
            (folder / f"{name}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / name).write_bytes(data)


def test_digits_class_counts_are_those_of_the_bundled_copy():
    from sklearn.datasets import load_digits

    assert tuple(np.bincount(load_digits().target)) == Digits.CLASS_COUNTS


@pytest.mark.parametrize(
    ("kind", "config", "clients"),
    [
        ("digits", {"test_fraction": 0.3}, 10),
        ("mnist1d", {"num_samples": 1234, "test_fraction": 0.25}, 10),
        ("mnist", {"max_train": 11, "max_test": 5}, 3),
        ("mnist", {}, 3),
    ],
)
def test_exact_footprints_match_the_loaded_data(tmp_path, kind, config, clients):
    if kind == "mnist":
        _fake_mnist(tmp_path, gz=True)
        config = {**config, "path": str(tmp_path)}
    dataset = registry.create("dataset", kind, config)
    foot = dataset.footprint(num_clients=clients)
    data = dataset.load(rng=np.random.default_rng(0), num_clients=clients)
    assert foot.exact
    assert (foot.num_train, foot.num_test) == (data.num_train, data.num_test)
    assert foot.input_shape == data.input_shape and foot.num_classes == data.num_classes
    assert foot.resident_bytes == data.x_train.nbytes + data.x_test.nbytes + 8 * (
        data.num_train + data.num_test
    )


def test_synthetic_footprint_is_an_expectation():
    dataset = registry.create("dataset", "synthetic", {"max_client_samples": 100})
    foot = dataset.footprint(num_clients=40)
    data = dataset.load(rng=np.random.default_rng(0), num_clients=40)
    assert not foot.exact
    assert foot.input_shape == data.input_shape
    assert 0.5 < foot.num_train / data.num_train < 2.0


def test_idx_footprint_reads_headers_and_refuses_huge_ones(tmp_path):
    _fake_mnist(tmp_path)
    with open(tmp_path / "train-images-idx3-ubyte", "r+b") as fh:  # claim 10^9 images
        fh.seek(4)
        fh.write(struct.pack(">I", 10**9))
    mnist = registry.create("dataset", "mnist", {"path": str(tmp_path)})
    with pytest.raises(ScenarioError, match="announces shape"):
        mnist.footprint(num_clients=2)


def test_layer_widths_follow_the_architecture():
    def widths(kind, config, shape):
        module = registry.create("model", kind, config).build(input_shape=shape, num_classes=10)
        return layer_widths(module, shape)

    assert widths("logreg", {}, (1, 8, 8)) == [64, 10]
    assert widths("mlp", {"hidden": [32]}, (40,)) == [40, 32, 32, 10]
    cnn = widths("cnn", {}, (1, 28, 28))
    assert max(cnn) == 8 * 28 * 28 and cnn[-1] == 10


# -- memory -----------------------------------------------------------------------------------


def _scenario(**changes):
    data = {
        "rounds": 5,
        "population": {"clients": 20},
        "training": {"device": "cpu"},
        "selection": {"kind": "uniform", "k": 5},
    }
    for key, value in changes.items():
        node = data
        *parents, last = key.split("__")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return validate(data)


@settings(max_examples=15)
@given(st.integers(1, 200), st.integers(1, 1000), st.integers(1, 20))
def test_the_estimate_grows_with_rounds_clients_and_model(rounds, more, hidden):
    base = estimate(_scenario(rounds=rounds)).total
    assert estimate(_scenario(rounds=rounds + more)).total > base
    wide = _scenario(rounds=rounds, model={"kind": "mlp", "hidden": [hidden * 1000]})
    assert estimate(wide).total > base


def test_estimate_names_the_term_that_dominates():
    assert estimate(_scenario(rounds=10**9)).largest().key == "rounds"
    big_model = _scenario(model={"kind": "mlp", "hidden": [10**7]})
    assert estimate(big_model).largest().key == "model"
    assert estimate(big_model).model.num_params == 64 * 10**7 + 10**7 + 10 * 10**7 + 10


def test_the_clients_table_term_follows_output_clients():
    """``all`` holds every client each round; ``active`` about the trained ones (4k), unless an
    incentive prices every player; ``none`` only the rounds table. A million clients x 30
    rounds with output.clients active (scenarios/population_scale.yaml) is a few GiB, not 22."""

    def table(**changes):
        terms = estimate(_scenario(rounds=30, population__clients=10_000, **changes)).terms
        return next(t.bytes for t in terms if t.what == "clients table")

    every, active = table(output={"clients": "all"}), table(output={"clients": "active"})
    rows = 30 * 4096
    assert every - rows == pytest.approx((active - rows) * 10_000 / 20)  # k = 5: 4k = 20 rows
    assert table(output={"clients": "none"}) == rows
    priced = table(output={"clients": "active"}, incentive={"kind": "fixed"})
    assert priced == every
    assert table() == every if 10_000 * 30 <= 2_000_000 else table() == active  # auto
    big = _scenario(rounds=30, population__clients=10**6, output={"clients": "active"})
    assert estimate(big).total < 8 << 30


def test_memory_limit_env_lowers_the_limit(monkeypatch):
    available, _ = available_memory()
    assert available > 0
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1.5G")
    assert memory_limit() == (int(1.5 * 2**30), f"allowed by {MEMORY_LIMIT_ENV}=1.5G")
    monkeypatch.setenv(MEMORY_LIMIT_ENV, str(10**30))  # above the machine: the machine wins
    assert MEMORY_LIMIT_ENV not in memory_limit()[1]
    with pytest.raises(ScenarioError) as err:
        monkeypatch.setenv(MEMORY_LIMIT_ENV, "plenty")
        memory_limit()
    assert err.value.key == MEMORY_LIMIT_ENV


@pytest.mark.parametrize(
    ("text", "size"),
    [("512", 512), ("4k", 4096), ("8G", 8 << 30), ("1.5 GiB", 3 << 29), ("2t", 2 << 40)],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


def test_preflight_refuses_what_does_not_fit(monkeypatch):
    monkeypatch.setenv(MEMORY_LIMIT_ENV, "1G")
    ok = preflight(_scenario())
    assert ok.footprint.total < ok.limit == 1 << 30
    with pytest.raises(ScenarioError) as err:
        preflight(_scenario(population__clients=1000, rounds=100_000))
    assert err.value.key == "rounds" and "fits in memory" in err.value.allowed
    with pytest.raises(ScenarioError) as err:
        preflight(_scenario(), concurrent=10)
    assert err.value.key == "--workers"
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(3) == "3 B"


def test_preflight_checks_the_device():
    if torch.cuda.is_available():
        assert preflight(_scenario(training__device="cuda")).device.startswith("cuda")
    else:
        with pytest.raises(ScenarioError) as err:
            preflight(_scenario(training__device="cuda"))
        assert err.value.key == "training.device"


# -- output location --------------------------------------------------------------------------


def test_output_folder_that_exists_or_can_be_made(tmp_path):
    check_output(tmp_path, key="--out", value="x")
    check_output(tmp_path / "a" / "b" / "c", key="--out", value="x")
    assert list(tmp_path.iterdir()) == []  # checking writes nothing


@pytest.mark.parametrize("problem", ["file", "file_parent", "dangling", "unwritable", "long"])
def test_output_folder_problems(tmp_path, problem):
    target = tmp_path / "out"
    if problem == "file":
        target.write_text("x")
    elif problem == "file_parent":
        (tmp_path / "f").write_text("x")
        target = tmp_path / "f" / "out"
    elif problem == "dangling":
        target.symlink_to(tmp_path / "missing")
    elif problem == "unwritable":
        if os.geteuid() == 0:
            target = "/proc/fedgame-out"  # root may write anywhere else
        else:
            (tmp_path / "ro").mkdir(mode=0o555)
            target = tmp_path / "ro" / "out"
    else:
        target = tmp_path / ("x" * 300)
    with pytest.raises(ScenarioError) as err:
        check_output(target, key="output.dir", value="the value")
    assert err.value.key == "output.dir" and err.value.value == "the value"
    assert not (tmp_path / "missing").exists()
