"""One scenario seed -> independent, named random streams.

``SeedPlan(seed, replicate)`` derives every generator the simulation uses from a numpy
``SeedSequence`` whose spawn key is ``(replicate, stream, *keys)``. Streams are independent of
each other and of the order in which they are requested, so results do not depend on agent
activation order or worker count, and two mechanisms compared in a sweep see the same data,
partition, faults and noise draws (common random numbers).

Stream names in use: ``population``, ``data``, ``partition``, ``topology``, ``selection``,
``faults``, ``training``, ``noise``, ``policy``, ``incentive``, ``masks``, ``mesa``, ``init``,
``economics`` (the deviation search's sample).
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch


def _word(part: str | int) -> int:
    """Stable 32-bit word for a stream name or key (Python's ``hash`` is salted)."""
    if type(part) is int:  # the common cases first (rounds, client ids; stream names)
        if part < 0:
            raise ValueError(f"seed keys must be non-negative, got {part}")
        return part
    if type(part) is str:
        return _name_word(part)
    if isinstance(part, bool | np.bool_):
        part = int(part)
    if isinstance(part, int | np.integer):
        value = int(part)
        if value < 0:
            raise ValueError(f"seed keys must be non-negative, got {value}")
        return value
    return _name_word(str(part))


@functools.lru_cache(maxsize=1024)
def _name_word(name: str) -> int:
    """``_word`` of a stream name: the first 4 bytes of its BLAKE2b digest (cached)."""
    digest = hashlib.blake2b(name.encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little")


@dataclass(frozen=True)
class SeedPlan:
    """Named independent random streams derived from one seed.

    Args:
        seed: the scenario seed (non-negative int).
        replicate: replicate index; replicate ``r`` gets the same streams at every grid point.
    """

    seed: int
    replicate: int = 0

    def sequence(self, stream: str, *keys: str | int) -> np.random.SeedSequence:
        """The ``SeedSequence`` of ``stream`` at ``keys``."""
        spawn_key = (_word(self.replicate), _word(stream), *(_word(k) for k in keys))
        return np.random.SeedSequence(entropy=self.seed, spawn_key=spawn_key)

    def rng(self, stream: str, *keys: str | int) -> np.random.Generator:
        """A numpy ``Generator`` for ``stream`` (e.g. ``plan.rng("noise", round, client)``)."""
        return np.random.Generator(np.random.PCG64(self.sequence(stream, *keys)))

    def seed_int(self, stream: str, *keys: str | int) -> int:
        """A 63-bit integer seed for libraries that want one (Mesa, networkx)."""
        state = self.sequence(stream, *keys).generate_state(2, dtype=np.uint32)
        return int((int(state[0]) << 31) ^ int(state[1])) & ((1 << 63) - 1)

    def torch_generator(
        self, stream: str, *keys: str | int, device: str | torch.device = "cpu"
    ) -> torch.Generator:
        """A ``torch.Generator`` on ``device`` seeded from ``stream``."""
        import torch

        gen = torch.Generator(device=device)
        gen.manual_seed(self.seed_int(stream, *keys))
        return gen
