"""IDX file reader and the ``mnist`` / ``fashion_mnist`` datasets read from a local folder.

Parsed arrays are cached by file hash (:mod:`fedgame.data.cache`), so the files are parsed
once per machine. Nothing is downloaded: the four IDX files (``train-images-idx3-ubyte``,
``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``, each raw
or gzipped) must be in ``Config.path``. Fashion-MNIST defaults to the folder where Debian's
``dataset-fashion-mnist`` package installs it (``/usr/share/datasets/fashion-mnist``).
A missing file raises :class:`~fedgame.errors.ScenarioError` on key ``path``, naming the
files, the folder and how to get them.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import math
import shutil
import subprocess
import warnings
import zlib
from pathlib import Path
from typing import IO, Literal, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

import fedgame.registry as registry
from fedgame.data.cache import cached_arrays
from fedgame.data.datasets import DataFootprint, Dataset, SizedDataset, subsample
from fedgame.errors import ScenarioError
from fedgame.registry import register

IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)
DEBIAN_FASHION_DIRS = ("/usr/share/datasets/fashion-mnist",)
#: largest IDX payload read (MNIST's training images are 47 MB)
MAX_IDX_BYTES = 1 << 31
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def read_idx(path: str | Path) -> np.ndarray:
    """Read one IDX file (raw or ``.gz``) into an array of its stored dtype and shape.

    Reads no more than the header announces (plus one byte, to detect trailing data), so a
    decompression bomb or an endless file costs at most :data:`MAX_IDX_BYTES`.
    """
    path = Path(path)
    try:
        with _open(path) as fh:
            dtype, shape = _read_header(fh, path)
            nbytes = math.prod(shape) * dtype.itemsize
            raw = fh.read(nbytes + 1)
    except (OSError, EOFError, zlib.error) as exc:
        raise ScenarioError("path", str(path), f"cannot be read: {exc}") from None
    if len(raw) < nbytes:
        raise ScenarioError("path", str(path), f"is truncated: header announces shape {shape}")
    if len(raw) > nbytes:
        raise ScenarioError("path", str(path), f"has data beyond the shape {shape} it announces")
    return np.frombuffer(raw, dtype=dtype, count=math.prod(shape)).reshape(shape)


def idx_header(path: str | Path) -> tuple[np.dtype, tuple[int, ...]]:
    """The dtype and shape an IDX file announces (reads only its header)."""
    path = Path(path)
    try:
        with _open(path) as fh:
            return _read_header(fh, path)
    except (OSError, EOFError, zlib.error) as exc:
        raise ScenarioError("path", str(path), f"cannot be read: {exc}") from None


def _open(path: Path) -> IO[bytes]:
    if path.suffix == ".gz":
        return cast(IO[bytes], gzip.GzipFile(path, "rb"))
    return open(path, "rb")


def _read_header(fh: IO[bytes], path: Path) -> tuple[np.dtype, tuple[int, ...]]:
    head = fh.read(4)
    if len(head) < 4 or head[0] != 0 or head[1] != 0 or head[2] not in _IDX_DTYPES:
        raise ScenarioError("path", str(path), "is not an IDX file (bad magic number)")
    ndim = head[3]
    dims = fh.read(4 * ndim)
    if len(dims) < 4 * ndim:
        raise ScenarioError("path", str(path), "is truncated inside its header")
    shape = tuple(int.from_bytes(dims[4 * i : 4 * i + 4], "big") for i in range(ndim))
    dtype = np.dtype(_IDX_DTYPES[head[2]])
    nbytes = math.prod(shape) * dtype.itemsize
    if nbytes > MAX_IDX_BYTES:
        raise ScenarioError(
            "path",
            str(path),
            f"announces shape {shape} ({nbytes} bytes); fedgame reads IDX files of at most "
            f"{MAX_IDX_BYTES} bytes",
        )
    return dtype, shape


def find_idx_files(folder: Path) -> tuple[dict[str, Path], list[str]]:
    """Locate the four IDX files in ``folder``; returns ``(found, missing)`` by base name."""
    found: dict[str, Path] = {}
    missing: list[str] = []
    for name in IDX_FILES:
        dotted = name.replace("-idx", ".idx")
        candidates = [folder / f for f in (name, f"{name}.gz", dotted, f"{dotted}.gz")]
        hit = next((c for c in candidates if c.is_file()), None)
        if hit is None:
            missing.append(name)
        else:
            found[name] = hit
    return found, missing


@functools.lru_cache(maxsize=1)
def debian_fashion_mnist_dir() -> Path | None:
    """Folder holding Debian's ``dataset-fashion-mnist`` files, or ``None`` when not installed."""
    for folder in DEBIAN_FASHION_DIRS:
        if not find_idx_files(Path(folder))[1]:
            return Path(folder)
    dpkg = shutil.which("dpkg")
    if dpkg is None:
        return None
    listing = subprocess.run(
        [dpkg, "-L", "dataset-fashion-mnist"], capture_output=True, text=True, check=False
    )
    for line in listing.stdout.splitlines():
        if line.endswith(f"{IDX_FILES[0]}.gz") or line.endswith(IDX_FILES[0]):
            parent = Path(line).parent
            return parent if not find_idx_files(parent)[1] else None
    return None


class IdxConfig(BaseModel):
    """Parameters shared by the IDX-backed datasets."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    path: str | None = Field(
        None,
        description="folder holding the four IDX files (raw or .gz); unset: the default folder",
    )
    max_train: int | None = Field(
        None, ge=1, description="training images kept (a seeded subsample), >= 1; unset: all"
    )
    max_test: int | None = Field(
        None, ge=1, description="test images kept (a seeded subsample), >= 1; unset: all"
    )
    fallback: Literal["digits", "mnist1d", "synthetic"] | None = Field(
        None, description="dataset loaded (with a warning) when the files are missing; unset: error"
    )


class _IdxDataset:
    """Base of the IDX-backed datasets: locate, read, scale to [0, 1], subsample."""

    name = ""
    how_to_get = ""
    Config = IdxConfig

    def __init__(self, config: IdxConfig) -> None:
        self.config = config

    def default_folder(self) -> Path | None:
        return None

    def folder(self) -> Path:
        """The folder to read from; raises ``ScenarioError`` when it lacks any file."""
        files = ", ".join(f"{n}[.gz]" for n in IDX_FILES)
        if self.config.path is not None:
            folder = Path(self.config.path).expanduser()
        else:
            default = self.default_folder()
            if default is None:
                raise ScenarioError(
                    "path", ..., f"is not set: give a folder holding {files}; {self.how_to_get}"
                )
            folder = default
        missing = find_idx_files(folder)[1]
        if missing:
            raise ScenarioError(
                "path",
                str(folder),
                f"lacks {', '.join(f'{m}[.gz]' for m in missing)} in folder {folder}; "
                f"{self.how_to_get}",
            )
        return folder

    def footprint(self, *, num_clients: int) -> DataFootprint:
        """Sizes from the four files' headers (or the fallback's, when files are missing)."""
        try:
            folder = self.folder()
        except ScenarioError:
            if self.config.fallback is None:
                raise
            fallback = registry.create("dataset", self.config.fallback)
            if not isinstance(fallback, SizedDataset):
                raise
            return fallback.footprint(num_clients=num_clients)
        found, _ = find_idx_files(folder)
        shapes = {name: idx_header(path)[1] for name, path in found.items()}
        sizes, payload = [], 0
        for split, cap in (("train", self.config.max_train), ("t10k", self.config.max_test)):
            images = shapes[f"{split}-images-idx3-ubyte"]
            labels = shapes[f"{split}-labels-idx1-ubyte"]
            _check_pair(folder, split, images, labels)
            sizes.append(min(labels[0], cap) if cap is not None else labels[0])
            payload += math.prod(images) + labels[0]
        pixels = math.prod(shapes["train-images-idx3-ubyte"][1:])
        load = payload + (sizes[0] + sizes[1]) * pixels * 8
        shape = (1, *shapes["train-images-idx3-ubyte"][1:])
        return DataFootprint(sizes[0], sizes[1], shape, 10, load_bytes=load)

    def load(self, *, rng: np.random.Generator, num_clients: int) -> Dataset:
        """Read the IDX files, scale pixels to [0, 1] and apply the ``max_*`` caps.

        When the files are missing and ``fallback`` names an embedded dataset, that dataset
        (default settings) is loaded instead, with a warning; ``Dataset.name`` records it.
        """
        try:
            folder = self.folder()
        except ScenarioError as err:
            if self.config.fallback is None:
                raise
            warnings.warn(
                f"{self.name}: {err}; using the embedded '{self.config.fallback}' dataset instead",
                stacklevel=2,
            )
            data = registry.create("dataset", self.config.fallback).load(
                rng=rng, num_clients=num_clients
            )
            return dataclasses.replace(data, name=f"{self.config.fallback} (for {self.name})")
        found, _ = find_idx_files(folder)
        for path in found.values():
            idx_header(path)  # refuse a file that is not IDX before hashing it for the cache
        arrays = cached_arrays(
            self.name,
            [found[name] for name in IDX_FILES],
            lambda: _parse_idx(folder, found),
            version=PARSED_VERSION,
        )
        parts = []
        for split, cap in (("train", self.config.max_train), ("t10k", self.config.max_test)):
            x, y = arrays[f"x_{split}"], arrays[f"y_{split}"]
            keep = subsample(y.shape[0], cap, rng=rng)
            parts.append((x, y) if keep.size == y.shape[0] else (x[keep], y[keep]))
        (x_train, y_train), (x_test, y_test) = parts
        return Dataset(
            name=self.name,
            x_train=x_train,
            y_train=y_train,
            x_test=x_test,
            y_test=y_test,
            num_classes=10,
            input_shape=tuple(int(d) for d in x_train.shape[1:]),
        )


#: version of :func:`_parse_idx`'s output (part of the cache key; bump when it changes)
PARSED_VERSION = "idx-float32-v1"


def _parse_idx(folder: Path, found: dict[str, Path]) -> dict[str, np.ndarray]:
    """The four IDX files as float32 images ``[n, 1, 28, 28]`` in ``[0, 1]`` and int64 labels."""
    arrays: dict[str, np.ndarray] = {}
    for split in ("train", "t10k"):
        images = read_idx(found[f"{split}-images-idx3-ubyte"])
        labels = read_idx(found[f"{split}-labels-idx1-ubyte"])
        _check_pair(folder, split, images.shape, labels.shape)
        arrays[f"x_{split}"] = (images.astype(np.float32) / 255.0)[:, None, :, :]
        arrays[f"y_{split}"] = labels.astype(np.int64)
    return arrays


def _check_pair(folder: Path, split: str, images: tuple[int, ...], labels: tuple[int, ...]) -> None:
    if len(images) != 3 or len(labels) != 1 or images[0] != labels[0]:
        raise ScenarioError(
            "path", str(folder), f"holds {split} images {images} and labels {labels} that differ"
        )


@register("dataset", "mnist")
class Mnist(_IdxDataset):
    """MNIST handwritten digits (60k/10k, 28x28, 10 classes) from local IDX files in ``path``.

    Pixels are scaled to ``[0, 1]``; samples have shape ``(1, 28, 28)``. ``max_train`` and
    ``max_test`` keep a seeded uniform subsample.
    """

    name = "mnist"
    how_to_get = "download the four MNIST IDX files (raw or .gz) into that folder"


@register("dataset", "fashion_mnist")
class FashionMnist(_IdxDataset):
    """Fashion-MNIST (Xiao et al. 2017; 60k/10k, 28x28, 10 classes) from local IDX files.

    Defaults to Debian's ``dataset-fashion-mnist`` folder. Pixels are scaled to ``[0, 1]``;
    samples have shape ``(1, 28, 28)``. ``max_train``/``max_test`` keep a seeded subsample.
    """

    name = "fashion_mnist"
    how_to_get = (
        "install them with `apt-get install dataset-fashion-mnist` (Debian/Ubuntu) or download "
        "the four Fashion-MNIST IDX files (raw or .gz) into that folder"
    )

    def default_folder(self) -> Path | None:
        return debian_fashion_mnist_dir() or Path(DEBIAN_FASHION_DIRS[0])
