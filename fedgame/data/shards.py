"""``ClientShards``: every client's sample indices in one flat array (compressed rows).

A partition hands out one index array per client. At a million clients a Python list of a
million small arrays costs about 100 bytes of bookkeeping per client and a Python loop
wherever it is read; ``ClientShards`` keeps the same content as two arrays, ``flat`` (all
indices, client after client) and ``offsets`` (client ``i`` owns ``flat[offsets[i]:
offsets[i + 1]]``), and still reads as a sequence of arrays (``shards[i]`` is a view).
Everything that reads partitions (label counts, the learner's index table) accepts either.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import overload

import numpy as np

#: clients per block when label counts are computed (bounds the temporaries)
_BLOCK = 1 << 16


class ClientShards(Sequence[np.ndarray]):
    """Sample indices of ``N`` clients as ``flat`` and ``offsets`` (``[N + 1]``, from 0).

    Args:
        flat: int64 sample indices, client 0's first, then client 1's, ...
        offsets: ``[N + 1]`` non-decreasing, ``offsets[0] == 0``, ``offsets[-1] == len(flat)``.
    """

    __slots__ = ("flat", "offsets")

    def __init__(self, flat: np.ndarray, offsets: np.ndarray) -> None:
        self.flat = np.asarray(flat, dtype=np.int64).reshape(-1)
        self.offsets = np.asarray(offsets, dtype=np.int64).reshape(-1)
        if (
            self.offsets.size == 0
            or self.offsets[0] != 0
            or self.offsets[-1] != self.flat.size
            or np.any(np.diff(self.offsets) < 0)
        ):
            raise ValueError("offsets must rise from 0 to len(flat)")

    @classmethod
    def from_parts(cls, parts: Sequence[np.ndarray]) -> ClientShards:
        """The shards of a list of per-client index arrays (returned as is when it is one)."""
        if isinstance(parts, ClientShards):
            return parts
        sizes = np.fromiter((len(p) for p in parts), np.int64, len(parts))
        offsets = np.zeros(len(parts) + 1, dtype=np.int64)
        np.cumsum(sizes, out=offsets[1:])
        flat = (
            np.concatenate([np.asarray(p, dtype=np.int64).reshape(-1) for p in parts])
            if len(parts)
            else np.zeros(0, dtype=np.int64)
        )
        return cls(flat, offsets)

    @classmethod
    def from_matrix(cls, rows: np.ndarray) -> ClientShards:
        """Shards of equal size: row ``i`` of ``rows`` (``[N, size]``) is client ``i``'s."""
        rows = np.asarray(rows, dtype=np.int64)
        n, size = rows.shape
        return cls(rows.reshape(-1), np.arange(n + 1, dtype=np.int64) * size)

    @property
    def sizes(self) -> np.ndarray:
        """Samples per client ``[N]``."""
        return np.diff(self.offsets)

    def owners(self, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """The client of every entry of ``flat`` for clients ``lo..hi-1`` (client ids)."""
        hi = len(self) if hi is None else hi
        return np.repeat(np.arange(lo, hi, dtype=np.int64), self.sizes[lo:hi])

    def label_counts(self, labels: np.ndarray, num_classes: int) -> np.ndarray:
        """``[N, C]`` label histograms: ``counts[i, j]`` samples of class ``j`` of client ``i``.

        Computed a block of clients at a time with one ``bincount`` per block, so the
        temporaries stay bounded at any population size.
        """
        n = len(self)
        counts = np.zeros((n, num_classes), dtype=np.int64)
        labels = np.asarray(labels)
        for lo in range(0, n, _BLOCK):
            hi = min(lo + _BLOCK, n)
            start, stop = self.offsets[lo], self.offsets[hi]
            rows = np.repeat(np.arange(hi - lo, dtype=np.int64), self.sizes[lo:hi])
            picked = labels[self.flat[start:stop]]
            inside = (picked >= 0) & (picked < num_classes)  # other labels are not counted
            keys = rows[inside] * num_classes + picked[inside]
            block = np.bincount(keys, minlength=(hi - lo) * num_classes)
            counts[lo:hi] = block[: (hi - lo) * num_classes].reshape(hi - lo, num_classes)
        return counts

    def __len__(self) -> int:
        return self.offsets.size - 1

    @overload
    def __getitem__(self, index: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[np.ndarray]: ...

    def __getitem__(self, index: int | slice) -> np.ndarray | Sequence[np.ndarray]:
        """Client ``index``'s indices (a read-only view of ``flat``), or a list for a slice."""
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        i = int(index)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"client {index} of {len(self)}")
        view = self.flat[self.offsets[i] : self.offsets[i + 1]]
        view.flags.writeable = False
        return view

    def __iter__(self) -> Iterator[np.ndarray]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"ClientShards({len(self)} clients, {self.flat.size} indices)"


def as_shards(parts: Sequence[np.ndarray]) -> ClientShards:
    """``parts`` as :class:`ClientShards` (no copy when it already is)."""
    return ClientShards.from_parts(parts)
