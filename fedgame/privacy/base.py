"""The privacy-mechanism interface, the per-release ``Charge``, and shared clipping.

A mechanism is consulted in three places per round:

* ``plan`` (before training): per-client noise scale, training changes (per-sample clipping
  and per-step noise for DP-SGD style mechanisms) and the ``Charge`` describing each release;
  the model's budget (:mod:`fedgame.privacy.budget`) prices the round's releases with the
  client's accountant and withdraws those that would pass its budget;
* ``privatise`` (after training): clip and noise the trained updates, batched over clients;
* ``finalise`` (the ``FinalisesAggregate`` capability): server-side noise on the aggregate.

A mechanism keeps no per-round state: what a later phase needs is in the frozen plan (the
model adds the round's fault draw to it once the uploads are over,
:meth:`PrivacyPlan.after_upload`), and ``privatise``/``finalise`` may return
``(result, metrics)``, the round metrics they measured (:func:`split_metrics`); the columns
computed from the plan come from ``release_metrics`` (the ``ReportsRelease`` capability).

``next_charges(views)`` describes one more participation at the default level, so clients
can see the price of their next round (``ClientView.epsilon_after_next``) before answering.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload, runtime_checkable

import numpy as np

from fedgame.mechanisms.metrics import split_metrics as split_metrics  # re-exported
from fedgame.views import ClientView, Response, RoundInfo, as_column

if TYPE_CHECKING:
    import dp_accounting as dpa
    import torch

if TYPE_CHECKING:
    from fedgame.mechanisms.base import FaultDraw
    from fedgame.privacy.accountants.base import Accountant

Placement = Literal["none", "local", "central", "distributed"]
NoiseFamily = Literal["none", "gaussian", "subsampled_gaussian", "laplace"]


@dataclass(frozen=True)
class Charge:
    """What one release of a client's update is, described for any accountant.

    ``noise`` names the noise family; ``noise_multiplier`` z is the noise scale over the
    release's sensitivity (Gaussian: σ/Δ₂; Laplace: b/Δ₁); ``sample_rate`` q the Poisson
    sampling rate of each of its ``steps`` noisy steps (``subsampled_gaussian``; 1 otherwise);
    ``delta`` the share of the client's δ the mechanism allotted to this release, which only
    basic composition reads (the per-release (ε, δ) it adds up). ``event()`` gives the release
    as a ``dp_accounting`` DpEvent.
    """

    noise: NoiseFamily = "none"
    noise_multiplier: float = math.inf
    sample_rate: float = 1.0
    steps: int = 1
    delta: float = 0.0

    @property
    def free(self) -> bool:
        return self.noise == "none" or self.steps == 0

    def event(self) -> dpa.DpEvent:
        """The release as a ``dp_accounting`` DpEvent (``NoOpDpEvent`` when free)."""
        return release_event(
            self.noise,
            noise_multiplier=self.noise_multiplier,
            sample_rate=self.sample_rate,
            steps=self.steps,
        )


FREE = Charge()


def release_event(
    noise: str, *, noise_multiplier: float, sample_rate: float = 1.0, steps: int = 1
) -> Any:
    """``steps`` compositions of one noisy step, as a ``dp_accounting`` DpEvent.

    gaussian: ``GaussianDpEvent(z)``; subsampled_gaussian: ``PoissonSampledDpEvent(q,
    GaussianDpEvent(z))``; laplace: ``LaplaceDpEvent(z)`` (scale over L1 sensitivity).
    """
    import dp_accounting as dpa

    if noise == "none" or steps == 0:
        return dpa.NoOpDpEvent()
    if noise == "laplace":
        step: Any = dpa.LaplaceDpEvent(noise_multiplier)
    else:
        step = dpa.GaussianDpEvent(noise_multiplier)
        if noise == "subsampled_gaussian" and sample_rate < 1.0:
            step = dpa.PoissonSampledDpEvent(sample_rate, step)
    return step if steps == 1 else dpa.SelfComposedDpEvent(step, int(steps))


_NOISE_DTYPE = np.dtype(object)  # noise family names (str)
_CHARGE_FIELDS = ("noise", "noise_multiplier", "sample_rate", "steps", "delta")


class Charges(Sequence[Charge]):
    """Several releases as columns, iterable as ``Charge`` objects.

    Mechanisms return this from ``plan`` and ``next_charges``; accountants and the budget work
    on the arrays. ``Charges.of(list)`` converts a list of ``Charge`` objects. The numbers are
    keyword-only (``Charges("gaussian", noise_multiplier=z, delta=d)``): a multiplier cannot be
    passed where a sample rate was meant.
    """

    __slots__ = _CHARGE_FIELDS

    def __init__(
        self,
        noise: str | np.ndarray,
        *,
        noise_multiplier: np.ndarray | float = math.inf,
        sample_rate: np.ndarray | float = 1.0,
        steps: np.ndarray | int = 1,
        delta: np.ndarray | float = 0.0,
        size: int | None = None,
    ) -> None:
        if size is None:
            size = _common_length(noise_multiplier, sample_rate, steps, delta, noise)
        n = size
        self.noise = as_column(noise, n, _NOISE_DTYPE)
        self.noise_multiplier = as_column(noise_multiplier, n, float)
        self.sample_rate = as_column(sample_rate, n, float)
        self.steps = as_column(steps, n, np.int64)
        self.delta = as_column(delta, n, float)

    @classmethod
    def of(cls, charges: Sequence[Charge]) -> Charges:
        if isinstance(charges, Charges):
            return charges
        cols = {f: [getattr(c, f) for c in charges] for f in _CHARGE_FIELDS}
        return cls(
            np.array(cols["noise"], dtype=_NOISE_DTYPE),
            **{f: np.array(cols[f]) for f in _CHARGE_FIELDS[1:]},
            size=len(charges),
        )

    @property
    def free(self) -> np.ndarray:
        return (self.noise == "none") | (self.steps == 0)

    def families(self) -> set[str]:
        """The noise families of the non-free releases here."""
        return set(self.noise[~self.free].tolist())

    def __len__(self) -> int:
        return len(self.noise)

    @overload
    def __getitem__(self, index: int) -> Charge: ...

    @overload
    def __getitem__(self, index: slice | np.ndarray) -> Charges: ...

    def __getitem__(self, index: int | slice | np.ndarray) -> Charge | Charges:
        if isinstance(index, slice | np.ndarray):
            return Charges(
                self.noise[index], **{f: getattr(self, f)[index] for f in _CHARGE_FIELDS[1:]}
            )
        return Charge(
            noise=str(self.noise[index]),  # type: ignore[arg-type]
            noise_multiplier=float(self.noise_multiplier[index]),
            sample_rate=float(self.sample_rate[index]),
            steps=int(self.steps[index]),
            delta=float(self.delta[index]),
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
            noise_multiplier=np.full(n, math.inf),
            sample_rate=np.ones(n),
            steps=np.ones(n, dtype=np.int64),
            delta=np.zeros(n),
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
    clipped gradient (DP-SGD), with ``per_sample_clip`` the per-sample clipping norm;
    ``faults``: the round's fault draw, None until the uploads are over (then the model hands
    ``finalise`` and ``release_metrics`` the plan :meth:`after_upload` returns).
    """

    client_ids: tuple[int, ...]
    charges: Sequence[Charge]
    noise_std: np.ndarray
    clip: float | None = None
    per_sample_clip: float | None = None
    step_noise_std: np.ndarray | None = None
    faults: FaultDraw | None = None

    def after_upload(self, draw: FaultDraw) -> PrivacyPlan:
        """This plan once the uploads are over: the same terms, and the round's fault draw."""
        return replace(self, faults=draw)

    def stragglers(self) -> np.ndarray | None:
        """Mask over ``client_ids`` of the clients whose upload was lost (None: not known)."""
        if self.faults is None:
            return None
        return np.asarray(self.faults.straggler, dtype=bool)[list(self.client_ids)]

    def training_hooks(self) -> dict[str, Any]:
        """Learner keywords this plan asks for (per-sample clipping, per-step noise)."""
        hooks: dict[str, Any] = {}
        if self.per_sample_clip is not None:
            hooks["per_sample_clip"] = self.per_sample_clip
        if self.step_noise_std is not None:
            import torch

            hooks["step_noise_std"] = torch.as_tensor(self.step_noise_std)
        return hooks


@runtime_checkable
class PrivacyMechanism(Protocol):
    """Clip-and-noise applied to the client updates of a round.

    ``noise`` is the family of the releases it emits (what its accountant must be able to
    describe, checked at validation); ``accountant`` the instance that both calibrates its
    noise and, through the model's budget, accounts every release.
    """

    placement: Placement
    noise: NoiseFamily
    #: the levels a response may choose that this mechanism's noise follows (``levels``)
    follows: frozenset[str]
    accountant: Accountant

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """Default per-participation (ε, δ) of each client, given planned participations."""
        ...

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        """What one more participation of each client at its default level would release."""
        ...

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan: ...

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor | tuple[torch.Tensor, Mapping[str, Any]]:
        """The clipped, noised updates, or ``(updates, metrics)`` (:func:`split_metrics`)."""
        ...


@runtime_checkable
class FinalisesAggregate(Protocol):
    """Capability: server-side noise on the aggregate (central mechanisms), after phase 8.

    Returning ``None`` means the round's aggregation failed (e.g. masks not recoverable); it
    may return ``(delta, metrics)`` as ``privatise`` may. ``plan`` knows the round's faults.
    """

    def finalise(
        self,
        delta: torch.Tensor,
        plan: PrivacyPlan,
        *,
        num_received: int,
        generator: torch.Generator,
    ) -> torch.Tensor | tuple[torch.Tensor | None, Mapping[str, Any]] | None: ...


@runtime_checkable
class ReportsRelease(Protocol):
    """Capability: rounds-table ``round_columns`` and clients-table ``client_columns`` computed
    from the round's plan (faults included) when the round is collected, or returned as
    metrics by ``privatise``/``finalise``; rounds without a plan leave them NaN."""

    round_columns: tuple[str, ...]
    client_columns: tuple[str, ...]

    def release_metrics(
        self, plan: PrivacyPlan
    ) -> tuple[Mapping[str, float], Mapping[str, Mapping[int, float]]]: ...


@runtime_checkable
class RecordsReleases(Protocol):
    """Capability: told of every release the budget charged (for closed-form ε columns)."""

    def record_releases(self, client_ids: np.ndarray, charges: Charges) -> None: ...


class PerClientCharges:
    """Mixin: ``next_charges`` from a per-client ``next_charge(view)``."""

    def next_charge(self, client: ClientView) -> Charge:
        raise NotImplementedError

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        return Charges.of([self.next_charge(c) for c in clients])


def clip_rows(
    updates: torch.Tensor, clip: float, *, norm: Literal["l2", "l1"] = "l2"
) -> torch.Tensor:
    """Scale each row u_k to norm at most ``clip``: u_k · min(1, C/‖u_k‖)."""
    import torch

    ord_ = 2 if norm == "l2" else 1
    norms = torch.linalg.vector_norm(updates, ord=ord_, dim=1, keepdim=True)
    return updates * torch.clamp(clip / norms.clamp_min(1e-12), max=1.0)


def gaussian_noise(
    shape: torch.Size, std: np.ndarray, *, like: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """Rows of N(0, std_k² I), one batched draw."""
    import torch

    scale = torch.as_tensor(std, dtype=like.dtype, device=like.device)
    noise = torch.randn(shape, generator=generator, device=like.device, dtype=like.dtype)
    return noise * scale[:, None]
