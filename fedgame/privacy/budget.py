"""The one budget path: every release of every client is priced, guarded and charged here.

``PrivacyBudget`` owns the clients' ledgers (one accountant plug-in batched over the
population) and their totals (ε_total, δ_total). Each round the model hands it the privacy
plan of the selected clients *before anyone trains*:

1. **price** all of the round's releases together with ``Accountant.epsilon_if`` (a client
   selected twice is priced for both releases, in order);
2. **guard**: a release that would take its client past ε_total at its δ_total is withdrawn,
   and so is every later release of that client in the round; the model re-plans without
   the withdrawn (their reason is ``budget``) and asks again, until everything left fits;
3. **charge** (phase 9) the releases that left their clients (an upload that was sent,
   whatever happened to it on the way), and read ε spent back from the accountant.

There is no other path from a plan to training: the model calls ``admit`` on every plan
whatever the policy, selection, mechanism or planner, and ``charge`` refuses (raises) if a
release would ever overspend, so a bug elsewhere cannot silently break a budget.
"""

from __future__ import annotations

import numpy as np

from fedgame.errors import BudgetExhausted
from fedgame.privacy.accountants.base import Accountant, occurrence_rank, within
from fedgame.privacy.base import Charges


class PrivacyBudget:
    """Clients' privacy budgets under one accountant.

    Args:
        accountant: the accountant plug-in (its state is (re)started here).
        epsilon_total: each client's ε_total.
        delta_total: each client's δ_total (ε spent is reported at it).
    """

    def __init__(
        self, accountant: Accountant, *, epsilon_total: np.ndarray, delta_total: np.ndarray
    ) -> None:
        self.accountant = accountant
        self.epsilon_total = np.asarray(epsilon_total, dtype=float)
        self.delta_total = np.asarray(delta_total, dtype=float)
        accountant.start(self.delta_total)
        #: ε spent by each client at its δ_total (never decreases)
        self.spent = np.zeros(len(self.epsilon_total))
        self._admitted: tuple[np.ndarray, Charges, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.epsilon_total)

    def price(self, ids: np.ndarray, charges: Charges) -> np.ndarray:
        """ε each row's client would have spent after its releases up to that row."""
        return self.accountant.epsilon_if(np.asarray(ids, dtype=np.int64), charges)

    def admit(self, ids: np.ndarray, charges: Charges) -> np.ndarray:
        """Which of the round's releases may happen (a boolean per row; nothing recorded).

        A row is admitted when its client's ε after all of its releases up to that row stays
        within ε_total, and none of that client's earlier releases this round was refused.
        """
        ids = np.asarray(ids, dtype=np.int64)
        if len(ids) == 0:
            self._admitted = (ids, charges, np.zeros(0))
            return np.zeros(0, dtype=bool)
        after = self.price(ids, charges)
        ok = within(after, self.epsilon_total[ids]) | charges.free
        self._admitted = (ids, charges, after) if ok.all() else None
        rank = occurrence_rank(ids)
        if rank.any() and not ok.all():  # a refused release withdraws the client's later ones
            refused_at = np.full(len(self), np.iinfo(np.int64).max)
            np.minimum.at(refused_at, ids[~ok], rank[~ok])
            ok &= rank < refused_at[ids]
        return ok

    def charge(self, ids: np.ndarray, charges: Charges) -> tuple[np.ndarray, np.ndarray]:
        """Record released updates; returns (distinct client ids, ε each spent this call).

        Raises:
            BudgetExhausted: if a release would take a client past its budget (the guard
                admits only what fits, so this signals a path that skipped ``admit``).
        """
        ids = np.asarray(ids, dtype=np.int64)
        paid = ~charges.free
        if not paid.any():
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        ids, charges = ids[paid], charges[np.flatnonzero(paid)]
        after = self.price(ids, charges)
        over = ~within(after, self.epsilon_total[ids])
        if over.any():
            j = int(np.flatnonzero(over)[0])
            raise BudgetExhausted(
                f"client {int(ids[j])} would spend epsilon {after[j]:.6g} past its budget "
                f"{self.epsilon_total[ids[j]]:.6g}; releases must pass PrivacyBudget.admit"
            )
        self.accountant.charge(ids, charges)
        uniq = np.unique(ids)
        before = self.spent[uniq]
        self.spent[uniq] = np.maximum(before, self.accountant.epsilon(uniq))
        return uniq, self.spent[uniq] - before

    def charge_admitted(self, sent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``charge`` the ``sent`` rows of the last batch ``admit`` admitted in full.

        Reuses its prices: a client's releases in a round are all sent or all dropped (the
        straggler draw is per client), so the admitted ε are exactly the ε after charging.
        """
        if self._admitted is None:
            raise BudgetExhausted("no admitted batch to charge: releases must pass admit first")
        ids, charges, after = self._admitted
        self._admitted = None
        sent = np.asarray(sent, dtype=bool)
        if sent.all() and not occurrence_rank(ids).any():
            paid = ~charges.free
            self.accountant.charge(ids, charges)
            uniq = ids[paid]
            before = self.spent[uniq]
            self.spent[uniq] = np.maximum(before, after[paid])
            order = np.argsort(uniq)
            return uniq[order], (self.spent[uniq] - before)[order]
        rows = np.flatnonzero(sent)
        return self.charge(ids[rows], charges[rows])

    def remaining(self, ids: np.ndarray | None = None) -> np.ndarray:
        """ε_total − ε spent (0 at the least)."""
        rows = slice(None) if ids is None else np.asarray(ids, dtype=np.int64)
        return np.maximum(self.epsilon_total[rows] - self.spent[rows], 0.0)
