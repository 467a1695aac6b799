"""``rdp``: Rényi-DP accounting (Mironov 2017) with Google's ``dp_accounting``, batched.

Each client's state is its RDP curve at a fixed list of orders; composition adds curves.
The curve of one release is what a fresh ``dp_accounting.rdp.RdpAccountant`` reports after
composing the release's DpEvent (public API: ``compose`` and the ``rdp`` property), cached per
(family, z, q), with a set-up progress line (``pricing releases: k of n noise levels``) where
pricing the first releases takes more than 2 s. ε at δ is the conversion of Canonne, Kamath &
Steinke (2020, Prop. 12) that ``dp_accounting.rdp.compute_epsilon`` uses, vectorised over
clients (tested equal to it).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fedgame.privacy.accountants.base import StateAccountant
from fedgame.privacy.base import Charges, release_event
from fedgame.progress import report
from fedgame.registry import register


@contextmanager
def quiet_dp_accounting() -> Iterator[None]:
    """Silence dp_accounting's absl warnings while it runs.

    Near order 1 its subsampled-Gaussian series may not converge; it then drops that order from
    the ε minimum and logs a warning per order and noise level. Dropping an order only loosens
    ε, so the warnings carry no action for users.
    """
    logger = logging.getLogger("absl")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@lru_cache(maxsize=16384)
def event_rdp(
    noise: str, *, noise_multiplier: float, sample_rate: float, orders: tuple[float, ...]
) -> np.ndarray:
    """RDP curve of one step of a release (its DpEvent with ``steps=1``), read-only."""
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_lib

    if noise_multiplier == 0.0:
        out = np.full(len(orders), np.inf)
    else:
        accountant = rdp_lib.RdpAccountant(orders=list(orders))
        with quiet_dp_accounting():
            accountant.compose(
                release_event(noise, noise_multiplier=noise_multiplier, sample_rate=sample_rate)
            )
        out = np.asarray(accountant.rdp, dtype=float)
    out.setflags(write=False)
    return out


#: ``dp_accounting.rdp.DEFAULT_RDP_ORDERS``, written out so that an accountant can be built (and a
#: scenario validated) without importing dp_accounting; a test checks the two lists agree
DEFAULT_ORDERS: tuple[float, ...] = (
    *(1 + x / 10.0 for x in range(1, 100)),
    *range(11, 64),
    128,
    256,
    512,
    1024,
)


def rdp_to_epsilon(orders: np.ndarray, rdp: np.ndarray, delta: np.ndarray | float) -> np.ndarray:
    """Vectorised ``dp_accounting.rdp.compute_epsilon`` over rows of ``rdp`` [..., orders].

    ``eps = min_a rdp_a + log1p(-1/a) - log(delta a)/(a - 1)`` over orders ``a > 1.01`` (0 where
    ``delta^2 + expm1(-rdp) > 0``); ``delta`` is a scalar or one per row; δ = 0 gives ∞ unless
    nothing was spent.
    """
    orders = np.asarray(orders, dtype=float)
    rdp = np.asarray(rdp, dtype=float)
    delta = np.broadcast_to(np.asarray(delta, dtype=float), rdp.shape[:-1])[..., None]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        bound = rdp + np.log1p(-1.0 / orders) - np.log(delta * orders) / (orders - 1.0)
        eps = np.where(orders > 1.01, bound, np.inf)
        eps = np.where((delta**2 + np.expm1(-rdp) > 0) | (rdp < 0), 0.0, eps)
    out = np.maximum(eps.min(axis=-1), 0.0)
    no_delta = delta[..., 0] == 0
    return np.where(no_delta, np.where(np.all(rdp == 0, axis=-1), 0.0, np.inf), out)


@register("accountant", "rdp")
class RdpAccountant(StateAccountant):
    """Rényi DP of Gaussian, Poisson-subsampled Gaussian and Laplace releases (dp_accounting).

    The scalable default: a round's pricing is one array operation over the selected clients.
    Add-or-remove-one adjacency, as ``dp_accounting``'s default.
    """

    name: ClassVar[str] = "rdp"
    families: ClassVar[frozenset[str]] = frozenset({"gaussian", "subsampled_gaussian", "laplace"})

    class Config(BaseModel):
        """RDP orders; ``None`` uses dp_accounting's defaults."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        orders: tuple[float, ...] | None = Field(
            default=None, description="RDP orders alpha > 1 (default: dp_accounting's list)"
        )

        @field_validator("orders")
        @classmethod
        def _orders_above_one(cls, value: tuple[float, ...] | None) -> tuple[float, ...] | None:
            if value is not None and (not value or min(value) <= 1.0):
                raise ValueError("must be a non-empty list of RDP orders > 1")
            return value

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()
        chosen = DEFAULT_ORDERS if self.config.orders is None else self.config.orders
        self.orders = np.array(chosen, dtype=float)
        self._key = tuple(self.orders.tolist())
        self.width = self.orders.size
        super().__init__()

    def increments(self, charges: Charges) -> np.ndarray:
        """``steps`` times the cached one-step curve of each release."""
        families, codes = np.unique(charges.noise.astype(str), return_inverse=True)
        keys = np.stack([codes.astype(float), charges.noise_multiplier, charges.sample_rate], 1)
        uniq, inverse = np.unique(keys, axis=0, return_inverse=True)
        rows = []
        for k, (c, z, q) in enumerate(uniq.tolist(), start=1):
            rows.append(
                event_rdp(
                    str(families[int(c)]),
                    noise_multiplier=float(z),
                    sample_rate=float(q),
                    orders=self._key,
                )
            )
            report("pricing releases", k, len(uniq), "noise levels")
        table = np.stack(rows)
        steps = charges.steps.astype(float)[:, None]
        with np.errstate(invalid="ignore"):
            inc = steps * table[inverse.ravel()]
        inc[charges.steps == 0] = 0.0
        return inc

    def to_epsilon(self, states: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        return rdp_to_epsilon(self.orders, states, deltas)
