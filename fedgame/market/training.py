"""Local training of every federation's selected clients in a round: one function.

Today each server has its own :class:`~fedgame.learning.batched.BatchedLearner` (its own global
model), so this trains each server's clients in one batched computation per server, in
turn. It is the one place the market trains: a learner that batches several global models
at once (clients of different servers in one computation, grouped by architecture) replaces
the loop here without touching the market's model.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch


@dataclass(frozen=True)
class TrainingJob:
    """One server's training in a round: its learner, the client ids it trains, the round
    index, its own random stream and its privacy plan's training hooks."""

    learner: Any
    ids: np.ndarray
    round_index: int
    generator: torch.Generator
    hooks: dict[str, Any]


def train_federations(jobs: Sequence[TrainingJob | None]) -> list[Any]:
    """Each job's ``LocalResult`` (None for a server that trains nobody this round)."""
    out: list[Any] = []
    for job in jobs:
        if job is None or len(job.ids) == 0:
            out.append(None)
            continue
        out.append(
            job.learner.train(
                job.ids, round_index=job.round_index, generator=job.generator, **job.hooks
            )
        )
    return out
