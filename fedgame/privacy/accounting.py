"""Per-client privacy accountants (plug-in family ``"accountant"``).

Each client has one accountant, stepped with the noise it actually released. A client that
straggled before uploading or was not selected released nothing and is not charged. A charge
still applies whenever noised output left the client, even if it never reached the server
(an upload sent but dropped by a failed link or discarded as late): the mechanism ran and the
privacy loss happened. Pairwise masks (secure aggregation) do not change a client's charge.

Accountants: ``rdp`` (Rényi DP of the Poisson-subsampled Gaussian, from Google's
``dp_accounting``; the scalable default, backed by :class:`BatchRdpLedger`), ``pld``
(``dp_accounting`` privacy loss distributions: tighter, slower), ``zcdp`` (rho adds up) and
``basic`` ((epsilon, delta) add up: Laplace and the classic Gaussian).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any, ClassVar, Protocol, cast, runtime_checkable

import numpy as np
from dp_accounting.pld import privacy_loss_distribution as pld_lib
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fedgame.errors import ScenarioError
from fedgame.privacy.calibrate import zcdp_to_epsilon
from fedgame.privacy.rdp_ledger import EXCEED_RTOL, BatchRdpLedger, check_step, rdp_to_epsilon
from fedgame.registry import EmptyConfig, entry, names, register

MECHANISMS = frozenset({"gaussian", "subsampled_gaussian", "laplace"})


@runtime_checkable
class Accountant(Protocol):
    """One client's privacy ledger (ARCHITECTURE §4)."""

    mechanisms: ClassVar[frozenset[str]]

    def step(self, *, noise_multiplier: float, sample_rate: float = 1.0, steps: int = 1) -> None:
        """Charge ``steps`` releases of a Gaussian/Laplace with ``noise_multiplier``."""
        ...

    def epsilon(self, *, delta: float) -> float:
        """Epsilon spent so far at ``delta``."""
        ...


class _Base:
    """Shared helpers: mechanism support and the budget test built on ``epsilon_if``."""

    mechanisms: ClassVar[frozenset[str]] = frozenset()

    @classmethod
    def supports(cls, mechanism: str) -> bool:
        """Whether this accountant can account for ``mechanism`` (a noise family name)."""
        return mechanism in cls.mechanisms

    def epsilon_if(self, *args: Any, **charge: Any) -> float:
        # Subclasses take ``delta`` plus their own charge keywords (any override type-checks).
        raise NotImplementedError

    def would_exceed(self, *, epsilon_total: float, delta: float, **charge: Any) -> bool:
        """Whether one more charge (same keywords as ``epsilon_if``) exceeds ``epsilon_total``.

        Does not mutate the accountant. A relative slack of ``EXCEED_RTOL`` absorbs float
        round-off, so ``T_n`` charges of ``epsilon_total / T_n`` fit exactly.
        """
        spent = self.epsilon_if(delta=delta, **charge)
        return spent > epsilon_total * (1.0 + EXCEED_RTOL) + 1e-15


@register("accountant", "rdp")
class RdpAccountant(_Base):
    """Rényi-DP accountant of the Poisson-subsampled Gaussian (Mironov 2017; dp_accounting).

    Keeps the running sum of per-order RDP (add-or-remove adjacency); the single-event RDP
    vector is cached per (noise multiplier, sample rate), so a step is one vector add and
    ``epsilon`` one vectorised conversion. It may be a view on row ``index`` of a shared
    :class:`BatchRdpLedger`, so that per-client objects and the batched ledger agree.
    """

    mechanisms: ClassVar[frozenset[str]] = frozenset({"gaussian", "subsampled_gaussian"})

    class Config(BaseModel):
        """RDP orders; ``None`` uses dp_accounting's defaults."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        orders: tuple[float, ...] | None = None

        @field_validator("orders")
        @classmethod
        def _orders_above_one(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
            if value is not None and (not value or min(value) <= 1.0):
                raise ValueError("must be a non-empty list of RDP orders > 1")
            return value

    def __init__(
        self, config: Config | None = None, *, ledger: BatchRdpLedger | None = None, index: int = 0
    ) -> None:
        if ledger is None:
            self.config = config or self.Config()
            ledger, index = BatchRdpLedger(1, orders=self.config.orders), 0
        else:
            self.config = config or self.Config(orders=tuple(ledger.orders.tolist()))
        self.ledger = ledger
        self.index = index

    def step(self, *, noise_multiplier: float, sample_rate: float = 1.0, steps: int = 1) -> None:
        """Compose ``steps`` subsampled Gaussian releases into this client's RDP."""
        self.ledger.charge_one(
            self.index, noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps
        )

    def epsilon(self, *, delta: float) -> float:
        """Epsilon at ``delta`` (Canonne-Kamath-Steinke conversion, as dp_accounting)."""
        return float(rdp_to_epsilon(self.ledger.orders, self.ledger.rdp[self.index], delta))

    def epsilon_if(
        self, *, delta: float, noise_multiplier: float, sample_rate: float = 1.0, steps: int = 1
    ) -> float:
        """Epsilon after a further charge, without recording it."""
        return float(
            self.ledger.epsilons_if(
                [self.index],
                delta=delta,
                noise_multiplier=noise_multiplier,
                sample_rate=sample_rate,
                steps=steps,
            )[0]
        )

    @property
    def rdp(self) -> np.ndarray:
        """Accumulated RDP per order (a copy)."""
        return self.ledger.rdp[self.index].copy()

    @classmethod
    def views(cls, ledger: BatchRdpLedger) -> list[RdpAccountant]:
        """One accountant per client of ``ledger``, each reading and writing its row."""
        return [cls(ledger=ledger, index=i) for i in range(ledger.num_clients)]


@lru_cache(maxsize=256)
def _event_pld(
    noise_multiplier: float, sample_rate: float, steps: int, interval: float
) -> pld_lib.PrivacyLossDistribution:
    if sample_rate == 1.0:  # Gaussians compose exactly: one Gaussian of std z / sqrt(steps)
        return pld_lib.from_gaussian_mechanism(
            noise_multiplier / math.sqrt(steps), value_discretization_interval=interval
        )
    single = pld_lib.from_gaussian_mechanism(
        noise_multiplier, value_discretization_interval=interval, sampling_prob=sample_rate
    )
    return single.self_compose(steps)


@register("accountant", "pld")
class PldAccountant(_Base):
    """Privacy-loss-distribution accountant (Koskela et al.; Doroshenko et al.; dp_accounting).

    Numerically tight for the (subsampled) Gaussian, pessimistically discretised. Each step
    composes a cached event PLD (built exactly as ``dp_accounting.pld.PLDAccountant`` does);
    slower than ``rdp`` (milliseconds per step): prefer ``rdp`` for thousands of clients.
    """

    mechanisms: ClassVar[frozenset[str]] = frozenset({"gaussian", "subsampled_gaussian"})

    class Config(BaseModel):
        """Discretisation of privacy-loss values (smaller: tighter and slower)."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        value_discretization_interval: float = Field(default=1e-4, gt=0.0, le=0.1)

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        self._pld = pld_lib.identity(self.config.value_discretization_interval)
        self._infinite = False

    def _event(self, noise_multiplier: float, sample_rate: float, steps: int) -> Any:
        check_step(noise_multiplier, sample_rate, steps)
        if steps == 0 or sample_rate == 0.0:
            return None
        if noise_multiplier == 0.0:
            return math.inf
        interval = self.config.value_discretization_interval
        return _event_pld(float(noise_multiplier), float(sample_rate), int(steps), interval)

    def step(self, *, noise_multiplier: float, sample_rate: float = 1.0, steps: int = 1) -> None:
        """Compose ``steps`` subsampled Gaussian releases."""
        event = self._event(noise_multiplier, sample_rate, steps)
        if event is math.inf:
            self._infinite = True
        elif event is not None:
            self._pld = self._pld.compose(event)

    def epsilon(self, *, delta: float) -> float:
        """Epsilon at ``delta``."""
        return math.inf if self._infinite else float(self._pld.get_epsilon_for_delta(delta))

    def epsilon_if(
        self, *, delta: float, noise_multiplier: float, sample_rate: float = 1.0, steps: int = 1
    ) -> float:
        """Epsilon after a further charge, without recording it."""
        event = self._event(noise_multiplier, sample_rate, steps)
        if self._infinite or event is math.inf:
            return math.inf
        pld = self._pld if event is None else self._pld.compose(event)
        return float(pld.get_epsilon_for_delta(delta))


def _rho_of(noise_multiplier: float, sample_rate: float, steps: int) -> float:
    check_step(noise_multiplier, sample_rate, steps)
    if steps == 0 or sample_rate == 0.0:
        return 0.0
    return math.inf if noise_multiplier == 0.0 else steps / (2.0 * noise_multiplier**2)


@register("accountant", "zcdp")
class ZcdpAccountant(_Base):
    """zCDP accountant: rho adds up; ``epsilon(delta) = rho + 2 sqrt(rho ln(1/delta))``.

    Bun & Steinke (2016), Prop. 1.3 and Lemma 2.3 (composition); paper 003 Lemma 1 composed
    over one client's rounds. Charge a chosen budget with ``step_rho(rho=...)``, or a Gaussian
    release with ``step``: ``rho = steps / (2 z^2)`` (Prop. 1.6). Subsampling is not credited
    (``sample_rate < 1`` is charged as 1: valid but conservative; use ``rdp`` to benefit).
    """

    mechanisms: ClassVar[frozenset[str]] = frozenset({"gaussian"})

    def __init__(self, config: BaseModel | None = None) -> None:
        self.config = config or EmptyConfig()
        self.rho = 0.0

    def step(self, *, noise_multiplier: float, sample_rate: float = 1.0, steps: int = 1) -> None:
        """Charge ``steps`` Gaussian releases of multiplier ``noise_multiplier``."""
        self.rho += _rho_of(noise_multiplier, sample_rate, steps)

    def step_rho(self, *, rho: float) -> None:
        """Charge a ``rho``-zCDP release."""
        if not rho >= 0:
            raise ValueError(f"rho must be >= 0, got {rho}")
        self.rho += rho

    def epsilon(self, *, delta: float) -> float:
        """Epsilon at ``delta``."""
        return zcdp_to_epsilon(self.rho, delta=delta)

    def epsilon_if(
        self,
        *,
        delta: float,
        noise_multiplier: float | None = None,
        sample_rate: float = 1.0,
        steps: int = 1,
        rho: float | None = None,
    ) -> float:
        """Epsilon after a further charge (``rho`` or a Gaussian release), not recorded."""
        extra = rho if rho is not None else _rho_of(_given(noise_multiplier), sample_rate, steps)
        return zcdp_to_epsilon(self.rho + extra, delta=delta)


def _given(noise_multiplier: float | None) -> float:
    if noise_multiplier is None:
        raise TypeError("give noise_multiplier (or the accountant's own charge keyword)")
    return noise_multiplier


@register("accountant", "basic")
class BasicAccountant(_Base):
    """Basic composition: epsilons and deltas add up (Dwork & Roth 2014, Thm 3.16).

    What the Laplace mechanism (papers 000, 002) and the per-round classic Gaussian use.
    ``step_epsilon(epsilon=..., delta=...)`` charges one release calibrated for that budget;
    ``step(noise_multiplier=z)`` charges a Laplace release of scale ``z * Delta_1``, i.e.
    ``epsilon = 1/z`` (pure DP, no subsampling credit). ``epsilon(delta)`` is the sum of
    epsilons when the summed deltas fit in ``delta``, and infinity otherwise.
    """

    mechanisms: ClassVar[frozenset[str]] = frozenset({"laplace", "gaussian"})

    def __init__(self, config: BaseModel | None = None) -> None:
        self.config = config or EmptyConfig()
        self.epsilon_spent = 0.0
        self.delta_spent = 0.0

    def step(self, *, noise_multiplier: float, sample_rate: float = 1.0, steps: int = 1) -> None:
        """Charge ``steps`` Laplace releases with scale ``noise_multiplier`` x L1 sensitivity."""
        self.epsilon_spent += _laplace_epsilon(noise_multiplier, sample_rate, steps)

    def step_epsilon(self, *, epsilon: float, delta: float = 0.0) -> None:
        """Charge one ``(epsilon, delta)``-DP release."""
        if not (epsilon >= 0 and 0 <= delta <= 1):
            raise ValueError(f"need epsilon >= 0 and delta in [0, 1], got {epsilon}, {delta}")
        self.epsilon_spent += epsilon
        self.delta_spent += delta

    def epsilon(self, *, delta: float) -> float:
        """Summed epsilon, or infinity when the summed delta exceeds ``delta``."""
        return self._at(self.epsilon_spent, self.delta_spent, delta)

    def epsilon_if(
        self,
        *,
        delta: float,
        noise_multiplier: float | None = None,
        sample_rate: float = 1.0,
        steps: int = 1,
        epsilon_step: float | None = None,
        delta_step: float = 0.0,
    ) -> float:
        """Epsilon after one more release (``epsilon_step``/``delta_step`` or a Laplace)."""
        if epsilon_step is None:
            epsilon_step = _laplace_epsilon(_given(noise_multiplier), sample_rate, steps)
        return self._at(self.epsilon_spent + epsilon_step, self.delta_spent + delta_step, delta)

    @staticmethod
    def _at(epsilon: float, delta_spent: float, delta: float) -> float:
        return epsilon if delta_spent <= delta * (1.0 + EXCEED_RTOL) else math.inf


def _laplace_epsilon(noise_multiplier: float, sample_rate: float, steps: int) -> float:
    check_step(noise_multiplier, sample_rate, steps)
    if steps == 0 or sample_rate == 0.0:
        return 0.0
    return math.inf if noise_multiplier == 0.0 else steps / noise_multiplier


def _mechanisms(cls: type) -> frozenset[str]:
    """The noise families a registered accountant class declares (``Accountant.mechanisms``)."""
    return cast("type[Accountant]", cls).mechanisms


def check_supported(accountant: str, mechanism: str, *, key: str = "privacy.accountant") -> None:
    """Refuse an accountant that cannot account for ``mechanism`` (a noise family).

    ``mechanism`` is one of ``MECHANISMS``; ``"none"`` (no noise, nothing to account) passes.

    Raises:
        ScenarioError: naming ``key``, the accountant, and the accountants that would do.
    """
    found = entry("accountant", accountant, key=key)
    if mechanism == "none" or mechanism in _mechanisms(found.cls):
        return
    able = [n for n in names("accountant") if mechanism in _mechanisms(entry("accountant", n).cls)]
    raise ScenarioError(
        key,
        accountant,
        f"cannot account for the {mechanism!r} mechanism; "
        f"accountants that can: {', '.join(able) or 'none'}",
    )
