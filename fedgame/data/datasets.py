"""The ``Dataset`` container, split helpers and the bundled ``digits`` dataset.

Every dataset plug-in (family ``"dataset"``) has a nested pydantic ``Config`` and a method
``load(*, rng, num_clients) -> Dataset``. All randomness (train/test split, subsampling,
procedural generation) comes from the ``rng`` passed in, so a dataset is a pure function of its
config and the ``data`` stream of the :class:`~fedgame.seeding.SeedPlan`.

Feature scaling conventions: image pixels are scaled to ``[0, 1]`` (``digits``, ``mnist``,
``fashion_mnist``); procedural data is left on its natural scale (``synthetic``) or
standardised over the whole dataset (``mnist1d``, as in the original generator).

Other loaders live in :mod:`fedgame.data.idx` (MNIST, Fashion-MNIST),
:mod:`fedgame.data.synthetic` (FedProx Synthetic) and :mod:`fedgame.data.mnist1d`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fedgame.registry import register


@dataclass(frozen=True, eq=False)
class Dataset:
    """A classification dataset held in memory.

    Attributes:
        name: registry name of the dataset.
        x_train: float32 features, shape ``[n_train, *input_shape]``.
        y_train: int64 labels in ``[0, num_classes)``, shape ``[n_train]``.
        x_test: float32 features, shape ``[n_test, *input_shape]``.
        y_test: int64 labels, shape ``[n_test]``.
        num_classes: number of classes.
        input_shape: shape of one sample (``(1, 28, 28)`` for MNIST, ``(40,)`` for MNIST-1D).
        groups: for datasets federated by construction, the generating client/group id of each
            training sample (shape ``[n_train]``, int64); ``None`` otherwise.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    input_shape: tuple[int, ...]
    groups: np.ndarray | None = None

    def __post_init__(self) -> None:
        for split, x, y in (
            ("train", self.x_train, self.y_train),
            ("test", self.x_test, self.y_test),
        ):
            if x.dtype != np.float32 or y.dtype != np.int64:
                raise TypeError(f"{self.name} {split}: need float32 x and int64 y")
            if x.shape[1:] != tuple(self.input_shape) or x.shape[0] != y.shape[0] or y.ndim != 1:
                raise ValueError(f"{self.name} {split}: x {x.shape} and y {y.shape} disagree")
            if y.size and (y.min() < 0 or y.max() >= self.num_classes):
                raise ValueError(f"{self.name} {split}: labels outside [0, {self.num_classes})")
        if self.groups is not None and self.groups.shape != self.y_train.shape:
            raise ValueError(f"{self.name}: groups shape {self.groups.shape} != y_train shape")

    @property
    def num_train(self) -> int:
        """Number of training samples."""
        return int(self.y_train.shape[0])

    @property
    def num_test(self) -> int:
        """Number of test samples."""
        return int(self.y_test.shape[0])


@dataclass(frozen=True)
class DataFootprint:
    """What a dataset holds once loaded, known without loading it (for the preflight checks).

    Attributes:
        num_train: training samples (exact when ``exact``, else an estimate).
        num_test: test samples.
        input_shape: shape of one sample.
        num_classes: number of classes.
        load_bytes: peak host memory while loading, before the learner takes the arrays.
        exact: whether ``num_train`` is exact (random sizes make it an expectation).
    """

    num_train: int
    num_test: int
    input_shape: tuple[int, ...]
    num_classes: int
    load_bytes: int
    exact: bool = True

    @property
    def resident_bytes(self) -> int:
        """Memory of the loaded arrays: float32 features and int64 labels."""
        return (self.num_train + self.num_test) * (4 * math.prod(self.input_shape) + 8)


class DatasetSource(Protocol):
    """A dataset plug-in: ``load`` gives the train and test arrays (the ``data`` stream)."""

    def load(self, *, rng: np.random.Generator, num_clients: int) -> Dataset: ...


@runtime_checkable
class SizedDataset(Protocol):
    """Optional capability of a dataset plug-in: its :class:`DataFootprint` without loading.

    ``footprint`` checks what can be checked cheaply (files present, headers readable) and
    raises ``ScenarioError`` on the plug-in's own keys when the data cannot be loaded.
    """

    def footprint(self, *, num_clients: int) -> DataFootprint: ...


def split_sizes(
    class_counts: Sequence[int] | np.ndarray, *, test_fraction: float
) -> tuple[int, int]:
    """``(train, test)`` sizes that :func:`stratified_split` gives for these class counts."""
    counts = np.asarray(class_counts, dtype=np.int64)
    test = sum(min(round(test_fraction * int(n)), max(int(n) - 1, 0)) for n in counts)
    return int(counts.sum()) - test, test


def stratified_split(
    labels: np.ndarray, *, test_fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified train/test split.

    Each class puts ``round(test_fraction * n_c)`` of its samples, chosen with ``rng``, in the
    test set, keeping at least one in the training set when ``n_c > 1``.

    Returns:
        Sorted int64 index arrays ``(train, test)`` covering every sample exactly once.
    """
    test: list[np.ndarray] = []
    for c in np.unique(labels):
        idx = np.flatnonzero(labels == c)
        k = min(round(test_fraction * idx.size), max(idx.size - 1, 0))
        test.append(rng.permutation(idx)[:k])
    test_idx = np.sort(np.concatenate(test)).astype(np.int64) if test else np.empty(0, np.int64)
    mask = np.ones(labels.shape[0], dtype=bool)
    mask[test_idx] = False
    return np.flatnonzero(mask).astype(np.int64), test_idx


def subsample(n: int, cap: int | None, *, rng: np.random.Generator) -> np.ndarray:
    """Sorted indices of a seeded uniform subsample of ``min(n, cap)`` out of ``n`` items."""
    if cap is None or cap >= n:
        return np.arange(n, dtype=np.int64)
    return np.sort(rng.choice(n, size=cap, replace=False)).astype(np.int64)


@register("dataset", "digits")
class Digits:
    """scikit-learn's bundled 8x8 handwritten digits (1,797 images, 10 classes, no download).

    Pixels (0-16) are scaled to ``[0, 1]``; samples have shape ``(1, 8, 8)``. The train/test
    split is stratified and drawn from ``rng``.
    """

    class Config(BaseModel):
        """Parameters of ``digits``."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        test_fraction: float = Field(
            0.2,
            gt=0.0,
            lt=1.0,
            description="share of the 1,797 images held out for testing, in (0, 1)",
        )

    def __init__(self, config: Config) -> None:
        self.config = config

    #: images per class in scikit-learn's bundled copy (fixed; checked against it in tests)
    CLASS_COUNTS = (178, 182, 177, 183, 181, 182, 181, 179, 174, 180)

    def footprint(self, *, num_clients: int) -> DataFootprint:
        """1,797 images of 8x8 split as :func:`stratified_split` splits them."""
        train, test = split_sizes(self.CLASS_COUNTS, test_fraction=self.config.test_fraction)
        return DataFootprint(train, test, (1, 8, 8), 10, load_bytes=8 << 20)

    def load(self, *, rng: np.random.Generator, num_clients: int) -> Dataset:
        """Load the digits (parsed once, then from the cache) and split them."""
        arrays = _digits_arrays()
        x, y = arrays["x"], arrays["y"]
        train, test = stratified_split(y, test_fraction=self.config.test_fraction, rng=rng)
        return Dataset(
            name="digits",
            x_train=x[train],
            y_train=y[train],
            x_test=x[test],
            y_test=y[test],
            num_classes=10,
            input_shape=(1, 8, 8),
        )


def _parse_digits() -> dict[str, np.ndarray]:
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return {
        "x": (np.asarray(bunch.images, dtype=np.float32) / 16.0)[:, None, :, :],
        "y": np.asarray(bunch.target, dtype=np.int64),
    }


def _digits_arrays() -> dict[str, np.ndarray]:
    """The digits as float32 ``[1797, 1, 8, 8]`` in ``[0, 1]`` and int64 labels.

    Cached by the hash of scikit-learn's ``digits.csv.gz`` (found without importing
    scikit-learn, whose import alone takes over a second).
    """
    import importlib.util

    from fedgame.data.cache import cached_arrays

    spec = importlib.util.find_spec("sklearn")
    places = spec.submodule_search_locations if spec is not None else None
    source = Path(places[0]) / "datasets" / "data" / "digits.csv.gz" if places else None
    if source is None or not source.is_file():
        return _parse_digits()
    return cached_arrays("digits", [source], _parse_digits, version="digits-float32-v1")
