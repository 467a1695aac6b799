"""The privacy invariant, checked by the model itself after every round's charges.

:class:`~fedgame.privacy.budget.PrivacyBudget` guards every release, but a plug-in is code
and can patch, skip or fool that guard. So after phase 9 the model asks the accountant's own
state, not the budget's cached prices, and checks three things for the round:

1. every release that left its client with a charge (``sent`` and not ``free``) was charged:
   its client is among those the budget reports charged;
2. ε spent never decreases: the accountant's ε of a charged client is at least the ε the
   model recorded for it before (a restarted or rewound ledger under-reports);
3. no client is past its budget: ε ≤ ε_total·(1 + ``EXCEED_RTOL``) at its δ_total, with the
   totals copied (read-only) when the model was built, so a plug-in that edits the budget's
   totals does not move the bound.

Any failure raises :class:`~fedgame.errors.PrivacyViolation` naming the clients; the run stops
with status ``privacy_violation`` and keeps its rounds. The cost is one ``epsilon`` call of
the accountant on the round's charged clients.
"""

from __future__ import annotations

import numpy as np

from fedgame.errors import PrivacyViolation
from fedgame.privacy.accountants.base import EXCEED_RTOL, Accountant


def _frozen(values: np.ndarray) -> np.ndarray:
    out = np.array(values, dtype=float, copy=True)
    out.flags.writeable = False
    return out


class PrivacyInvariant:
    """The model's own check of every client's (ε, δ) (see the module docstring).

    Args:
        accountant: the run's accountant (its state is read, never written).
        epsilon_total: each client's ε_total, copied here.
    """

    def __init__(self, accountant: Accountant, *, epsilon_total: np.ndarray) -> None:
        self.accountant = accountant
        self.epsilon_total = _frozen(epsilon_total)

    def check(
        self,
        round_: int,
        *,
        released: np.ndarray,
        charged: np.ndarray,
        recorded: np.ndarray,
    ) -> np.ndarray:
        """Check a round's charges; returns the charged clients' ε spent (accountant state).

        Args:
            round_: the round number (for the message).
            released: client ids of the releases that left their clients with a charge.
            charged: the distinct client ids the budget says it charged.
            recorded: ε the model recorded for ``charged`` before this round.

        Raises:
            PrivacyViolation: a release was not charged, an ε went down, or one passed its
                budget.
        """
        released = np.unique(np.asarray(released, dtype=np.int64))
        charged = np.asarray(charged, dtype=np.int64)
        missing = np.setdiff1d(released, charged)
        if len(missing):
            raise PrivacyViolation(
                round_,
                missing,
                np.full(len(missing), np.nan),
                self.epsilon_total[missing],
                why="released an update the budget did not charge",
            )
        if len(charged) == 0:
            return np.zeros(0)
        spent = np.asarray(self.accountant.epsilon(charged), dtype=float)
        rewound = spent < np.asarray(recorded, dtype=float) * (1.0 - EXCEED_RTOL) - 1e-15
        if rewound.any():
            raise PrivacyViolation(
                round_,
                charged[rewound],
                spent[rewound],
                np.asarray(recorded, dtype=float)[rewound],
                why="ε spent went down (the ledger was rewound)",
            )
        total = self.epsilon_total[charged]
        over = ~(spent <= total * (1.0 + EXCEED_RTOL) + 1e-15)  # NaN counts as over
        if over.any():
            raise PrivacyViolation(
                round_, charged[over], spent[over], total[over], why="spent past their budget"
            )
        return spent
