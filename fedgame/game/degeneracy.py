"""Is a round's play degenerate? One pure check per round, and the run's record of them.

A round is degenerate when one of these holds (thresholds: :class:`~fedgame.game.rules.
DegeneracyThresholds`, each in the unit of the quantity it bounds); each is a *kind*:

* ``nobody_trained``: no update reached the server this round (zero uploads), whatever the
  reason (nobody willing, every budget spent, every upload lost). The model did not move.
* ``no_market``: the incentive offers a contest, but there is no market: fewer than
  ``min_players`` players (reachable, not excluded, with budget) or a reward R_t = 0.
  A lone client or a cartel that leaves one outsider earns the leader nothing to buy.
* ``no_players`` / ``lone_player``: a contest (reward > 0) in which nobody, or fewer than
  ``min_players`` clients, delivered a positive budget. A Tullock contest needs two players;
  a lone player's best response ρ → 0+ makes its noise grow without bound while it collects
  the whole reward (note 003 §4.1).
* ``near_lone``: one player earns at least ``max_share`` of the payments.
* ``knife_edge``: the marginal player (the smallest delivered budget ρ_m) holds less than
  ``knife_edge_share`` of the largest budget, yet removing it moves the leader's optimal
  reward R* by at least ``knife_edge_impact`` of R* (|R*_{−m} − R*|/R*, the round check's
  ``knife_edge_impact`` column): a client barely inside the active set that decides the
  price (Theorem 2: A_t and R_t* jump with the active set). When the impact cannot be
  computed (an incentive that does not price a contest), the budget ratio alone decides:
  ρ_m below ``knife_edge`` times the largest.
* ``noise``: the noise on the released average, its L2 norm over the clipping bound C
  (``noise_norm_over_clip``, :mod:`fedgame.game.noise`), above ``noise_norm_over_clip``: the
  round's update is mostly noise.
* ``reward_jump``: R_t/R_(t−1) above ``reward_jump`` or below its inverse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from fedgame.game.rules import DegeneracyThresholds

KINDS = (
    "nobody_trained",
    "no_market",
    "no_players",
    "lone_player",
    "near_lone",
    "knife_edge",
    "noise",
    "reward_jump",
)
MESSAGES = {
    "nobody_trained": "no update reached the server (zero uploads): the model did not move",
    "no_market": "the contest had fewer than the minimum number of players or a zero reward",
    "no_players": "a reward was offered but no client delivered a budget",
    "lone_player": "fewer than the minimum number of players delivered (no contest)",
    "near_lone": "one client took nearly all of the payments",
    "knife_edge": "a marginal client (tiny budget) moved the leader's optimal reward a lot",
    "noise": "the noise norm on the averaged update exceeds the clipping bound's threshold",
    "reward_jump": "the reward jumped between consecutive rounds",
}


def degenerate_kinds(
    *,
    reward: float,
    previous_reward: float,
    rho: ArrayLike,
    payments: ArrayLike,
    noise_norm: float,
    thresholds: DegeneracyThresholds,
    uploaded: int | None = None,
    market: bool = False,
    players: int = 0,
    knife_edge_impact: float = math.nan,
) -> tuple[str, ...]:
    """The degenerate kinds of one round (empty: a sound round).

    Args:
        reward: this round's offered reward R_t (0 for an incentive without one).
        previous_reward: R_(t−1) (NaN in the first round).
        rho: the delivered clients' budgets (NaN or 0 for clients without one).
        payments: the delivered clients' payments.
        noise_norm: the released average's noise L2 norm over C (NaN: not known).
        uploaded: updates that reached the server (None: ``len(payments)``).
        market: the incentive offers a contest (``no_market`` applies).
        players: the contest's players (reachable, not excluded, with budget).
        knife_edge_impact: |R*_{−m} − R*|/R* of the marginal player (NaN: not computed).
    """
    paid = np.asarray(payments, dtype=float)
    return kinds_of(
        reward=reward,
        previous_reward=previous_reward,
        budgets=np.nan_to_num(np.asarray(rho, dtype=float), nan=0.0),
        payments=paid,
        noise_norm=noise_norm,
        thresholds=thresholds,
        uploaded=paid.size if uploaded is None else uploaded,
        market=market,
        players=players,
        knife_edge_impact=knife_edge_impact,
    )


def kinds_of(
    *,
    reward: float,
    previous_reward: float,
    budgets: np.ndarray,
    payments: np.ndarray,
    noise_norm: float,
    thresholds: DegeneracyThresholds,
    uploaded: int,
    market: bool = False,
    players: int = 0,
    knife_edge_impact: float = math.nan,
) -> tuple[str, ...]:
    """:func:`degenerate_kinds` of float arrays, ``budgets`` without NaN (the model's
    per-round check, which has them so)."""
    th = thresholds
    kinds: list[str] = []
    if uploaded == 0:
        kinds.append("nobody_trained")
    if market and (players < th.min_players or not reward > 0):
        kinds.append("no_market")
    playing = budgets[budgets > 0]
    if reward > 0:
        if playing.size == 0:
            kinds.append("no_players")
        elif playing.size < th.min_players:
            kinds.append("lone_player")
        if playing.size >= 2 and _knife_edge(playing, knife_edge_impact, th):
            kinds.append("knife_edge")
        total = float(payments.sum())
        if playing.size >= th.min_players and total > 0 and payments.max() >= th.max_share * total:
            kinds.append("near_lone")
    if noise_norm > th.noise_norm_over_clip:  # NaN (unknown) never fires
        kinds.append("noise")
    if reward > 0 and previous_reward > 0:
        ratio = reward / previous_reward
        if ratio > th.reward_jump or ratio < 1.0 / th.reward_jump:
            kinds.append("reward_jump")
    return tuple(kinds)


def _knife_edge(playing: np.ndarray, impact: float, th: DegeneracyThresholds) -> bool:
    """The knife-edge rule of the module doc, on the positive delivered budgets."""
    ratio = float(playing.min()) / float(playing.max())
    if math.isnan(impact):
        return ratio < th.knife_edge
    return ratio < th.knife_edge_share and impact >= th.knife_edge_impact


@dataclass
class DegeneracyLog:
    """The run's degenerate rounds: per kind, the first round and how many rounds."""

    first: dict[str, int] = field(default_factory=dict)
    count: dict[str, int] = field(default_factory=dict)
    rounds: int = 0

    def record(self, round_index: int, kinds: tuple[str, ...]) -> None:
        if kinds:
            self.rounds += 1
        for kind in kinds:
            self.first.setdefault(kind, round_index)
            self.count[kind] = self.count.get(kind, 0) + 1

    def warnings(self) -> dict[str, dict[str, object]]:
        """The manifest's ``warnings``: kind -> first round, rounds, what it means."""
        return {
            kind: {
                "first_round": self.first[kind],
                "rounds": self.count[kind],
                "message": MESSAGES[kind],
            }
            for kind in KINDS
            if kind in self.first
        }

    def summary(self, rounds_run: int) -> str:
        """One line: ``degenerate play in 6 of 30 rounds: lone_player from round 25, ...``."""
        parts = ", ".join(f"{k} from round {self.first[k]}" for k in KINDS if k in self.first)
        return f"degenerate play in {self.rounds} of {rounds_run} rounds: {parts}"
