"""Is a round's play degenerate? One pure check per round, and the run's record of them.

A round is degenerate when one of these holds (thresholds: :class:`~fedgame.game.rules.
DegeneracyThresholds`); each is a *kind* with a short name:

* ``no_players`` / ``lone_player``: a contest (reward > 0) in which nobody, or fewer than
  ``min_players`` clients, delivered a positive budget. A Tullock contest needs two players;
  a lone player's best response ρ → 0+ makes its noise grow without bound while it collects
  the whole reward (note 003 §4.1).
* ``near_lone``: one player earns at least ``max_share`` of the payments.
* ``knife_edge``: a delivered budget below ``knife_edge`` times the largest one: a marginal
  client barely inside the active set, whose C_i ≈ 0 makes A_t and R_t* jump (Theorem 2).
* ``noise``: the noise on the average of the delivered updates, sqrt(Σσ_i²)/n per
  coordinate, above ``noise_ratio`` times the clipping bound C (the update's whole norm is
  at most C, so such noise drowns it).
* ``reward_jump``: R_t/R_(t−1) above ``reward_jump`` or below its inverse.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numpy.typing import ArrayLike

from fedgame.game.rules import DegeneracyThresholds

KINDS = ("no_players", "lone_player", "near_lone", "knife_edge", "noise", "reward_jump")
MESSAGES = {
    "no_players": "a reward was offered but no client delivered a budget",
    "lone_player": "fewer than the minimum number of players delivered (no contest)",
    "near_lone": "one client took nearly all of the payments",
    "knife_edge": "a delivered budget was a tiny fraction of the largest (knife-edge active set)",
    "noise": "the noise on the averaged update dwarfs the clipping bound",
    "reward_jump": "the reward jumped between consecutive rounds",
}


def degenerate_kinds(
    *,
    reward: float,
    previous_reward: float,
    rho: ArrayLike,
    payments: ArrayLike,
    noise_std: ArrayLike,
    clip: float,
    thresholds: DegeneracyThresholds,
) -> tuple[str, ...]:
    """The degenerate kinds of one round (empty: a sound round).

    Args:
        reward: this round's offered reward R_t (0 for an incentive without one).
        previous_reward: R_(t−1) (NaN in the first round).
        rho: the delivered clients' budgets (NaN or 0 for clients without one).
        payments: the delivered clients' payments.
        noise_std: the delivered clients' per-coordinate noise std.
        clip: the privacy mechanism's clipping bound C.
    """
    return kinds_of(
        reward=reward,
        previous_reward=previous_reward,
        budgets=np.nan_to_num(np.asarray(rho, dtype=float), nan=0.0),
        payments=np.asarray(payments, dtype=float),
        noise_std=np.asarray(noise_std, dtype=float),
        clip=clip,
        thresholds=thresholds,
    )


def kinds_of(
    *,
    reward: float,
    previous_reward: float,
    budgets: np.ndarray,
    payments: np.ndarray,
    noise_std: np.ndarray,
    clip: float,
    thresholds: DegeneracyThresholds,
) -> tuple[str, ...]:
    """:func:`degenerate_kinds` of float arrays, ``budgets`` without NaN (the model's
    per-round check, which has them so)."""
    th = thresholds
    kinds: list[str] = []
    playing = budgets[budgets > 0]
    if reward > 0:
        if playing.size == 0:
            kinds.append("no_players")
        elif playing.size < th.min_players:
            kinds.append("lone_player")
        if playing.size >= 2 and playing.min() < th.knife_edge * playing.max():
            kinds.append("knife_edge")
        paid = payments
        total = float(paid.sum())
        if playing.size >= th.min_players and total > 0 and paid.max() >= th.max_share * total:
            kinds.append("near_lone")
    sigma = noise_std
    if sigma.size and clip > 0:
        aggregate = float(np.sqrt(np.sum(sigma * sigma))) / sigma.size
        if aggregate > th.noise_ratio * clip:
            kinds.append("noise")
    if reward > 0 and previous_reward > 0:
        ratio = reward / previous_reward
        if ratio > th.reward_jump or ratio < 1.0 / th.reward_jump:
            kinds.append("reward_jump")
    return tuple(kinds)


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
