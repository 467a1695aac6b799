"""What an incentive bought and paid in a round, in the units the economics columns measure.

Every incentive family (contest, posted price, auctions, contracts, contribution payments)
describes its round through one ``RoundOutcome``: for each client it dealt with, the privacy
it bought (``units``, in the family's unit: ρ for zCDP, ε otherwise), the payment, the
client's true privacy cost of delivering those units (its private valuation, which the
leader may not know) and, where the family asks for one, the cost it reported (a bid).

From these the round's economics follow without knowing the family (docs/mechanisms.md,
"Economics"): server cost = Σ payments; client surplus_i = payment_i − true_cost_i;
social welfare = (value of the round's accuracy gain to the server) − Σ true_cost_i;
an individual-rationality violation is a client with surplus_i < 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RoundOutcome:
    """One round's allocation and payments, one entry per client the incentive dealt with.

    Arrays are aligned with ``ids`` (int64 client ids). ``units``: privacy bought (ρ or ε);
    ``payments``: money paid; ``true_cost``: the client's privacy cost of ``units`` at its
    true type (same money unit as ``payments``); ``reported_cost``: the per-unit cost it
    reported (a bid), ``nan`` where the family asks for none.
    """

    ids: np.ndarray
    units: np.ndarray
    payments: np.ndarray
    true_cost: np.ndarray
    reported_cost: np.ndarray | None = None

    @classmethod
    def empty(cls) -> RoundOutcome:
        """A round in which nobody was paid or bought from."""
        none = np.zeros(0)
        return cls(np.zeros(0, dtype=np.int64), none, none, none, None)
