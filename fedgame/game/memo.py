"""A small per-run memory for pure functions of arrays, keyed on the arrays' bytes.

A round asks the same question several times: the leader, the followers and the round check
each need the remaining budgets ρ(ε) and the contest's active set for the same columns, and
between rounds most of them do not change (ν is fixed, budgets move only for the clients
that trained). :class:`ArrayMemo` keeps the last few answers of one pure function; a key is
the exact bytes, dtype and shape of the inputs (plus any scalars), so a hit returns what the
function would compute, bit for bit. Answers are handed out as copies (callers may write into
them). Bounded: at most ``size`` entries, least recently used first out, and inputs of more
than ``MAX_ELEMENTS`` values are not remembered (their keys would cost memory and hashing
time of the order of the computation itself).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable

import numpy as np

#: arrays larger than this are computed every time (key bytes and memory stay bounded)
MAX_ELEMENTS = 250_000


def array_key(*parts: np.ndarray | Hashable) -> tuple[Hashable, ...] | None:
    """Exact key of arrays (dtype, shape and bytes) and hashable values (scalars, frozen
    dataclasses); None (do not remember) when an array has more than ``MAX_ELEMENTS``
    values."""
    key: list[Hashable] = []
    for part in parts:
        if isinstance(part, np.ndarray):
            if part.size > MAX_ELEMENTS:
                return None
            key.append((part.dtype.str, part.shape, part.tobytes()))
        else:
            key.append(part)
    return tuple(key)


class ArrayMemo:
    """The last ``size`` results of one pure array function (module doc)."""

    def __init__(self, size: int = 4) -> None:
        self.size = size
        self._store: OrderedDict[tuple[Hashable, ...], np.ndarray] = OrderedDict()

    def get(
        self, key: tuple[Hashable, ...] | None, compute: Callable[[], np.ndarray]
    ) -> np.ndarray:
        """A copy of the result stored under ``key``, computing (and storing) it when new
        (``key`` None: computed, not stored)."""
        if key is None:
            return compute()
        found = self._store.get(key)
        if found is None:
            found = compute()
            self._store[key] = found
            if len(self._store) > self.size:
                self._store.popitem(last=False)
        else:  # most recently used last (pop with a default: no error if another thread evicted it)
            self._store[key] = self._store.pop(key, found)
        return found.copy()
