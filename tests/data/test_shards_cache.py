"""Tests for fedgame.data.shards, the ``sampled`` partition and the parsed-dataset cache."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.data.cache import CACHE_ENV, cache_root, cached_arrays, files_digest
from fedgame.data.quality import label_counts
from fedgame.data.sampled import Sampled
from fedgame.data.shards import ClientShards, as_shards
from fedgame.errors import ScenarioError


@settings(max_examples=30)
@given(st.lists(st.lists(st.integers(0, 49), max_size=6), min_size=1, max_size=12))
def test_shards_read_back_as_the_parts_they_were_built_from(parts):
    arrays = [np.asarray(p, dtype=np.int64) for p in parts]
    shards = ClientShards.from_parts(arrays)
    assert len(shards) == len(arrays)
    assert shards.sizes.tolist() == [len(p) for p in parts]
    for got, want in zip(shards, arrays):
        assert got.tolist() == want.tolist()
    labels = np.arange(50) % 7
    loop = np.array([np.bincount(labels[a], minlength=7) for a in arrays])
    assert (shards.label_counts(labels, 7) == loop).all()
    assert as_shards(shards) is shards


def test_shards_refuse_offsets_that_do_not_cover_flat():
    with pytest.raises(ValueError, match="offsets"):
        ClientShards(np.arange(4), np.array([0, 3]))


def test_sampled_iid_gives_every_client_its_size_from_the_pool():
    labels = np.repeat(np.arange(10), 100)
    shards = Sampled(Sampled.Config(size=16)).split(
        labels, num_clients=5000, rng=np.random.default_rng(0)
    )
    assert len(shards) == 5000
    assert (shards.sizes == 16).all()
    assert shards.flat.min() >= 0 and shards.flat.max() < labels.size
    # draws are uniform over the pool: every sample drawn about 80 times
    hits = np.bincount(shards.flat, minlength=labels.size)
    assert 40 < hits.mean() < 120 and hits.min() > 30


def test_sampled_with_classes_gives_each_client_exactly_that_many_classes():
    labels = np.repeat(np.arange(10), 50)
    shards = Sampled(Sampled.Config(size=8, classes=2)).split(
        labels, num_clients=300, rng=np.random.default_rng(1)
    )
    counts = label_counts(labels, shards, 10)
    assert ((counts > 0).sum(axis=1) == 2).all()
    assert (counts.max(axis=1) == 4).all()  # round-robin: 4 slots per class


def test_sampled_is_reproducible_and_refuses_more_classes_than_the_data_has():
    labels = np.repeat(np.arange(3), 10)
    part = Sampled(Sampled.Config(size=4, classes=2))
    a = part.split(labels, num_clients=20, rng=np.random.default_rng(5))
    b = part.split(labels, num_clients=20, rng=np.random.default_rng(5))
    assert (a.flat == b.flat).all()
    with pytest.raises(ScenarioError, match="classes"):
        Sampled(Sampled.Config(size=4, classes=5)).split(
            labels, num_clients=2, rng=np.random.default_rng(0)
        )


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


def _source(tmp_path: Path, content: bytes) -> Path:
    path = tmp_path / "source.bin"
    path.write_bytes(content)
    return path


def test_cache_parses_once_and_reloads_the_same_arrays(tmp_path, cache_dir):
    source = _source(tmp_path, b"abc")
    calls = []

    def parse():
        calls.append(1)
        return {"x": np.arange(6, dtype=np.float32).reshape(2, 3), "y": np.array([1, 2])}

    first = cached_arrays("demo", [source], parse, version="v1")
    second = cached_arrays("demo", [source], parse, version="v1")
    assert len(calls) == 1
    assert cache_root() == cache_dir
    for name in ("x", "y"):
        assert (first[name] == second[name]).all() and first[name].dtype == second[name].dtype
    entries = [p for p in cache_dir.iterdir()]
    assert len(entries) == 1 and entries[0].name.startswith("demo-")


def test_cache_key_follows_the_file_bytes_and_the_version(tmp_path, cache_dir):
    source = _source(tmp_path, b"abc")
    calls = []

    def parse():
        calls.append(1)
        return {"x": np.array([len(calls)])}

    cached_arrays("demo", [source], parse, version="v1")
    source.write_bytes(b"abd")
    assert cached_arrays("demo", [source], parse, version="v1")["x"][0] == 2
    assert cached_arrays("demo", [source], parse, version="v2")["x"][0] == 3
    assert files_digest([source], salt="v1") != files_digest([source], salt="v2")


def test_cache_off_and_unreadable_entries_are_parsed_again(tmp_path, cache_dir, monkeypatch):
    source = _source(tmp_path, b"abc")
    calls = []

    def parse():
        calls.append(1)
        return {"x": np.array([7])}

    cached_arrays("demo", [source], parse, version="v1")
    (entry,) = list(cache_dir.iterdir())
    (entry / "x.npy").write_bytes(b"not numpy")  # a damaged entry
    assert cached_arrays("demo", [source], parse, version="v1")["x"][0] == 7
    assert len(calls) == 2
    assert cached_arrays("demo", [source], parse, version="v1")["x"][0] == 7
    assert len(calls) == 2  # the entry was replaced by a good one
    monkeypatch.setenv(CACHE_ENV, "off")
    assert cache_root() is None
    cached_arrays("demo", [source], parse, version="v1")
    assert len(calls) == 3


def test_concurrent_writers_leave_one_complete_entry_and_no_temporaries(tmp_path, cache_dir):
    source = _source(tmp_path, os.urandom(1 << 16))
    big = np.arange(200_000, dtype=np.float64)

    def worker(_):
        return cached_arrays("demo", [source], lambda: {"x": big}, version="v1")["x"]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(worker, range(16)))
    assert all((r == big).all() for r in results)
    names = [p.name for p in cache_dir.iterdir()]
    assert len(names) == 1 and not names[0].startswith(".")


def test_an_unwritable_cache_is_skipped(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "cache"))
    source = _source(tmp_path, b"abc")
    assert cached_arrays("demo", [source], lambda: {"x": np.array([3])}, version="v1")["x"][0] == 3
