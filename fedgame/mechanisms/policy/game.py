"""Followers that play the QI-DPFL contest (paper 003 §III-B2, Theorem 1), batched.

A client picks its zCDP budget ρ_i for the round. The incentive's ``Offer`` announces R_t, the
excluded clients and, in ``Offer.plan``, the utility family: ``phi`` (φ_1), ``quadratic`` (1 for
a quadratic privacy cost) and ``cap`` (a budget cap for everyone). ν_i are public (note 003
§3.4), so a client with complete information computes the whole equilibrium; each policy
computes it once per round over the market's columns and answers for all its clients at once
(``respond_all``). The equilibrium is over the clients that can actually play this round
(:func:`~fedgame.mechanisms.policy.market.contest_of`: reachable, not excluded, with budget,
able to deliver); with ``game.complete_information`` the straggle probabilities are known and
utilities are expected-delivery ones; with ``game.cartel`` the colluders play as a cartel
(:mod:`fedgame.game.contest`). The quadratic-cost family is solved by its share function
(:meth:`fedgame.game.equilibrium.FollowerUtility.aggregate_equilibrium`, full delivery).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

from fedgame import reads
from fedgame.game.contest import contest_equilibrium, solve_contest
from fedgame.game.equilibrium import FollowerUtility
from fedgame.mechanisms.policy.market import Contest, contest_of, rho_left, rho_remaining
from fedgame.registry import Example, register
from fedgame.views import ClientView, MarketView, Offer, Response, Responses, ids_of

__all__ = ["BestResponse", "BudgetAware", "FixedRho", "equilibrium", "rho_remaining"]

#: relative slack when comparing a budget with what is left (floating-point inversions)
_SLACK = 1e-9


def equilibrium(
    contest: Contest,
    players: np.ndarray,
    *,
    complete_information: bool,
    cartel: bool,
    caps: np.ndarray | None = None,
) -> np.ndarray:
    """Equilibrium budgets of the ``players`` mask (0 elsewhere), one per market client.

    The contest's columns are valid by construction (ν > 0 from the scenario, p in (0, 1]
    for the players, caps >= 0), so the linear-cost game is solved by
    :func:`~fedgame.game.contest.solve_contest` without checking them again; a non-finite
    reward or φ goes through :func:`~fedgame.game.contest.contest_equilibrium`, which says
    what is wrong.
    """
    rho = np.zeros(contest.ids.size)
    k = int(np.count_nonzero(players))
    if contest.reward <= 0 or k < 2:
        return rho
    every = k == rho.size  # every client plays: whole columns, no subsets to copy
    nu = contest.nu if every else contest.nu[players]
    if contest.quadratic:
        cap = np.full(k, contest.cap)
        if caps is not None:
            cap = np.minimum(cap, caps[players])
        caps_or_none = cap if np.isfinite(cap).any() else None
        u = FollowerUtility(nu, contest.reward, contest.phi, cost="quadratic", caps=caps_or_none)
        found = u.aggregate_equilibrium()
        rho[players] = 0.0 if found is None else found
        return rho
    capped: np.ndarray | None
    if caps is None:
        capped = None if contest.cap == np.inf else np.full(k, contest.cap)
    else:  # min(inf, x) is x: the contest's cap only where it is finite
        capped = caps if every else caps[players]
        if contest.cap != np.inf:
            capped = np.minimum(np.full(k, contest.cap), capped)
    if capped is not None and not np.isfinite(capped).any():
        capped = None
    p = (contest.p if every else contest.p[players]) if complete_information else None
    members = (contest.colluder if every else contest.colluder[players]) if cartel else None
    if math.isfinite(contest.reward) and math.isfinite(contest.phi) and contest.phi > 0:
        found = solve_contest(
            nu, reward=contest.reward, phi=contest.phi, p=p, caps=capped, cartel=members
        )
    else:
        found = contest_equilibrium(
            nu, reward=contest.reward, phi=contest.phi, p=p, caps=capped, cartel=members
        )
    if every:
        return found
    rho[players] = found
    return rho


class _PerRound:
    """Computes the round's equilibrium once (keyed by round, offer and market objects)."""

    #: the level a follower chooses: its zCDP budget ρ_i (paper 003)
    chooses = "rho"

    def __init__(self) -> None:
        self._key: tuple[int, int, int] | None = None
        self._value: tuple[Contest, np.ndarray, np.ndarray] | None = None

    def solved(self, offer: Offer, market: MarketView) -> tuple[Contest, np.ndarray, np.ndarray]:
        """(contest, ρ* by client id, reason code by client id) for this round."""
        key = (market.info.round, id(offer), id(market))
        if key != self._key or self._value is None:
            self._value = self.compute(offer, market)
            self._key = key
        return self._value

    def compute(self, offer: Offer, market: MarketView) -> tuple[Contest, np.ndarray, np.ndarray]:
        raise NotImplementedError

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        """One client's answer (``respond_all`` for it alone)."""
        return self.respond_all(offer, clients=(me,), market=market)[0]

    def respond_all(
        self, offer: Offer, *, clients: Sequence[ClientView], market: MarketView
    ) -> Responses:
        """Every client of ``clients``'s budget in the round's solution (columns)."""
        _, rho, codes = self.solved(offer, market)
        ids = ids_of(clients)
        return _answer(ids, rho[ids], codes[ids])


#: reason codes of the per-round solution (index into REASONS)
REASONS = np.array(["", "no_reward", "inactive", "budget"], dtype=object)
_OK, _NO_REWARD, _INACTIVE, _BUDGET = range(4)


def _answer(ids: np.ndarray, rho: np.ndarray, codes: np.ndarray) -> Responses:
    take = codes == _OK
    reason = None if take.all() else REASONS[codes]
    return Responses(ids, take, rho=np.where(take, rho, np.nan), reason=reason)


@register("policy", "best_response", reads=reads.contest)
class BestResponse(_PerRound):
    """Complete information: play the equilibrium budget ρ_i* of the clients who can pay it.

    The equilibrium (Theorem 1 on the active set; expected-delivery, cartel or quadratic
    variants as the game says) is computed over the round's players; a player whose ρ_i*
    exceeds its remaining budget cannot play it and leaves (reason ``budget``), and the
    equilibrium of the others is computed again, until everyone left can pay. Declines with
    ``no_reward`` when R_t = 0 and ``inactive`` outside the active set (ρ_i* = 0; a lone
    player, whose best response ρ → 0+ does not exist, also stays out).
    """

    def __init__(self, config: object) -> None:
        super().__init__()
        del config

    def compute(self, offer: Offer, market: MarketView) -> tuple[Contest, np.ndarray, np.ndarray]:
        contest = contest_of(offer, market)
        rules = market.game
        codes = np.full(contest.ids.size, _INACTIVE)
        players = contest.players.copy()
        codes[(contest.left <= 0) & ~players] = _BUDGET
        while True:
            rho = equilibrium(
                contest,
                players,
                complete_information=rules.complete_information,
                cartel=rules.cartel,
            )
            short = players & (rho > contest.left * (1 + _SLACK))
            if not short.any():
                break
            players &= ~short
            codes[short] = _BUDGET
        codes[rho > 0] = _OK
        if contest.reward <= 0:
            codes[:] = _NO_REWARD
        return contest, contest.by_id(rho), contest.by_id(codes).astype(int)


@register("policy", "budget_aware", reads=reads.contest)
class BudgetAware(_PerRound):
    """Equilibrium of the game in which every budget is capped by what is left of it.

    Each player's cap is its remaining zCDP budget (public, as ν); players with less than
    ``min_rho`` left leave the game (reason ``budget``), so clients drop out as budgets run out.
    The capped equilibrium is the share-function solution with caps
    (:func:`fedgame.game.contest.contest_equilibrium`).
    """

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        min_rho: PositiveFloat = Field(
            1e-6, description="zCDP budget left below which the client leaves the game (> 0)"
        )

    def __init__(self, config: Config) -> None:
        super().__init__()
        self.min_rho = config.min_rho

    def compute(self, offer: Offer, market: MarketView) -> tuple[Contest, np.ndarray, np.ndarray]:
        contest = contest_of(offer, market, min_left=self.min_rho)
        rules = market.game
        rho = equilibrium(
            contest,
            contest.players,
            complete_information=rules.complete_information,
            cartel=rules.cartel,
            caps=contest.left,
        )
        rho = np.minimum(rho, contest.left)
        codes = np.where(rho > 0, _OK, _INACTIVE)
        if contest.reward <= 0:
            codes[:] = _NO_REWARD
        codes[contest.left < self.min_rho] = _BUDGET
        return contest, contest.by_id(rho), contest.by_id(codes).astype(int)


@register("policy", "fixed", reads=reads.BUDGET)
class FixedRho:
    """Take part every round at a constant zCDP budget ``rho`` while the budget lasts."""

    example = Example({"rho": 5.0})

    chooses = "rho"

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        rho: PositiveFloat = Field(0.1, description="zCDP budget rho played every round (> 0)")

    def __init__(self, config: Config) -> None:
        self.rho = config.rho

    def respond(self, offer: Offer, *, me: ClientView, market: MarketView) -> Response:
        return self.respond_all(offer, clients=(me,), market=market)[0]

    def respond_all(
        self, offer: Offer, *, clients: Sequence[ClientView], market: MarketView
    ) -> Responses:
        """Everyone at ``rho`` unless it is more than what is left (reason ``budget``)."""
        ok = rho_left(clients) >= self.rho * (1 - _SLACK)
        return Responses(ids_of(clients), ok, rho=np.where(ok, self.rho, math.nan), why="budget")
