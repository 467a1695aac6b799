"""A small per-run memory for pure functions of arrays, keyed on the arrays' bits.

A round asks the same question several times: the leader, the followers and the round check
each need the remaining budgets ρ(ε) and the contest's active set for the same columns, and
between rounds most of them do not change (ν is fixed, budgets move only for the clients
that trained). :class:`ArrayMemo` keeps the last few answers of one pure function; a key
matches when every array has the same dtype, shape and bits and every other part (scalars,
frozen dataclasses) is equal, so a hit returns what the function would compute, bit for bit.

Keys are compared, not hashed: a lookup is one vectorised comparison per remembered entry
(the memory holds a handful), where hashing the bytes of a 100,000-value column costs a
copy and a pass of SipHash each time. A stored key keeps copies of its arrays, so a caller
that later writes into its inputs cannot change what is remembered. Answers are handed out
as copies (callers may write into them). Bounded: at most ``size`` entries, least recently
used first out, and inputs of more than ``MAX_ELEMENTS`` values are not remembered (their
keys would cost memory and comparison time of the order of the computation itself).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import numpy as np

#: arrays larger than this are computed every time (key memory and comparisons stay bounded)
MAX_ELEMENTS = 250_000

#: unsigned integer type of each item size: two arrays of one dtype have the same bits
#: exactly when their items, read as these, are equal (NaN payloads and −0.0 included)
_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


@dataclass(frozen=True, eq=False)
class MemoKey:
    """The inputs of one call: arrays (compared by dtype, shape and bits) and hashable
    values (compared with ``==``)."""

    parts: tuple[np.ndarray | Hashable, ...]

    def matches(self, other: MemoKey) -> bool:
        """Whether ``other`` holds the same inputs (module doc)."""
        if len(self.parts) != len(other.parts):
            return False
        return all(_same(a, b) for a, b in zip(self.parts, other.parts, strict=True))

    def stored(self) -> MemoKey:
        """This key with its arrays copied (what the memory keeps)."""
        return MemoKey(tuple(p.copy() if isinstance(p, np.ndarray) else p for p in self.parts))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MemoKey) and self.matches(other)

    __hash__ = None  # type: ignore[assignment]  # compared, never hashed


def _same(a: object, b: object) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        if not (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)):
            return False
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        bits = _BITS.get(a.dtype.itemsize)
        if bits is None:  # e.g. complex256: compare raw bytes
            return a.tobytes() == b.tobytes()
        return bool(np.array_equal(_as_bits(a, bits), _as_bits(b, bits)))
    return type(a) is type(b) and bool(a == b)


def _as_bits(a: np.ndarray, bits: type) -> np.ndarray:
    return np.ascontiguousarray(a).view(bits)


def array_key(*parts: np.ndarray | Hashable) -> MemoKey | None:
    """Key of arrays (dtype, shape and bits) and hashable values (scalars, frozen
    dataclasses); None (do not remember) when an array has more than ``MAX_ELEMENTS``
    values or holds Python objects."""
    for part in parts:
        if isinstance(part, np.ndarray) and (part.size > MAX_ELEMENTS or part.dtype.hasobject):
            return None
    return MemoKey(parts)


class ArrayMemo:
    """The last ``size`` results of one pure array function (module doc). Safe to share
    between threads (one lock around each lookup and store)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._store: list[tuple[MemoKey, np.ndarray]] = []  # most recently used last
        self._lock = threading.Lock()

    def get(self, key: MemoKey | None, compute: Callable[[], np.ndarray]) -> np.ndarray:
        """A copy of the result stored under ``key``, computing (and storing) it when new
        (``key`` None: computed, not stored)."""
        if key is None:
            return compute()
        with self._lock:
            for position in range(len(self._store) - 1, -1, -1):
                stored, found = self._store[position]
                if stored.matches(key):
                    self._store.append(self._store.pop(position))
                    return found.copy()
        found = compute()
        with self._lock:
            self._store.append((key.stored(), found))
            del self._store[: max(len(self._store) - self.size, 0)]
        return found.copy()
