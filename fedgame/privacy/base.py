"""The privacy-mechanism interface, the per-release ``Charge``, and shared clipping.

A mechanism is consulted in three places per round:

* ``plan`` (before training): per-client noise scale, training changes (per-sample clipping
  and per-step noise for DP-SGD style mechanisms) and the ``Charge`` each release costs;
* ``privatise`` (after training): clip and noise the trained updates, batched over clients;
* ``finalise`` (optional, after aggregation): server-side noise for central mechanisms.

``next_charge(view)`` says what one more participation at the default level would cost, so
clients (and the budget check) can decline before they would overspend.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import torch

from fedgame.views import ClientView, Response, RoundInfo

Placement = Literal["none", "local", "central", "distributed"]
NoiseFamily = Literal["none", "gaussian", "subsampled_gaussian", "laplace"]


@dataclass(frozen=True)
class Charge:
    """What one released update costs, in every accountant's currency.

    ``epsilon``/``delta``: the per-release (ε, δ) for basic composition; ``noise_multiplier``
    z = σ/Δ with ``sample_rate`` and ``steps`` for RDP/PLD; ``rho`` for zCDP (0 → derived
    from z as steps/(2z²)). ``noise`` names the noise family.
    """

    noise: NoiseFamily = "none"
    epsilon: float = 0.0
    delta: float = 0.0
    noise_multiplier: float = math.inf
    sample_rate: float = 1.0
    steps: int = 1
    rho: float = 0.0

    @property
    def free(self) -> bool:
        return self.noise == "none"


FREE = Charge()


@dataclass(frozen=True)
class PrivacyPlan:
    """Per-client privacy terms of one round, aligned with ``client_ids``.

    ``noise_std``: std of the Gaussian (or scale of the Laplace) noise added to each client's
    clipped update; ``step_noise_std``: std of noise added to each local step's averaged
    clipped gradient (DP-SGD), with ``per_sample_clip`` the per-sample clipping norm.
    """

    client_ids: tuple[int, ...]
    charges: tuple[Charge, ...]
    noise_std: np.ndarray
    clip: float | None = None
    per_sample_clip: float | None = None
    step_noise_std: np.ndarray | None = None

    @property
    def epsilon(self) -> np.ndarray:
        return np.array([c.epsilon for c in self.charges], dtype=float)


class PrivacyMechanism(Protocol):
    """Clip-and-noise applied to the client updates of a round."""

    placement: Placement
    noise: NoiseFamily
    accountant: str

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Default per-participation (ε, δ) of each client, given planned participations."""
        ...

    def next_charge(self, client: ClientView) -> Charge:
        """Cost of one more participation of ``client`` at its default level."""
        ...

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan: ...

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor: ...


def clip_rows(
    updates: torch.Tensor, clip: float, *, norm: Literal["l2", "l1"] = "l2"
) -> torch.Tensor:
    """Scale each row u_k to norm at most ``clip``: u_k · min(1, C/‖u_k‖)."""
    ord_ = 2 if norm == "l2" else 1
    norms = torch.linalg.vector_norm(updates, ord=ord_, dim=1, keepdim=True)
    return updates * torch.clamp(clip / norms.clamp_min(1e-12), max=1.0)


def gaussian_noise(
    shape: torch.Size, std: np.ndarray, *, like: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """Rows of N(0, std_k² I), one batched draw."""
    scale = torch.as_tensor(std, dtype=like.dtype, device=like.device)
    noise = torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)
    return noise * scale[:, None]
