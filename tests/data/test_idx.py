"""Tests for fedgame.data.idx (IDX reader, mnist and fashion_mnist loaders)."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import pytest

from fedgame.data.idx import (
    IDX_FILES,
    FashionMnist,
    Mnist,
    debian_fashion_mnist_dir,
    find_idx_files,
    read_idx,
)
from fedgame.errors import ScenarioError


def _idx_bytes(array: np.ndarray) -> bytes:
    code = {np.dtype(np.uint8): 0x08, np.dtype(">i4"): 0x0C, np.dtype(">f4"): 0x0D}[array.dtype]
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.tobytes()


def _write(folder: Path, name: str, array: np.ndarray, *, gz: bool) -> None:
    data = _idx_bytes(array)
    if gz:
        (folder / f"{name}.gz").write_bytes(gzip.compress(data))
    else:
        (folder / name).write_bytes(data)


def _fake_mnist(folder: Path, *, gz: bool, n_train: int = 12, n_test: int = 5) -> dict:
    rng = np.random.default_rng(0)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(n_test) % 10).astype(np.uint8),
    }
    for name, array in arrays.items():
        _write(folder, name, array, gz=gz)
    return arrays


@pytest.mark.parametrize("gz", [False, True])
def test_read_idx_roundtrip(tmp_path, gz):
    for array in (
        np.arange(24, dtype=np.uint8).reshape(2, 3, 4),
        np.array([-5, 7, 1 << 20], dtype=">i4"),
        np.linspace(0, 1, 6, dtype=">f4").reshape(3, 2),
    ):
        _write(tmp_path, "a-idx", array, gz=gz)
        out = read_idx(tmp_path / ("a-idx.gz" if gz else "a-idx"))
        np.testing.assert_array_equal(out, array)
        assert out.shape == array.shape


def test_read_idx_rejects_bad_magic_and_truncation(tmp_path):
    (tmp_path / "bad").write_bytes(b"\x01\x02\x08\x01" + b"\x00" * 8)
    with pytest.raises(ScenarioError, match="not an IDX file"):
        read_idx(tmp_path / "bad")
    good = _idx_bytes(np.arange(10, dtype=np.uint8))
    (tmp_path / "short").write_bytes(good[:-3])
    with pytest.raises(ScenarioError, match="truncated"):
        read_idx(tmp_path / "short")


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_loader_reads_scales_and_caps(tmp_path, gz):
    arrays = _fake_mnist(tmp_path, gz=gz)
    ds = Mnist(Mnist.Config(path=str(tmp_path))).load(rng=np.random.default_rng(0), num_clients=2)
    assert ds.input_shape == (1, 28, 28) and ds.num_classes == 10
    assert ds.x_train.shape == (12, 1, 28, 28) and ds.x_train.dtype == np.float32
    np.testing.assert_allclose(ds.x_train[:, 0] * 255, arrays["train-images-idx3-ubyte"])
    np.testing.assert_array_equal(ds.y_test, arrays["t10k-labels-idx1-ubyte"])
    assert ds.y_train.dtype == np.int64

    capped = Mnist(Mnist.Config(path=str(tmp_path), max_train=4, max_test=2))
    a = capped.load(rng=np.random.default_rng(1), num_clients=2)
    b = capped.load(rng=np.random.default_rng(1), num_clients=2)
    assert a.num_train == 4 and a.num_test == 2
    np.testing.assert_array_equal(a.x_train, b.x_train)
    # the kept rows are genuine rows of the file
    rows = {r.tobytes() for r in arrays["train-images-idx3-ubyte"]}
    assert all((x[0] * 255).round().astype(np.uint8).tobytes() in rows for x in a.x_train)


def test_missing_files_error_names_files_and_folder(tmp_path):
    _fake_mnist(tmp_path, gz=True)
    (tmp_path / "t10k-labels-idx1-ubyte.gz").unlink()
    (tmp_path / "train-images-idx3-ubyte.gz").unlink()
    with pytest.raises(ScenarioError) as err:
        FashionMnist(FashionMnist.Config(path=str(tmp_path))).load(
            rng=np.random.default_rng(0), num_clients=1
        )
    msg = str(err.value)
    assert err.value.key == "path"
    assert "t10k-labels-idx1-ubyte" in msg and "train-images-idx3-ubyte" in msg
    assert "train-labels-idx1-ubyte" not in msg  # present files are not reported
    assert str(tmp_path) in msg and "apt-get install dataset-fashion-mnist" in msg


def test_mnist_without_path_says_what_to_set():
    with pytest.raises(ScenarioError) as err:
        Mnist(Mnist.Config()).load(rng=np.random.default_rng(0), num_clients=1)
    assert err.value.key == "path"
    assert all(name in str(err.value) for name in IDX_FILES)


def test_find_idx_files_accepts_dotted_names(tmp_path):
    (tmp_path / "train-images.idx3-ubyte").write_bytes(b"")
    found, missing = find_idx_files(tmp_path)
    assert found["train-images-idx3-ubyte"].name == "train-images.idx3-ubyte"
    assert missing == list(IDX_FILES[1:])


DEBIAN_DIR = debian_fashion_mnist_dir()


@pytest.mark.skipif(
    DEBIAN_DIR is None,
    reason="Debian's dataset-fashion-mnist package is not installed on this machine",
)
def test_debian_fashion_mnist_loads_with_caps():
    ds = FashionMnist(FashionMnist.Config(max_train=300, max_test=100)).load(
        rng=np.random.default_rng(0), num_clients=3
    )
    assert ds.x_train.shape == (300, 1, 28, 28) and ds.x_test.shape == (100, 1, 28, 28)
    assert ds.x_train.min() >= 0.0 and ds.x_train.max() <= 1.0 and ds.x_train.max() > 0.9
    assert np.unique(ds.y_train).size == 10


def test_fallback_dataset_when_files_missing(tmp_path):
    import warnings

    from fedgame import registry

    empty = tmp_path / "nothing-here"
    empty.mkdir()
    plain = registry.create("dataset", "fashion_mnist", {"path": str(empty)})
    with pytest.raises(ScenarioError, match="nothing-here"):
        plain.load(rng=np.random.default_rng(0), num_clients=3)
    backed = registry.create("dataset", "fashion_mnist", {"path": str(empty), "fallback": "digits"})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        data = backed.load(rng=np.random.default_rng(0), num_clients=3)
    assert data.name == "digits (for fashion_mnist)" and data.input_shape == (1, 8, 8)
    assert any("embedded 'digits'" in str(w.message) for w in caught)
