"""What an incentive bought and paid in a round, in the units the economics columns measure.

Every incentive family (contest, posted price, auctions, contracts, contribution payments)
describes its round through one ``RoundOutcome``: for each client it dealt with, the privacy
it bought (``units``, in the family's unit: ρ for zCDP, ε otherwise), the payment, the
client's true privacy cost of delivering those units (its private valuation, which the
leader may not know) and, where the family asks for one, the cost it reported (a bid).

From these the round's economics follow without knowing the family (docs/economics.md,
"The columns"): server cost = Σ payments; client surplus_i = payment_i − true_cost_i;
social welfare = (value of the round's accuracy gain to the server) − Σ true_cost_i;
an individual-rationality violation is a client with surplus_i < 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fedgame.game.stackelberg import follower_best_response


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


# ---------------------------------------------------------------------- the round's figures
def server_cost(outcome: RoundOutcome) -> float:
    """The server's money cost of the round, Σ_i payment_i (reward units).

    The contest families also write their full server cost of QI-DPFL Eq. 15 (accuracy term +
    payment term) as ``server_cost``; this is the payment part every family shares.

    >>> server_cost(RoundOutcome(np.array([0, 1]), np.ones(2), np.array([1.5, 2.0]), np.ones(2)))
    3.5
    """
    return float(np.sum(outcome.payments))


def surplus(outcome: RoundOutcome) -> np.ndarray:
    """Each client's surplus, payment_i − true_cost_i (reward units), aligned with ``ids``."""
    return np.asarray(outcome.payments, dtype=float) - np.asarray(outcome.true_cost, dtype=float)


def accuracy_value(before: float, after: float, *, value_per_point: float) -> float:
    """The server's value of the round's accuracy gain: v · 100 · (after − before).

    ``before``/``after`` are test accuracies (fractions), ``value_per_point`` v the value of
    one percentage point (reward units per point), so the result is in reward units; it is
    negative when the round lost accuracy and 0 when either accuracy is unknown (NaN).

    >>> accuracy_value(0.5, 0.75, value_per_point=2.0)
    50.0
    """
    gain = after - before
    if not np.isfinite(gain):
        return 0.0
    return float(value_per_point * 100.0 * gain)


def social_welfare(value: float, outcome: RoundOutcome) -> float:
    """Welfare = value of the round's accuracy gain − Σ_i true_cost_i (reward units).

    Payments are transfers between the server and the clients, so they cancel: welfare is
    the server's value minus the clients' true privacy costs of what was bought.
    """
    return float(value - np.sum(outcome.true_cost))


def ir_violations(outcome: RoundOutcome, *, rtol: float = 1e-9) -> int:
    """Clients whose surplus is negative (individual rationality violated ex post).

    A surplus counts as negative below −rtol·max(1, largest |payment| or cost) (rounding of
    a share that should be 0 is not a violation).

    >>> o = RoundOutcome(np.arange(3), np.ones(3), np.array([1.0, 0.5, 2.0]), np.ones(3))
    >>> ir_violations(o)
    1
    """
    gain = surplus(outcome)
    if not gain.size:
        return 0
    scale = max(1.0, float(np.abs(outcome.payments).max()), float(np.abs(outcome.true_cost).max()))
    return int(np.count_nonzero(gain < -rtol * scale))


def deviation_sample(ids: np.ndarray, size: int, *, rng: np.random.Generator) -> np.ndarray:
    """``size`` of ``ids`` drawn without replacement, in increasing order (all when fewer).

    Nothing is drawn from ``rng`` when every id is taken."""
    ids = np.asarray(ids, dtype=np.int64)
    if size >= ids.size:
        return np.sort(ids)
    return np.sort(rng.choice(ids, size=size, replace=False))


def regret_summary(gains: np.ndarray) -> tuple[float, float]:
    """(max, mean) of the sampled clients' deviation gains; (0, 0) for an empty sample."""
    gains = np.asarray(gains, dtype=float)
    if not gains.size:
        return 0.0, 0.0
    return float(gains.max()), float(gains.mean())


def payment_fairness(
    ids: np.ndarray, payments: np.ndarray, contributions: dict[int, float] | None
) -> float:
    """1 − ½·Σ_i |s_i − c_i| over the clients paid or valued: payment shares s_i = pay_i/Σpay
    against clipped contribution shares c_i = max(φ_i, 0)/Σ_j max(φ_j, 0) (φ: the round's
    contribution estimate, e.g. Shapley values of the accuracy gain).

    In [0, 1]: 1 when payments follow contributions exactly, 0 when they go to disjoint
    clients (½·L1 is the total-variation distance of two distributions). NaN when there is no
    estimate, nobody was paid, or no contribution is positive.

    >>> payment_fairness(np.array([0, 1]), np.array([3.0, 1.0]), {0: 0.5, 1: 0.5})
    0.75
    """
    if contributions is None:
        return float("nan")
    pay = np.asarray(payments, dtype=float)
    total_pay = float(pay.sum())
    valued = {int(k): max(float(v), 0.0) for k, v in contributions.items() if np.isfinite(v)}
    total_value = sum(valued.values())
    if not total_pay > 0 or not total_value > 0:
        return float("nan")
    everyone = sorted(set(np.asarray(ids, dtype=np.int64).tolist()) | set(valued))
    where = {cid: k for k, cid in enumerate(everyone)}
    s = np.zeros(len(everyone))
    np.add.at(s, [where[int(c)] for c in ids], pay / total_pay)
    c = np.array([valued.get(cid, 0.0) for cid in everyone]) / total_value
    return float(1.0 - 0.5 * np.abs(s - c).sum())


def accuracy_per_cost(gain_points: float, cost: float) -> float:
    """Accuracy points gained per reward unit paid (0 where nothing was paid or the gain is
    unknown)."""
    if not cost > 0 or not np.isfinite(gain_points):
        return 0.0
    return float(gain_points / cost)


def contest_deviation_gains(
    rho: np.ndarray,
    nu: np.ndarray,
    *,
    reward: float,
    phi: float,
    quadratic: bool,
    caps: np.ndarray,
    which: np.ndarray,
) -> np.ndarray:
    """Ex-post regret of players ``which`` (positions) in a Tullock contest as it was played.

    Player i was paid ρ_i/Σρ·R and bore φ·ν_i·c(ρ_i) (c(x) = x, or x² when ``quadratic``;
    QI-DPFL Eqs. 16-17). Its gain is max over ρ' in [0, cap_i] of U_i(ρ', ρ_−i) − U_i(ρ),
    the others' played ρ held fixed. The best response is Eq. 21's closed form
    max(0, sqrt(R·S_−i/(φν_i)) − S_−i) clipped to the cap (linear cost,
    :func:`fedgame.game.stackelberg.follower_best_response`) or the root of the first-order
    condition (quadratic, :meth:`fedgame.game.equilibrium.FollowerUtility.
    analytic_best_response`); ρ' = 0 (worth 0) is the other candidate. Where the others
    played nothing no maximiser exists and the supremum R (ρ' → 0+) is used, as the Nash
    gaps do (:mod:`fedgame.game.diagnostics`); a player with no budget left (cap 0) has no
    other move. With R ≤ 0 the best deviation is ρ' = 0, a gain of the cost borne. Units:
    reward units, ≥ 0.

    >>> rho = np.array([0.25, 0.25]); nu = np.ones(2)
    >>> contest_deviation_gains(rho, nu, reward=1.0, phi=1.0, quadratic=False,
    ...                         caps=np.full(2, np.inf), which=np.array([0]))
    array([0.])
    """
    rho = np.asarray(rho, dtype=float)
    nu = np.asarray(nu, dtype=float)
    which = np.asarray(which, dtype=np.int64)
    mine, nu_w = rho[which], nu[which]
    cost_now = phi * nu_w * (mine * mine if quadratic else mine)
    if not reward > 0:
        return cost_now
    cap = np.asarray(caps, dtype=float)[which]
    total = float(rho.sum())
    others = total - mine
    now = (reward * mine / total if total > 0 else np.zeros(which.size)) - cost_now
    if quadratic:
        from fedgame.game.equilibrium import FollowerUtility

        all_caps = np.asarray(caps, dtype=float)
        game = FollowerUtility(
            nu, reward, phi, cost="quadratic", caps=np.where(all_caps > 0, all_caps, np.inf)
        )
        br = np.array([game.analytic_best_response(i, rho) or 0.0 for i in which.tolist()])
    else:
        br = follower_best_response(others, reward=reward, nu=nu_w, phi=phi)
    br = np.minimum(br, cap)
    rivals = others > 0
    total_br = np.where(rivals, br + others, 1.0)
    paid = reward * br / total_br
    best = np.where(
        rivals, np.maximum(0.0, paid - phi * nu_w * (br * br if quadratic else br)), reward
    )
    best = np.where(cap > 0, best, now)  # no budget left: no other move
    return np.maximum(0.0, best - now)
