"""The model's per-round check of the game: diagnostics for every policy, and degeneracy.

``FedGameModel`` runs :meth:`RoundMonitor.check` at the start of phase 10 (collect). It reads
the round from the model's client table and calls the pure functions of
:mod:`fedgame.game.diagnostics`, :mod:`fedgame.game.contest` and :mod:`fedgame.game.degeneracy`.
It is the only stateful part of the game's maths: the last reward (for jumps), the run's
:class:`~fedgame.game.degeneracy.DegeneracyLog` and whether the run should stop.

Every run's rounds table gains

* ``noise_norm_over_clip``: the released average's noise L2 norm over the clipping bound C,
  sqrt(d·Σ_k w_k²σ_k²)/C over the delivered clients with the aggregation weights w_k
  (:mod:`fedgame.game.noise`; NaN when nothing was delivered or the noise is added to the
  aggregate by a central mechanism);
* ``failed_edges``: client-client links down this round (``failed_links`` counts only the
  client-server links).

When the incentive offers a contest (:class:`OffersContest`), the rounds table gains

* ``nash_gap_max`` / ``nash_gap_mean``: ex-post absolute Nash gaps of the delivered clients;
* ``nash_gap_norm_max``: the same, normalised by the client's payment;
* ``nash_gap_ante_max`` / ``nash_gap_ante_norm_max``: ex-ante gaps of every player against the
  offer, in expectation over delivery (straggle probabilities), budgets as caps;
* ``eq_distance``: Σ|ρ − ρ*|/Σρ* over the players, ρ* the complete-information equilibrium
  (ν, straggle probabilities and budgets known; the cartel if the game has one);
* ``sum_rho_played``: Σρ of every response (delivered or not); ``client_surplus``: the delivered
  clients' payments minus privacy costs;
* ``knife_edge_impact``: |R*_{−m} − R*|/R*, how much the leader's optimal reward (complete
  information, the incentive's own ``optimal_reward``) changes without the marginal player m
  (the smallest positive delivered budget); 1 when no contest is left without it, NaN when
  it cannot be computed (fewer than two contributors, an incentive that does not price);

and the clients table ``rho_equilibrium`` (ρ_i*), ``nash_gap`` (ex post) and ``nash_gap_ante``.
With ``game.cartel`` (linear cost, members delivering for sure) the gaps treat the cartel as
one player (:func:`~fedgame.game.diagnostics.cartel_gap`; a member's ``nash_gap`` columns hold
its cartel's gap), and the members' own unilateral defection gains go to their own columns:
``cartel_defection_gain_max`` / ``cartel_defection_gain_norm_max`` (rounds, ex ante) and
``defection_gain`` (clients, ex ante).
When the leader plays against a belief about ν (:class:`LearnsPrivacyValues`), the rounds
table gains ``belief_error`` and ``belief_error_max``: the mean and largest |log ν̂_i − log ν_i|
over the round's players, ν̂ the values the leader used, ν the true ones (measured here, not by
the leader, which does not know them), and ``belief_error_active``: the mean over the players
that contributed (ρ_i > 0; a client that stays out reveals only a bound on its ν).
Every run gains ``degenerate`` and ``degenerate_reason`` (written by the collector).
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fedgame.errors import ScenarioError
from fedgame.game.degeneracy import DegeneracyLog, kinds_of
from fedgame.game.diagnostics import Gaps, as_one_player, cartel_gap, gaps_of
from fedgame.game.noise import noise_norm_over_clip
from fedgame.game.rules import GameRules
from fedgame.mechanisms.base import WeightedSumAggregator
from fedgame.mechanisms.policy.game import equilibrium
from fedgame.mechanisms.policy.market import Contest, contest_of, rho_left
from fedgame.privacy.base import FinalisesAggregate, charge_columns
from fedgame.views import ClientValues, MarketView, Offer

ROUND_COLUMNS = (
    "nash_gap_max",
    "nash_gap_mean",
    "nash_gap_norm_max",
    "nash_gap_ante_max",
    "nash_gap_ante_norm_max",
    "eq_distance",
    "sum_rho_played",
    "client_surplus",
    "knife_edge_impact",
)
CLIENT_COLUMNS = ("rho_equilibrium", "nash_gap", "nash_gap_ante")
#: every run's round columns (module doc)
NOISE_COLUMNS = ("noise_norm_over_clip", "failed_edges")
#: with ``game.cartel``: the members' own defection gains
CARTEL_ROUND_COLUMNS = ("cartel_defection_gain_max", "cartel_defection_gain_norm_max")
CARTEL_CLIENT_COLUMNS = ("defection_gain",)
#: a client with less zCDP budget left than this is out of the game (``budget_aware``'s
#: default ``min_rho``): a deviation it cannot afford is not counted as a gap
MIN_LEFT = 1e-6


@runtime_checkable
class OffersContest(Protocol):
    """Capability of an incentive: its offer is a Tullock contest (``Offer.plan`` carries
    ``phi``, ``quadratic`` and ``cap``).

    Declared by ``offers_contest = True`` on the class. The model then prices the round as
    a contest in which each player is paid ρ_i/Σρ·R_t and pays φ·ν_i·ρ_i: the rounds table
    gains the Nash gaps, ``eq_distance``, ``sum_rho_played``, ``client_surplus`` and
    ``knife_edge_impact``, the clients table ``rho_equilibrium``, ``nash_gap`` and
    ``nash_gap_ante``, and ``no_market`` is checked. An incentive that does not declare it
    gets none of these (see docs/plugins.md, "What the model does with your incentive")."""

    offers_contest: bool


@runtime_checkable
class LearnsPrivacyValues(Protocol):
    """Capability of an incentive: a leader that may play against a belief about ν
    (``learns_privacy_values`` says whether it does in this run); ``believed_privacy_values``
    reads the ν̂ it used from the terms of the offer it made."""

    @property
    def learns_privacy_values(self) -> bool: ...

    def believed_privacy_values(self, offer: Offer) -> ClientValues: ...


@runtime_checkable
class PricesContest(Protocol):
    """Capability of an incentive: its cost-minimising reward for a set of players
    (``problem``: a :class:`fedgame.mechanisms.incentive.game.LeaderProblem`), which the
    round check asks with and without the marginal player (``knife_edge_impact``)."""

    def optimal_reward(self, problem: Any, *, t: int) -> float: ...


BELIEF_COLUMNS = ("belief_error", "belief_error_max", "belief_error_active")


class RoundMonitor:
    """Per-round game diagnostics and degeneracy check (module doc).

    Args:
        rules: the scenario's ``game:`` rules.
        contest: whether the incentive offers a contest (adds the game columns).
        clip: the privacy mechanism's clipping bound (noise is measured against it).
        incentive: the incentive plug-in (a leader with a belief adds the belief columns).
    """

    def __init__(
        self, rules: GameRules, *, contest: bool, clip: float, incentive: Any = None
    ) -> None:
        self.rules = rules
        self.contest = contest
        self.clip = clip
        learns = isinstance(incentive, LearnsPrivacyValues) and incentive.learns_privacy_values
        self.believer: LearnsPrivacyValues | None = incentive if learns else None
        self.pricer: PricesContest | None = (
            incentive if contest and isinstance(incentive, PricesContest) else None
        )
        self.cartel = contest and rules.cartel
        self.round_columns: tuple[str, ...] = (*NOISE_COLUMNS, *(ROUND_COLUMNS if contest else ()))
        self.client_columns: tuple[str, ...] = CLIENT_COLUMNS if contest else ()
        if self.cartel:
            self.round_columns = (*self.round_columns, *CARTEL_ROUND_COLUMNS)
            self.client_columns = (*self.client_columns, *CARTEL_CLIENT_COLUMNS)
        if self.believer is not None:
            self.round_columns = (*self.round_columns, *BELIEF_COLUMNS)
        self.log = DegeneracyLog()
        self.kinds: tuple[str, ...] = ()
        self.stop_requested = False
        self.previous_reward = math.nan
        self._round: dict[str, float] = {}
        self._left_at_play: np.ndarray | None = None

    def at_play(self, table: Any) -> None:
        """Note the state the followers play in (called once the offer is out, before any
        budget is charged): every client's remaining zCDP budget then, the caps of the
        round's equilibrium (shared with the leader's and the followers' reading of it)."""
        if self.contest:
            self._left_at_play = rho_left(table.views())

    def check(self, model: Any) -> None:
        """Diagnose the round the model just played (writes the clients-table columns).

        Reads the table's columns, valid by construction, and so calls the unchecked cores
        of the public functions (:func:`~fedgame.game.degeneracy.kinds_of`,
        :func:`~fedgame.game.diagnostics.gaps_of`): the same numbers, without validating
        the same columns again."""
        table, state = model.table, model.state
        offer = state.offer
        uploaded = np.flatnonzero(table.uploaded)
        rho_up = _nan_to_zero(table.response_rho[uploaded])
        paid = table.reward[uploaded]
        nan = math.nan
        self._round = {
            "noise_norm_over_clip": self._noise_norm(model),
            "failed_edges": len(state.faults.failed_edges) if state.faults else 0,
        }
        contest = None
        if self.contest:
            market = MarketView(table.views(), state.info, game=self.rules)
            left = self._left_at_play
            if left is None:
                raise RuntimeError("RoundMonitor.check needs at_play(table) earlier in the round")
            self._left_at_play = None  # one round's state
            contest = contest_of(offer, market, left=left, min_left=MIN_LEFT)
            self._round.update(dict.fromkeys(ROUND_COLUMNS, nan))
            if self.cartel:
                self._round.update(dict.fromkeys(CARTEL_ROUND_COLUMNS, nan))
            impact = self._knife_edge_impact(model, contest, uploaded, rho_up)
            self._round["knife_edge_impact"] = impact
        self.kinds = kinds_of(
            reward=float(offer.reward),
            previous_reward=self.previous_reward,
            budgets=rho_up,
            payments=paid,
            noise_norm=self._round["noise_norm_over_clip"],
            thresholds=self.rules.degeneracy,
            uploaded=int(uploaded.size),
            market=self.contest,
            players=int(np.count_nonzero(contest.players)) if contest is not None else 0,
            knife_edge_impact=self._round.get("knife_edge_impact", nan),
        )
        self.previous_reward = float(offer.reward)
        self.log.record(state.info.round, self.kinds)
        if self.kinds and self.rules.stop_on_degenerate:
            self.stop_requested = True
        if contest is not None:
            self._diagnose(model, contest, uploaded, rho_up, paid)
        if self.believer is not None:
            self._round.update(self._belief_error(table, offer))

    def _noise_norm(self, model: Any) -> float:
        """The round's ``noise_norm_over_clip`` (module doc; :mod:`fedgame.game.noise`)."""
        state = model.state
        plan = state.privacy
        ok = state.uploaded
        if plan is None or not ok.any() or isinstance(model.privacy, FinalisesAggregate):
            return math.nan
        ids = state.selected[ok]
        sigma = np.asarray(plan.noise_std, dtype=float)[ok]
        aggregator = model.server.aggregation
        weights = (
            np.asarray(aggregator.weights(model.table.views(ids)), dtype=float)
            if isinstance(aggregator, WeightedSumAggregator)
            else None
        )
        charges = charge_columns(plan.charges)
        steps = charges.steps[ok] if plan.step_noise_std is not None else None
        laplace = bool(np.any(charges.noise[ok] == "laplace"))
        return noise_norm_over_clip(
            sigma,
            weights,
            dim=int(model.learner.num_params),
            clip=self.clip,
            steps=steps,
            laplace=laplace,
        )

    def _knife_edge_impact(
        self, model: Any, contest: Contest, uploaded: np.ndarray, rho_up: np.ndarray
    ) -> float:
        """|R*_{−m} − R*|/R* of the marginal player m (module doc); NaN when not computed."""
        positive = rho_up > 0
        if self.pricer is None or contest.reward <= 0 or np.count_nonzero(positive) < 2:
            return math.nan
        marginal = int(uploaded[positive][np.argmin(rho_up[positive])])
        players = np.flatnonzero(contest.players)
        if marginal not in players:
            return math.nan
        t = max(int(model.state.info.round), 1)
        with_m = self._optimal_reward(model, contest, players, t)
        without = self._optimal_reward(model, contest, players[players != marginal], t)
        if not with_m > 0 or math.isnan(without):
            return math.nan
        return abs(without - with_m) / with_m

    def _optimal_reward(self, model: Any, contest: Contest, players: np.ndarray, t: int) -> float:
        """The leader's optimal reward for ``players`` at the true ν (0: no contest)."""
        from fedgame.mechanisms.incentive.game import LeaderProblem

        assert self.pricer is not None
        if players.size < 2:
            return 0.0
        problem = LeaderProblem(
            contest.nu[players],
            model.table.dataset_size[players].astype(float),
            contest.p[players],
            contest.left[players],
            contest.colluder[players],
            self.rules,
        )
        try:
            return float(self.pricer.optimal_reward(problem, t=t))
        except ScenarioError:  # fewer than two active players: no contest, no reward
            return 0.0

    def _diagnose(
        self,
        model: Any,
        contest: Contest,
        uploaded: np.ndarray,
        rho_up: np.ndarray,
        paid: np.ndarray,
    ) -> None:
        table = model.table
        left = contest.left
        played = _nan_to_zero(np.where(table.participating, table.response_rho, 0.0))
        self._round["sum_rho_played"] = float(played.sum())
        nu, phi, quad = contest.nu, contest.phi, contest.quadratic
        nu_up = nu[uploaded]
        cost = phi * nu_up * (rho_up**2 if quad else rho_up)
        self._round["client_surplus"] = float((paid - cost).sum())
        reward = contest.reward
        if reward <= 0:
            return
        cap = np.minimum(left, contest.cap)
        players = contest.players | (played > 0)
        every = bool(players.all())  # the usual case: no subsets to copy
        full_delivery = not np.any(contest.p[contest.colluder] < 1)
        cartel = self.cartel and full_delivery and not quad and bool(contest.colluder.any())

        def pick(values: np.ndarray) -> np.ndarray:
            return values if every else values[players]

        played_players, p_players = pick(played), pick(contest.p)
        p_ante = None if np.all(p_players == 1.0) else p_players  # p ≡ 1: the same numbers
        caps_players = pick(cap)
        ante = gaps_of(
            played_players,
            pick(nu),
            reward=reward,
            phi=phi,
            quadratic=quad,
            p=p_ante,
            caps=caps_players,
        )
        if cartel:
            members = pick(contest.colluder)
            own = Gaps(ante.absolute[members], ante.normalised[members])
            self._round["cartel_defection_gain_max"] = own.max
            self._round["cartel_defection_gain_norm_max"] = own.normalised_max
            table.extra["defection_gain"][np.flatnonzero(players & contest.colluder)] = own.absolute
            one = cartel_gap(
                played_players,
                pick(nu),
                reward=reward,
                phi=phi,
                p=p_ante,
                caps=caps_players,
                cartel=members,
            )
            absolute = np.where(members, one[0], ante.absolute)
            ante = as_one_player(ante, members, one)
        else:
            absolute = ante.absolute
        self._round["nash_gap_ante_max"] = ante.max
        self._round["nash_gap_ante_norm_max"] = ante.normalised_max
        table.extra["nash_gap_ante"][players] = absolute
        if uploaded.size:
            post = gaps_of(
                rho_up, nu_up, reward=reward, phi=phi, quadratic=quad, p=None, caps=cap[uploaded]
            )
            absolute_post = post.absolute
            members_up = contest.colluder[uploaded]
            if cartel and members_up.any():
                one = cartel_gap(
                    rho_up,
                    nu_up,
                    reward=reward,
                    phi=phi,
                    p=None,
                    caps=cap[uploaded],
                    cartel=members_up,
                )
                absolute_post = np.where(members_up, one[0], post.absolute)
                post = as_one_player(post, members_up, one)
            self._round["nash_gap_max"] = post.max
            self._round["nash_gap_mean"] = post.mean
            self._round["nash_gap_norm_max"] = post.normalised_max
            table.extra["nash_gap"][uploaded] = absolute_post
        star = equilibrium(
            contest,
            contest.players,
            complete_information=True,
            cartel=self.rules.cartel and full_delivery,
            caps=left,
        )
        table.extra["rho_equilibrium"][contest.players] = star[contest.players]
        star_players = pick(star)
        total = float(star_players.sum())  # equilibrium_distance, of checked arrays
        if total > 0:
            distance = np.abs(played_players - star_players).sum() / total
            self._round["eq_distance"] = float(distance)

    def _belief_error(self, table: Any, offer: Offer) -> dict[str, float]:
        """|log ν̂ − log ν| over the players the leader priced in ``offer``: mean, max, mean
        over the contributors (NaN: none)."""
        assert self.believer is not None
        believed = self.believer.believed_privacy_values(offer)
        if not len(believed):
            return dict.fromkeys(BELIEF_COLUMNS, math.nan)
        ids = believed.ids
        error = np.abs(np.log(believed.array) - np.log(table.privacy_value[ids]))
        played = table.participating[ids] & (np.nan_to_num(table.response_rho[ids]) > 0)
        return {
            "belief_error": float(error.mean()),
            "belief_error_max": float(error.max()),
            "belief_error_active": float(error[played].mean()) if played.any() else math.nan,
        }

    def round_metrics(self) -> dict[str, float]:
        return dict(self._round)

    def client_metrics(self) -> dict[str, Any]:
        return {}  # written into the table by check()

    @property
    def degenerate_reason(self) -> str:
        """This round's kinds joined by ``;`` (empty when sound)."""
        return ";".join(self.kinds)


def _nan_to_zero(values: np.ndarray) -> np.ndarray:
    """``np.nan_to_num(values, nan=0.0)`` (NaN to 0, ±inf to the largest finite floats),
    with a quick path for the usual column without infinities."""
    out = np.where(np.isnan(values), 0.0, values)
    if np.isinf(out).any():
        out = np.nan_to_num(out, nan=0.0)
    return out
