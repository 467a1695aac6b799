"""Phases 2-3 of a market round: the leaders' rewards and the clients' joint answer.

The contest each server offers is read from its offer (R_s, ``plan["phi"]``, the clients it
excluded); the clients' remaining budgets are their one ledger's (zCDP units,
:func:`fedgame.mechanisms.policy.market.rho_left`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from fedgame.game.leader import capped_reward, expected_server_cost, numeric_reward
from fedgame.market.followers import JointPlay, joint_contests
from fedgame.market.leaders import LeadersPlay, leaders_equilibrium
from fedgame.market.spec import MarketRules
from fedgame.mechanisms.incentive.qi_dpfl import QiDpfl
from fedgame.mechanisms.policy.market import rho_left
from fedgame.views import Responses

if TYPE_CHECKING:
    from fedgame.market.server import MarketServer

#: the leader's reward search: factors of its current reward (down, up) and grid points
_SCAN = (1e-2, 1e2, 41)


def contests(servers: Sequence[MarketServer]) -> tuple[np.ndarray, ...]:
    """(ν, φ per server, players [S, N], caps) of the round's contests."""
    table = servers[0].table
    nu = table.privacy_value.astype(float)
    caps = np.asarray(rho_left(table.views()), dtype=float)
    players = np.zeros((len(servers), len(table)), dtype=bool)
    phi = np.ones(len(servers))
    for s, srv in enumerate(servers):
        offer = srv.now.offer
        players[s] = srv.table.link_up
        if offer.excluded:
            players[s, np.fromiter(offer.excluded, np.int64, len(offer.excluded))] = False
        phi[s] = float(offer.plan.get("phi", 1.0))
    return nu, phi, players, caps


def play_contests(
    contest: tuple[np.ndarray, ...], rewards: np.ndarray, rules: MarketRules
) -> JointPlay:
    """The followers' joint play of ``contest`` (:func:`contests`) at the leaders' ``rewards``,
    to the rules' follower tolerance and iteration cap."""
    nu, phi, players, caps = contest
    return joint_contests(
        nu,
        rewards=rewards,
        phi=phi,
        players=players,
        caps=caps,
        tol=rules.follower_tol,
        max_iter=rules.follower_iterations,
    )


def compete(servers: Sequence[MarketServer], rules: MarketRules, t: int) -> LeadersPlay:
    """The round's rewards: the monopoly offers (``independent``), or the leaders' iterated
    best response from them (``best_response``; only leaders whose incentive optimises,
    ``qi_dpfl``, answer: a fixed, max or random reward is that leader's rule)."""
    start = np.array([srv.now.offer.reward for srv in servers], dtype=float)
    if rules.competition == "independent" or len(servers) < 2:
        return LeadersPlay(start, True, 0)
    contest = contests(servers)

    def followers(rewards: np.ndarray) -> np.ndarray:
        return play_contests(contest, rewards, rules).rho

    def best_response(s: int, rewards: np.ndarray) -> float:
        srv = servers[s]
        if not isinstance(srv.incentive, QiDpfl) or rewards[s] <= 0:
            return float(rewards[s])
        inc = srv.incentive
        params = inc.params()
        sizes = np.maximum(srv.table.dataset_size.astype(float), 1.0)
        expected = inc.config.delivery == "expected"
        p = np.clip(1.0 - srv.table.straggle_prob, 0.0, 1.0)
        t_eff = min(max(t, 1), params.rounds)

        def cost(reward: float) -> float:
            trial = rewards.copy()
            trial[s] = reward
            rho = followers(trial)[s]
            live = rho > 0
            if not live.any():
                return math.inf
            return expected_server_cost(
                reward,
                rho=rho[live],
                data_sizes=sizes[live],
                p=p[live] if expected else None,
                t=t_eff,
                params=params,
            ).total

        best = numeric_reward(cost, around=float(rewards[s]), scan=_SCAN)
        return capped_reward(best, inc.config.reward_cap)

    return leaders_equilibrium(
        best_response, start, tol=rules.leader_tol, max_iter=rules.leader_iterations
    )


def respond(servers: Sequence[MarketServer], rules: MarketRules) -> JointPlay:
    """Every client's answer to every offer (the joint play), written to each server's table:
    it takes part where its budget for that server is > 0; it declines as ``unreachable``,
    ``excluded``, ``budget`` (nothing left) or ``declined`` (a budget of 0 is its best)."""
    contest = contests(servers)
    _, _, players, caps = contest
    rewards = np.array([srv.now.offer.reward for srv in servers], dtype=float)
    play = play_contests(contest, rewards, rules)
    for s, srv in enumerate(servers):
        rho = play.rho[s]
        take = rho > 0
        reason = np.full(len(rho), "declined", dtype=object)
        reason[~players[s]] = "excluded"
        reason[~srv.table.link_up] = "unreachable"
        reason[players[s] & (caps <= 0)] = "budget"
        reason[take] = ""
        ids = srv.table.client_id
        srv.table.record_responses(
            Responses(ids.copy(), take, rho=np.where(take, rho, math.nan), reason=reason)
        )
    return play
