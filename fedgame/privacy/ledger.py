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
from fedgame.privacy.base import Charge
from fedgame.privacy.rdp_ledger import BatchRdpLedger


class PrivacyLedger:
    """Accountants for ``num_clients`` clients of one kind (``basic``, ``rdp``, ``pld``, ``zcdp``).

    Args:
        kind: accountant plug-in name.
        deltas: each client's δ, at which its ε spent is reported.
    """

    def __init__(self, kind: str, deltas: Sequence[float]) -> None:
        self.kind = kind
        self.deltas = np.asarray(deltas, dtype=float)
        n = len(self.deltas)
        if kind == "rdp":
            self.batch: BatchRdpLedger | None = BatchRdpLedger(n)
            self.accountants: list = RdpAccountant.views(self.batch)
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

    def marginal(self, client: int, charge: Charge) -> float:
        """Extra ε one more release of ``charge`` would cost ``client`` (inf if unaffordable)."""
        after = self.epsilon_if(client, charge)
        return after - self.epsilon(client) if math.isfinite(after) else math.inf
