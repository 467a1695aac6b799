"""The round's contest as the followers see it: who can play, their ν, budgets and delivery.

Read from the market's columns (``ClientViews.column``), never one view at a time. Remaining
budgets are in zCDP units: ρ_left = ρ(ε_total) − ρ(ε_spent) with ρ(ε) the inverse of
ε = ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3; exact for the ``zcdp`` accountant;
``fedgame.privacy.calibrate.epsilon_to_zcdp``, vectorised here).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fedgame.game.memo import ArrayMemo, array_key
from fedgame.views import ClientViews, MarketView, Offer, column_of, ids_of


def epsilon_to_zcdp(epsilon: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The zCDP budget ρ an (ε, δ) budget holds, elementwise: ρ(ε) = (ε/(sqrt(L + ε) + sqrt(L)))².

    L = ln(1/δ). ρ(ε) is the largest ρ whose ρ-zCDP guarantee implies (ε, δ)-DP through
    ε = ρ + 2·sqrt(ρ·L) (Bun & Steinke 2016, Prop. 1.3, inverted). Units: ``epsilon`` in ε
    (negative values count as 0, ``inf`` stays ``inf``), ``delta`` a probability in (0, 1),
    the result in ρ (zCDP), which adds up over releases. E.g. ε = 5.3, δ = 1e-5 holds
    ρ ≈ 0.5.

    Remembers its last answers (:mod:`fedgame.game.memo`), for views that are not the
    model's table (e.g. a blinded market): the table's views share their budget state
    instead (:func:`rho_left`)."""
    epsilon, delta = np.asarray(epsilon, dtype=float), np.asarray(delta, dtype=float)
    return _ZCDP.get(array_key(epsilon, delta), lambda: epsilon_to_zcdp_uncached(epsilon, delta))


def epsilon_to_zcdp_uncached(epsilon: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """:func:`epsilon_to_zcdp` without the memo (for columns that are new every time)."""
    log_term = np.log(1.0 / delta)
    eps = np.maximum(epsilon, 0.0)
    with np.errstate(invalid="ignore"):
        rho = (eps / (np.sqrt(log_term + eps) + np.sqrt(log_term))) ** 2
    return np.where(np.isinf(eps), np.inf, rho)


#: the last conversions of total budgets of views that are not the model's table
_ZCDP = ArrayMemo(size=8)


def rho_left(clients: Sequence[Any]) -> np.ndarray:
    """Remaining zCDP budget of every client: ρ(ε_total,i) − ρ(min(ε_spent,i, ε_total,i)).

    ρ(·) is :func:`epsilon_to_zcdp` at the client's δ_i; the result is in ρ (zCDP) units,
    one per client in the order of ``clients`` (views or anything with the fields
    ``epsilon_total``, ``epsilon_spent`` and ``delta``), never below 0, and ``inf`` for a
    client without a finite budget. A release at ρ_i ≤ ρ_left,i keeps the client within its
    (ε_total, δ) budget exactly under the ``zcdp`` accountant (ρ adds up); under another
    accountant it is the zCDP reading of the ε that accountant reports, and the model's
    budget guard, which asks the accountant, has the last word.

    Views of the model's table get it from the table's budget state
    (:meth:`~fedgame.views.ClientViews.budget_derived`: once per state for everyone, the
    same numbers); other sequences are converted here."""
    if isinstance(clients, ClientViews):
        return clients.budget_derived("rho_left", _table_rho_left)
    total = column_of(clients, "epsilon_total")
    delta = column_of(clients, "delta")
    return _left(total, epsilon_to_zcdp(total, delta), column_of(clients, "epsilon_spent"), delta)


def _table_rho_left(everyone: ClientViews) -> np.ndarray:
    """:func:`rho_left` of every client of the table: ρ(ε total) once per static state."""
    total = everyone.column("epsilon_total")
    delta = everyone.column("delta")
    rho_total = everyone.budget_derived("rho_total", _rho_total, static=True)
    return _left(total, rho_total, everyone.column("epsilon_spent"), delta)


def _rho_total(everyone: ClientViews) -> np.ndarray:
    return epsilon_to_zcdp_uncached(everyone.column("epsilon_total"), everyone.column("delta"))


def _left(
    total: np.ndarray, rho_total: np.ndarray, spent: np.ndarray, delta: np.ndarray
) -> np.ndarray:
    """ρ(ε total) − ρ(min(ε spent, ε total)), at least 0 (inf without a finite budget)."""
    spent_rho = epsilon_to_zcdp_uncached(np.minimum(spent, total), delta)
    return np.where(np.isinf(total), np.inf, np.maximum(rho_total - spent_rho, 0.0))


def rho_remaining(view: Any) -> float:
    """Remaining zCDP budget ρ_left of one client view, in ρ (zCDP): :func:`rho_left` of it."""
    return float(rho_left((view,))[0])


@dataclass(frozen=True)
class Contest:
    """Everyone in the market, as columns: ``ids``, ``players`` (reachable, not excluded,
    with budget, may deliver) and each client's ν, delivery probability, remaining budget
    and colluder flag."""

    ids: np.ndarray
    players: np.ndarray
    nu: np.ndarray
    p: np.ndarray
    left: np.ndarray
    colluder: np.ndarray
    reward: float
    phi: float
    quadratic: bool
    cap: float

    def by_id(self, values: np.ndarray) -> np.ndarray:
        """``values`` (one per market client) as an array indexed by client id."""
        out = np.zeros(int(self.ids.max()) + 1 if self.ids.size else 0)
        out[self.ids] = values
        return out


def contest_of(
    offer: Offer, market: MarketView, *, min_left: float = 0.0, left: np.ndarray | None = None
) -> Contest:
    """The round's contest: players are reachable, not excluded, with more than ``min_left``
    of their budget (``left``, default: what the views say is left), and can deliver
    (straggle probability below 1)."""
    clients = market.clients
    ids = ids_of(clients)
    straggle = column_of(clients, "straggle_prob")
    players = column_of(clients, "reachable", bool).copy()
    if offer.excluded:
        players &= ~np.isin(ids, np.fromiter(offer.excluded, np.int64, len(offer.excluded)))
    left = rho_left(clients) if left is None else left
    players &= (left > min_left) & (straggle < 1.0)
    plan = offer.plan
    return Contest(
        ids=ids,
        players=players,
        nu=column_of(clients, "privacy_value"),
        p=np.clip(1.0 - straggle, 0.0, 1.0),
        left=left,
        colluder=column_of(clients, "colluder", bool),
        reward=float(offer.reward),
        phi=float(plan.get("phi", 1.0)),
        quadratic=bool(plan.get("quadratic", 0.0)),
        cap=float(plan.get("cap", np.inf)),
    )
