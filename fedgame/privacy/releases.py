"""The release service: the model's one path from a round's privacy plan to its charges.

It owns the clients' :class:`~fedgame.privacy.budget.PrivacyBudget` and the model's own
:class:`~fedgame.privacy.invariant.PrivacyInvariant`, and runs the two budget steps of a round:

* :meth:`Releases.admit` (phase 5, before anyone trains): the mechanism plans the selected
  clients' releases, the budget prices them together, releases that would pass a budget are
  withdrawn (the client declines with reason ``budget`` when none of its releases fits) and the
  mechanism re-plans without them, until the whole plan fits;
* :meth:`Releases.settle` (phase 9): the releases that left their clients are charged, the
  invariant is checked from the accountant's state, and ε spent goes into the client table.

Between rounds ``epsilon_after_next`` (what one more default participation would cost) is kept
current for the clients whose ledgers moved (:meth:`Releases.refresh`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from fedgame.agents.table import ClientTable
from fedgame.privacy.base import PrivacyPlan, RecordsReleases, charge_columns
from fedgame.privacy.budget import PrivacyBudget
from fedgame.privacy.invariant import PrivacyInvariant
from fedgame.views import Responses, RoundInfo


@dataclass(frozen=True)
class Admitted:
    """A round's plan the budget admits in full: the clients that train and their answers
    (``plan`` and ``responses`` None when the budget withdrew every selected client)."""

    plan: PrivacyPlan | None
    responses: Responses | None
    ids: np.ndarray
    #: releases the budget refused on the way (the rounds table's ``withdrawn_budget``)
    withdrawn: int


class Releases:
    """Budget, invariant and re-planning for one model (see the module docstring).

    Args:
        privacy: the run's privacy mechanism (its ``plan``, ``next_charges``, ``accountant``).
        table: the client table (budgets read from it; withdrawals and ε spent written to it).
    """

    def __init__(self, privacy: Any, table: ClientTable) -> None:
        self.privacy = privacy
        self.table = table
        self.budget = PrivacyBudget(
            privacy.accountant, epsilon_total=table.epsilon_total, delta_total=table.delta
        )
        self.invariant = PrivacyInvariant(privacy.accountant, epsilon_total=table.epsilon_total)

    def refresh(self, ids: np.ndarray) -> None:
        """Price one more default participation of clients ``ids`` (``epsilon_after_next``)."""
        if len(ids) == 0:
            return
        charges = self.privacy.next_charges(self.table.views(ids))
        self.table.epsilon_after_next[ids] = self.budget.price(ids, charge_columns(charges))

    def admit(self, ids: np.ndarray, info: RoundInfo) -> Admitted:
        """The plan of the selected ``ids`` that the budget admits in full (no plan when it
        withdrew every one of them: a mechanism is never asked to plan for nobody)."""
        withdrawn = 0
        while True:
            responses = self.table.responses(ids)
            plan = self.privacy.plan(self.table.views(ids), responses, info=info)
            if not np.array_equal(np.asarray(plan.client_ids, dtype=np.int64), ids):
                raise RuntimeError("privacy plan covers other clients than were selected")
            keep = self.budget.admit(ids, charge_columns(plan.charges))
            if keep.all():
                return Admitted(plan, responses, ids, withdrawn)
            withdrawn += int((~keep).sum())
            self._decline(np.setdiff1d(ids[~keep], ids[keep]))
            ids = ids[keep]
            if ids.size == 0:
                return Admitted(None, None, ids, withdrawn)

    def _decline(self, out: np.ndarray) -> None:
        """Clients none of whose releases fits: not selected, declined for ``budget``."""
        self.table.selected[out] = False
        self.table.participating[out] = False
        self.table.decline_reason[out] = "budget"

    def settle(
        self,
        plan: PrivacyPlan,
        ids: np.ndarray,
        sent: np.ndarray,
        info: RoundInfo,
        *,
        recorder: RecordsReleases | None = None,
    ) -> None:
        """Charge the releases of ``ids`` that were ``sent``, check the invariant, hand them
        to a mechanism that records its own ε (``recorder``), record ε spent.

        Raises:
            PrivacyViolation: the model's own check failed (:mod:`fedgame.privacy.invariant`).
        """
        charges = charge_columns(plan.charges)
        charges = charges if sent.all() else charges[np.flatnonzero(sent)]
        released = ids[sent]
        charged, _ = self.budget.charge_admitted(sent)
        self.invariant.check(
            info.round,
            released=released[~charges.free],
            charged=charged,
            recorded=self.table.epsilon_spent[charged],
        )
        if recorder is not None:  # closed-form ε columns
            recorder.record_releases(released, charges)
        self.table.record_release(charged, self.budget.spent[charged])
        self.refresh(charged)
