"""Per-client privacy ledgers: one accountant per client, charged with what it released.

The model charges a client only when its noised update left it (an upload that was sent,
even if a failed link then dropped it); a straggler that never finished, or a client that was
not selected, is not charged. ``epsilon_spent`` is read back from the accountant at each
client's own δ.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from fedgame import registry
from fedgame.privacy.accounting import BasicAccountant, RdpAccountant, ZcdpAccountant
from fedgame.privacy.base import Charge, charge_columns
from fedgame.privacy.rdp_ledger import EXCEED_RTOL, BatchRdpLedger


class _BasicRow(BasicAccountant):
    """A basic-composition accountant whose running sums are one row of shared columns."""

    def __init__(self, sums: np.ndarray, index: int) -> None:
        self._sums, self._index = sums, index
        super().__init__()

    @property  # type: ignore[override]
    def epsilon_spent(self) -> float:
        return float(self._sums[0, self._index])

    @epsilon_spent.setter
    def epsilon_spent(self, value: float) -> None:
        self._sums[0, self._index] = value

    @property  # type: ignore[override]
    def delta_spent(self) -> float:
        return float(self._sums[1, self._index])

    @delta_spent.setter
    def delta_spent(self, value: float) -> None:
        self._sums[1, self._index] = value


class PrivacyLedger:
    """Accountants for ``num_clients`` clients of one kind (``basic``, ``rdp``, ``pld``, ``zcdp``).

    Args:
        kind: accountant plug-in name.
        deltas: each client's δ, at which its ε spent is reported.
    """

    def __init__(self, kind: str, deltas: Sequence[float] | np.ndarray) -> None:
        self.kind = kind
        self.deltas = np.asarray(deltas, dtype=float)
        n = len(self.deltas)
        #: basic composition's running (ε, δ) sums, ``[2, n]`` (``kind == "basic"`` only)
        self.basic_sums: np.ndarray | None = None
        if kind == "rdp":
            self.batch: BatchRdpLedger | None = BatchRdpLedger(n)
            self.accountants: list = RdpAccountant.views(self.batch)
        elif kind == "basic":
            self.batch = None
            self.basic_sums = sums = np.zeros((2, n))
            self.accountants = [_BasicRow(sums, i) for i in range(n)]
        else:
            self.batch = None
            self.accountants = [registry.create("accountant", kind) for _ in range(n)]

    def charge(self, client: int, charge: Charge) -> None:
        """Record one release by ``client``."""
        if charge.free:
            return
        acc = self.accountants[client]
        if isinstance(acc, BasicAccountant):
            if charge.noise == "laplace" and charge.epsilon == 0.0:
                acc.step(noise_multiplier=charge.noise_multiplier, steps=charge.steps)
            else:
                acc.step_epsilon(epsilon=charge.epsilon, delta=charge.delta)
        elif isinstance(acc, ZcdpAccountant) and charge.rho > 0:
            acc.step_rho(rho=charge.rho)
        else:
            acc.step(
                noise_multiplier=charge.noise_multiplier,
                sample_rate=charge.sample_rate,
                steps=charge.steps,
            )

    def epsilon(self, client: int) -> float:
        """ε spent by ``client`` at its own δ."""
        return float(self.accountants[client].epsilon(delta=float(self.deltas[client])))

    def epsilon_if(self, client: int, charge: Charge) -> float:
        """ε ``client`` would have spent after one more release of ``charge``."""
        if charge.free:
            return self.epsilon(client)
        acc = self.accountants[client]
        delta = float(self.deltas[client])
        if isinstance(acc, BasicAccountant):
            if charge.noise == "laplace" and charge.epsilon == 0.0:
                return acc.epsilon_if(
                    delta=delta, noise_multiplier=charge.noise_multiplier, steps=charge.steps
                )
            return acc.epsilon_if(delta=delta, epsilon_step=charge.epsilon, delta_step=charge.delta)
        if isinstance(acc, ZcdpAccountant) and charge.rho > 0:
            return acc.epsilon_if(delta=delta, rho=charge.rho)
        return acc.epsilon_if(
            delta=delta,
            noise_multiplier=charge.noise_multiplier,
            sample_rate=charge.sample_rate,
            steps=charge.steps,
        )

    # -- batched forms (the model's per-round calls; a fast path for basic composition) ----
    def charge_many(self, clients: np.ndarray, charges: Sequence[Charge]) -> None:
        """Record one release per client of ``clients`` (aligned with ``charges``)."""
        steps = self._basic_steps(charges)
        if steps is not None and self.basic_sums is not None:
            np.add.at(self.basic_sums.T, clients, steps.T)  # repeated ids add up
            return
        for cid, ch in zip(clients.tolist(), charges):
            self.charge(cid, ch)

    def epsilon_many(self, clients: np.ndarray) -> np.ndarray:
        """ε spent by each of ``clients`` at its own δ."""
        if self.basic_sums is not None:
            return self._basic_at(clients, self.basic_sums[:, clients])
        return np.array([self.epsilon(cid) for cid in clients.tolist()], dtype=float)

    def epsilon_if_many(self, clients: np.ndarray, charges: Sequence[Charge]) -> np.ndarray:
        """ε each of ``clients`` would have spent after one more release of its charge."""
        steps = self._basic_steps(charges)
        if steps is not None and self.basic_sums is not None:
            return self._basic_at(clients, self.basic_sums[:, clients] + steps)
        return np.array(
            [self.epsilon_if(cid, ch) for cid, ch in zip(clients.tolist(), charges)], dtype=float
        )

    def _basic_at(self, clients: np.ndarray, sums: np.ndarray) -> np.ndarray:
        """Basic composition's ε (infinite once the summed δ passes the client's δ)."""
        within = sums[1] <= self.deltas[clients] * (1.0 + EXCEED_RTOL)
        return np.where(within, sums[0], math.inf)

    def _basic_steps(self, charges: Sequence[Charge]) -> np.ndarray | None:
        """``[2, k]`` (ε, δ) steps when every charge is a plain (ε, δ) release, else None.

        Free charges count as zero; Laplace charges given by noise multiplier and invalid
        values take the per-client path (which validates and raises).
        """
        if self.kind != "basic":
            return None
        cols = charge_columns(charges)
        eps, delta = cols.epsilon, cols.delta
        if len(eps) == 0:
            return np.zeros((2, 0))
        # (NaN fails every comparison, so it takes the validating path too)
        if not (eps.min() >= 0 and delta.min() >= 0 and delta.max() <= 1):
            return None
        zero = eps == 0.0
        if zero.any() and (zero & (cols.noise == "laplace")).any():  # Laplace priced by z
            return None
        steps = np.empty((2, len(eps)))
        steps[0], steps[1] = eps, delta
        free = cols.free
        if free.any():
            steps[:, free] = 0.0
        return steps

    def marginal(self, client: int, charge: Charge) -> float:
        """Extra ε one more release of ``charge`` would cost ``client`` (inf if unaffordable)."""
        after = self.epsilon_if(client, charge)
        return after - self.epsilon(client) if math.isfinite(after) else math.inf
