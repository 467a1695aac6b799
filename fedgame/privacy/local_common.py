"""Helpers shared by the local mechanisms: sensitivities, training settings, release tallies.

Local mechanisms privatise either the client's whole update (``level="update"``: the update
is clipped to norm C, sensitivity C for add/remove-one and 2C for replace-one) or, in FedSGD
mode, every per-sample gradient (``level="sample"``: the learner clips each per-sample
gradient to C, and the released update ``-eta * mean`` has sensitivity ``2 eta C / D_n`` for
replace-one, paper 000 Lemma 1/2).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from fedgame.errors import ScenarioError
from fedgame.learning.settings import TrainingSettings
from fedgame.views import SetupContext


def adjacency_factor(adjacency: str) -> float:
    """2 for replace-one neighbours (both terms may change), 1 for add/remove-one."""
    return 2.0 if adjacency == "replace" else 1.0


def sample_sensitivity(
    *, clip: float, lr: float, dataset_sizes: np.ndarray, factor: float
) -> np.ndarray:
    """Sensitivity ``factor * eta * C / D_n`` of a FedSGD update (paper 000, Lemma 1 / 2).

    With ``factor=2`` (replace-one) this is the paper's ``2 eta B / D_n``; an empty client is
    treated as holding one sample.
    """
    sizes = np.maximum(np.asarray(dataset_sizes, dtype=float), 1.0)
    return factor * lr * clip / sizes


def check_sample_level(scenario: Any, *, key: str, norm: str) -> None:
    """Per-sample privatisation needs FedSGD (one full-batch step) and the matching clip norm."""
    training = scenario.training
    if training.mode != "fedsgd":
        raise ScenarioError(
            f"{key}.level", "sample", "needs training.mode: fedsgd (one full-batch step per round)"
        )
    if training.clip_norm != norm:
        raise ScenarioError(
            "training.clip_norm", training.clip_norm, f"must be {norm!r} for this mechanism"
        )


def training_from(ctx: SetupContext) -> TrainingSettings:
    """The run's training settings, read from the learner the model hands to ``prepare``."""
    settings = getattr(ctx.components.get("learner"), "settings", None)
    if settings is None:
        raise RuntimeError("prepare() needs ctx.components['learner'] (the batched learner)")
    return settings


def effective_epsilon(responses: Sequence[Any], defaults: Sequence[float]) -> np.ndarray:
    """Per-round ε: a response's own ``epsilon`` when given, else the client's default."""
    return np.array(
        [r.epsilon if math.isfinite(r.epsilon) else d for r, d in zip(responses, defaults)],
        dtype=float,
    )


class ReleaseTally:
    """Per-client running sums over released updates (for closed-form ε columns).

    ``add(cid, eps=..., inv_z2=...)`` accumulates basic-composition ε and ``sum 1/z^2`` (the
    quantity the moments-accountant style closed forms grow with); ``count`` the releases.
    """

    def __init__(self) -> None:
        self.eps: dict[int, float] = {}
        self.inv_z2: dict[int, float] = {}
        self.count: dict[int, int] = {}

    def reset(self, client_ids: Sequence[int]) -> None:
        for cid in client_ids:
            self.eps[cid], self.inv_z2[cid], self.count[cid] = 0.0, 0.0, 0

    def add(self, cid: int, *, eps: float, noise_multiplier: float) -> None:
        self.eps[cid] = self.eps.get(cid, 0.0) + eps
        self.inv_z2[cid] = self.inv_z2.get(cid, 0.0) + 1.0 / noise_multiplier**2
        self.count[cid] = self.count.get(cid, 0) + 1
