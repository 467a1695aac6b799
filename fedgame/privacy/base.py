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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, overload

import numpy as np
import torch

from fedgame.views import ClientView, Response, RoundInfo, as_column

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

_NOISE_DTYPE = np.dtype(object)  # noise family names (str)
_CHARGE_FIELDS = ("noise", "epsilon", "delta", "noise_multiplier", "sample_rate", "steps", "rho")


class Charges(Sequence[Charge]):
    """The charges of several releases as columns, iterable as ``Charge`` objects.

    Mechanisms that price many clients at once return this (``plan``, ``next_charges``);
    the ledger and the budget guard then work on the arrays. ``Charges.of(list)`` converts
    a list of ``Charge`` objects; ``charge_columns`` accepts either.
    """

    __slots__ = _CHARGE_FIELDS

    def __init__(
        self,
        noise: str | np.ndarray,
        epsilon: np.ndarray | float = 0.0,
        delta: np.ndarray | float = 0.0,
        noise_multiplier: np.ndarray | float = math.inf,
        sample_rate: np.ndarray | float = 1.0,
        steps: np.ndarray | int = 1,
        rho: np.ndarray | float = 0.0,
        *,
        size: int | None = None,
    ) -> None:
        if size is None:
            size = _common_length(epsilon, delta, noise_multiplier, sample_rate, steps, rho, noise)
        n = size
        self.noise = as_column(noise, n, _NOISE_DTYPE)
        self.epsilon = as_column(epsilon, n, float)
        self.delta = as_column(delta, n, float)
        self.noise_multiplier = as_column(noise_multiplier, n, float)
        self.sample_rate = as_column(sample_rate, n, float)
        self.steps = as_column(steps, n, np.int64)
        self.rho = as_column(rho, n, float)

    @classmethod
    def of(cls, charges: Sequence[Charge]) -> Charges:
        if isinstance(charges, Charges):
            return charges
        cols = {f: [getattr(c, f) for c in charges] for f in _CHARGE_FIELDS}
        return cls(
            np.array(cols["noise"], dtype=_NOISE_DTYPE),
            *(np.array(cols[f]) for f in _CHARGE_FIELDS[1:]),
            size=len(charges),
        )

    @property
    def free(self) -> np.ndarray:
        return self.noise == "none"

    def same_as(self, other: Charges, rows: np.ndarray | None = None) -> np.ndarray:
        """Element-wise equality with ``other`` (or its ``rows``), as ``Charge.__eq__``."""
        same = np.ones(len(self), dtype=bool)
        for f in _CHARGE_FIELDS:
            theirs = getattr(other, f)
            same &= getattr(self, f) == (theirs if rows is None else theirs[rows])
        return same

    def __len__(self) -> int:
        return len(self.noise)

    @overload
    def __getitem__(self, index: int) -> Charge: ...

    @overload
    def __getitem__(self, index: slice | np.ndarray) -> Charges: ...

    def __getitem__(self, index: int | slice | np.ndarray) -> Charge | Charges:
        if isinstance(index, slice | np.ndarray):
            return Charges(*(getattr(self, f)[index] for f in _CHARGE_FIELDS))
        return Charge(
            noise=str(self.noise[index]),  # type: ignore[arg-type]
            epsilon=float(self.epsilon[index]),
            delta=float(self.delta[index]),
            noise_multiplier=float(self.noise_multiplier[index]),
            sample_rate=float(self.sample_rate[index]),
            steps=int(self.steps[index]),
            rho=float(self.rho[index]),
        )

    def __iter__(self) -> Iterator[Charge]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        return f"Charges({len(self)} releases)"

    def assign(self, index: np.ndarray, other: Charges) -> None:
        """Overwrite rows ``index`` with ``other`` (the columns must be writable)."""
        for f in _CHARGE_FIELDS:
            getattr(self, f)[index] = getattr(other, f)

    @classmethod
    def empty(cls, n: int) -> Charges:
        """``n`` writable rows of the free charge."""
        return cls(
            np.full(n, "none", dtype=_NOISE_DTYPE),
            np.zeros(n),
            np.zeros(n),
            np.full(n, math.inf),
            np.ones(n),
            np.ones(n, dtype=np.int64),
            np.zeros(n),
        )


def _common_length(*values: Any) -> int:
    """Length of the array-valued arguments (1 when all are scalars)."""
    for value in values:
        if isinstance(value, np.ndarray) and value.ndim:
            return len(value)
    return max((np.asarray(v).size for v in values if np.ndim(v)), default=1)


def charge_columns(charges: Sequence[Charge]) -> Charges:
    """``charges`` as columns (no copy when it already is a ``Charges``)."""
    return Charges.of(charges)


@dataclass(frozen=True)
class PrivacyPlan:
    """Per-client privacy terms of one round, aligned with ``client_ids``.

    ``noise_std``: std of the Gaussian (or scale of the Laplace) noise added to each client's
    clipped update; ``step_noise_std``: std of noise added to each local step's averaged
    clipped gradient (DP-SGD), with ``per_sample_clip`` the per-sample clipping norm.
    """

    client_ids: tuple[int, ...]
    charges: Sequence[Charge]
    noise_std: np.ndarray
    clip: float | None = None
    per_sample_clip: float | None = None
    step_noise_std: np.ndarray | None = None

    @property
    def epsilon(self) -> np.ndarray:
        return np.array(charge_columns(self.charges).epsilon, dtype=float)


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
