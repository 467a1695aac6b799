"""Shared machinery of the Stackelberg reward mechanisms (QI-DPFL, paper 003 §III-B).

The leader announces R_t; followers pick zCDP budgets ρ_i; each delivered client is paid its
share (ρ_i / Σ_j ρ_j)·R_t, the sum running over the clients whose updates were delivered this
round (so payments add up to R_t whenever anyone delivered). Subclasses choose R_t. The
round's ``welfare`` is the clients' game utilities Σ(r_i − φν_iρ_i) minus the server cost.
Every game incentive reports its outcome and measures deviations (the ``econ_*`` columns,
docs/economics.md).

Who plays: the reachable clients the selection rule deems eligible (a selection that declares
:class:`EligibleSet`, e.g. ``emd_threshold``; everyone otherwise). By default (the paper) the
leader then removes the most expensive clients until Theorem 1's interior condition holds
(note 003 §4.1); removed and ineligible clients are ``Offer.excluded``. Options (ours) make the
leader play the real game:

* ``budgets``: ``ignore`` (paper), ``exclude`` (clients with less than ``min_rho`` of their
  zCDP budget left are not players), ``cap`` (also anticipate that each player's budget is
  capped by what it has left: binding budgets, a numeric optimum);
* ``delivery``: ``ignore`` (paper) or ``expected`` (the expected server cost over independent
  deliveries with p_i = 1 − straggle_prob_i, :mod:`fedgame.game.leader`);
* ``active_set``: ``feasible`` (remove only whom Theorem 1 cannot place) or ``optimal`` (admit
  the set that minimises the leader's optimal cost, :func:`fedgame.game.leader.
  optimal_active_set`);
* ``reward_cap``: never offer more than this per round;
* ``belief``: the leader does not know ν and plays against a belief it updates from the
  followers' budgets (incomplete information, :mod:`fedgame.mechanisms.incentive.belief`).

Whenever the followers do not play Theorem 1 (binding caps, ``game.complete_information``
with stragglers, ``game.cartel``) or the cost is the expected one, the leader anticipates the
followers' actual equilibrium (:func:`fedgame.game.contest.contest_equilibrium`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from fedgame.game.belief import ContestObservation
from fedgame.game.contest import contest_equilibrium
from fedgame.game.economics import RoundOutcome, contest_deviation_gains
from fedgame.game.leader import (
    capped_reward,
    expected_server_cost,
    numeric_reward,
    optimal_active_set,
    proportional_reward,
)
from fedgame.game.magnitudes import check_game_magnitudes
from fedgame.game.rules import GameRules
from fedgame.game.stackelberg import (
    ServerCostParams,
    accuracy_constant,
    feasible_set,
    optimal_reward,
    server_cost,
)
from fedgame.mechanisms.base import FaultDraw, Settlement
from fedgame.mechanisms.incentive.belief import BeliefLeader, BeliefSpec, blind
from fedgame.mechanisms.policy.market import rho_left
from fedgame.views import (
    ClientValues,
    MarketView,
    Offer,
    Response,
    RoundInfo,
    SetupContext,
    column_of,
    ids_of,
)

ROUND_COLUMNS = (
    "reward",
    "sum_rho",
    "players",
    "server_cost_accuracy",
    "server_cost_payment",
    "server_cost",
    "payments_total",
    "welfare",
    "removed_for_feasibility",
    "solver_converged",
    "solver_residual",
)
CLIENT_COLUMNS = ("rho", "payment", "privacy_cost", "game_utility", "removed")


@runtime_checkable
class EligibleSet(Protocol):
    """Capability of a selection rule: the fixed set of clients it may ever select (None when
    it has none, e.g. a per-round rule)."""

    def eligible_ids(self) -> frozenset[int] | None: ...


class GameConfig(BaseModel):
    """Constants of the game and of the server cost, Eq. 15 (none is given by the paper), and
    how much of the real game the leader plays (module doc).

    ``phi`` is φ_1; ``dim`` the number d of noised coordinates (default: the model's parameter
    count, read from the learner before round 1: 7850 for logreg on 28×28 images, 650 on
    digits); ``lam`` (λ) is the knob that sets the noise level through R_t* (note 003 §4.2).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    phi: PositiveFloat = Field(
        1.0, description="privacy-cost weight phi_1 > 0 (utility units per unit zCDP rho)"
    )
    gamma: float = Field(
        0.5, gt=0, lt=1, description="weight gamma in (0, 1) of accuracy loss vs payments (Eq. 15)"
    )
    discount: float = Field(
        0.9429, gt=0, le=1, description="discount factor pi in (0, 1] (Table I: 0.9429 MNIST)"
    )
    beta: PositiveFloat = Field(1.0, description="smoothness beta > 0 (Assumption 1)")
    lam: PositiveFloat = Field(
        1.0, description="strong convexity lambda > 0 (Assumption 2); sets the noise level via R*"
    )
    clip: PositiveFloat = Field(1.0, description="clipping bound C > 0 in the server cost")
    dim: PositiveInt | None = Field(
        None, description="noised coordinates d (default: the model's parameter count)"
    )
    grad_bound: float = Field(0.0, ge=0, description="gradient bound V >= 0 (constant cost term)")
    budgets: Literal["ignore", "exclude", "cap"] = Field(
        "ignore",
        description="remaining budgets: ignore (paper), exclude those below min_rho, or cap",
    )
    min_rho: PositiveFloat = Field(
        1e-6, description="zCDP budget left below which a client is no player (budgets != ignore)"
    )
    delivery: Literal["ignore", "expected"] = Field(
        "ignore", description="server cost: ignore stragglers (paper) or expected over delivery"
    )
    active_set: Literal["feasible", "optimal"] = Field(
        "feasible",
        description="admit Theorem 1's feasible set (paper) or the cost-minimising set",
    )
    reward_cap: PositiveFloat | None = Field(
        None, description="largest reward R_t offered per round (none: uncapped)"
    )
    belief: BeliefSpec | None = Field(
        None,
        description="belief about nu: {kind, prior, obs_sd, explore} (none: nu is known)",
    )

    @model_validator(mode="after")
    def _explore_needs_optimal_set(self) -> GameConfig:
        if self.belief is not None and self.belief.explore > 0 and self.active_set != "optimal":
            raise ValueError(
                "belief.explore > 0 needs active_set: optimal (only that leader keeps clients "
                "out on its guess; with the feasible set every player is asked)"
            )
        return self


@dataclass(frozen=True)
class LeaderProblem:
    """The admitted players of a round as the leader models them (arrays over the players).

    ``p`` are delivery probabilities, ``left`` remaining zCDP budgets, ``colluder`` the
    cartel flags; ``rules`` the game's rules.
    """

    nu: np.ndarray
    sizes: np.ndarray
    p: np.ndarray
    left: np.ndarray
    colluder: np.ndarray
    rules: GameRules


@dataclass(frozen=True)
class ContestTerms:
    """What a contest leader fixed at its offer and reads again (``Offer.terms``): the
    admitted ``players`` and the ``removed`` ids; by client id, the true ν (``nu``: the
    settlement accounts at it), ν̂ of a leader with a belief (``believed``; None without),
    |D_i| (``sizes``) and the zCDP budget left at the offer (``left``); ``solver``, the
    (converged, residual) of the round's numeric solve."""

    players: np.ndarray
    removed: np.ndarray
    nu: np.ndarray
    sizes: np.ndarray
    left: np.ndarray
    believed: np.ndarray | None = None
    solver: tuple[float, float] = (1.0, 0.0)


def contest_terms(offer: Offer) -> ContestTerms:
    """The offer's :class:`ContestTerms` (``ValueError`` when it was not a contest leader's)."""
    return offer.terms_as(ContestTerms, leader="a contest leader")


class GameIncentive:
    """Base leader: player set, active set, reward-share payments and bookkeeping.

    The round travels in the offer's :class:`ContestTerms` and the :class:`Settlement`;
    kept on the leader are only its set-up (``prepare``) and its cross-round memory: the
    belief (``beliefs``), ``last_sum_rho`` (the previous round's Σρ, in the next offer's
    plan) and caches keyed by their inputs (``_params``, ``_active_cache``).
    """

    round_columns: tuple[str, ...] = ROUND_COLUMNS
    client_columns: tuple[str, ...] = CLIENT_COLUMNS
    #: the offer is a Tullock contest with ``phi``/``quadratic``/``cap`` in its plan
    offers_contest = True
    reports_outcome = True
    remove_infeasible = True
    quadratic = False
    cap = math.inf

    def __init__(self, config: GameConfig) -> None:
        self.config = config
        self.rounds = 1
        self.dim = config.dim or 7850
        self.selection: EligibleSet | None = None
        self.rng: np.random.Generator | None = None
        # cross-round memory: the previous round's Σρ (read by the next offer's plan)
        self.last_sum_rho = math.nan
        # caches keyed by their inputs
        self._active_cache: tuple[bytes, np.ndarray] | None = None
        self._params: tuple[GameConfig, int, int, ServerCostParams] | None = None
        # cross-round memory: the belief about ν (incomplete information)
        self.beliefs = None if config.belief is None else BeliefLeader(config.belief)
        if self.beliefs is not None:
            self.client_columns = (*CLIENT_COLUMNS, "nu_believed")

    @staticmethod
    def check_scenario(config: GameConfig, scenario: Any, *, key: str) -> None:
        """Validation: the game's derived quantities stay finite for this population
        (:func:`fedgame.game.magnitudes.check_game_magnitudes`)."""
        check_game_magnitudes(config, scenario, key=key)

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        self.rounds = ctx.rounds
        if self.config.dim is None and ctx.learner is not None:
            self.dim = int(ctx.learner.num_params)
        selection = ctx.selection
        self.selection = selection if isinstance(selection, EligibleSet) else None
        self.rng = rng
        if self.beliefs is not None:
            self.beliefs.start(ctx.num_clients)

    def params(self) -> ServerCostParams:
        """The server-cost constants (built again only when the config, ``dim`` or ``rounds``
        change)."""
        cached = self._params
        if cached is None or cached[0] is not self.config or cached[1:3] != (self.dim, self.rounds):
            cached = self._params = (self.config, self.dim, self.rounds, self._build_params())
        return cached[3]

    def _build_params(self) -> ServerCostParams:
        c = self.config
        return ServerCostParams(
            gamma=c.gamma,
            discount=c.discount,
            beta=c.beta,
            lam=c.lam,
            clip=c.clip,
            dim=self.dim,
            rounds=self.rounds,
            grad_bound=c.grad_bound,
        )

    # ------------------------------------------------------------------ the leader's move
    def privacy_values(self, market: MarketView) -> np.ndarray:
        """ν of every market client as the leader knows it: the true values (public ν), or
        its belief's estimate ν̂ when it has one."""
        if self.beliefs is not None:
            return self.beliefs.estimate(ids_of(market.clients))
        return column_of(market.clients, "privacy_value")

    @property
    def learns_privacy_values(self) -> bool:
        """Whether the leader plays against a belief about ν (``belief`` set)."""
        return self.beliefs is not None

    def believed_privacy_values(self, offer: Offer) -> ClientValues:
        """ν̂ the leader used in ``offer``, by player (its belief; empty without one)."""
        terms = offer.terms
        if not isinstance(terms, ContestTerms) or terms.believed is None:
            return ClientValues(np.zeros(0, np.int64), np.zeros(0))
        if not terms.players.size:
            return ClientValues(np.zeros(0, np.int64), np.zeros(0))
        return ClientValues(terms.players, terms.believed[terms.players])

    def choose_reward(self, problem: LeaderProblem, *, t: int) -> float:
        """R_t for the admitted players; subclasses implement it."""
        raise NotImplementedError

    def priced(self, problem: LeaderProblem, *, t: int) -> tuple[float, tuple[float, float]]:
        """R_t and the (converged, residual) of the solve that found it (closed forms: (1, 0))."""
        return self.choose_reward(problem, t=t), (1.0, 0.0)

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        """The round's offer. A leader with a belief first learns from the last round's
        record, then decides on a market whose views do not carry ν; the true ν is read only
        afterwards, to account the round's outcome (``privacy_cost``, ``welfare``)."""
        if self.beliefs is None:
            return self._decide(market, info=info)
        self.beliefs.learn(market.previous)
        offer = self._decide(blind(market), info=info)
        terms = contest_terms(offer)
        truth = _by_id(ids_of(market.clients), column_of(market.clients, "privacy_value"))
        return replace(offer, terms=replace(terms, believed=terms.nu, nu=truth))

    def _decide(self, market: MarketView, *, info: RoundInfo) -> Offer:
        clients = market.clients
        ids = ids_of(clients)
        players = column_of(clients, "reachable", bool).copy()
        allowed = self.selection.eligible_ids() if self.selection is not None else None
        if allowed is not None:
            players &= np.isin(ids, np.fromiter(allowed, np.int64, len(allowed)))
        left = rho_left(clients)
        if self.config.budgets != "ignore":
            players &= left >= self.config.min_rho
        nu = self.privacy_values(market)
        sizes = column_of(clients, "dataset_size")
        admit_by = nu  # an exploring leader admits by optimistic values (belief.explore)
        if self.beliefs is not None and self.beliefs.spec.explore > 0:
            admit_by = self.beliefs.optimistic(ids)
        chosen = self._admit(admit_by, sizes, players)
        solver = (1.0, 0.0)
        reward = 0.0
        if chosen.sum() >= 2:
            problem = LeaderProblem(
                nu[chosen],
                sizes[chosen],
                np.clip(1.0 - column_of(clients, "straggle_prob")[chosen], 0.0, 1.0),
                left[chosen],
                column_of(clients, "colluder", bool)[chosen],
                market.game,
            )
            reward, solver = self.priced(problem, t=max(info.round, 1))
            reward = capped_reward(reward, self.config.reward_cap)
        if self.beliefs is not None:  # the followers' contest: who can deliver (p > 0)
            asked = chosen & (column_of(clients, "straggle_prob") < 1.0)
            self.beliefs.offered(
                ContestObservation(
                    ids[asked],
                    np.full(int(asked.sum()), math.nan),
                    reward=reward,
                    phi=self.config.phi,
                    p=self._followers_p(clients, market.game)[asked],
                    caps=np.minimum(left[asked], self.cap),
                    quadratic=self.quadratic,
                )
            )
        plan = {
            "phi": self.config.phi,
            "quadratic": float(self.quadratic),
            "cap": self.cap,
            "sum_rho_prev": self.last_sum_rho,
        }
        terms = ContestTerms(
            players=ids[chosen],
            removed=ids[players & ~chosen],
            nu=_by_id(ids, nu),
            sizes=_by_id(ids, sizes),
            left=_by_id(ids, left),
            solver=solver,
        )
        excluded = frozenset(ids[~chosen].tolist())
        return Offer(reward=reward, plan=plan, excluded=excluded, terms=terms)

    def _admit(self, nu: np.ndarray, sizes: np.ndarray, players: np.ndarray) -> np.ndarray:
        """Mask of the admitted players (the paper's feasible set, or the optimal one)."""
        chosen = players.copy()
        if not players.any():
            return chosen
        if self.config.active_set == "optimal":
            key = players.tobytes() + nu.tobytes() + sizes.tobytes()
            if self._active_cache is None or self._active_cache[0] != key:
                best = optimal_active_set(
                    nu[players], sizes[players], phi=self.config.phi, params=self.params()
                )
                self._active_cache = (key, best)
            chosen[players] = self._active_cache[1]
        elif self.remove_infeasible and self.beliefs is None:
            chosen[players] = feasible_set(nu[players])  # never on a guess (module doc)
        return chosen

    @staticmethod
    def _followers_p(clients: Sequence[Any], rules: GameRules) -> np.ndarray:
        """Delivery probabilities the followers weigh: 1 − straggle_prob when straggling is
        common knowledge, else 1 (they best-respond to the offered contest)."""
        straggle = column_of(clients, "straggle_prob")
        if not rules.complete_information:
            return np.ones(straggle.size)
        return np.clip(1.0 - straggle, 0.0, 1.0)

    def anticipates_response(self, problem: LeaderProblem) -> bool:
        """Whether the followers' equilibrium differs from Theorem 1's ρ = C·R (or the leader's
        cost from Eq. 15), so that R* needs the general solution."""
        c, rules = self.config, problem.rules
        stragglers = bool(np.any(problem.p < 1.0))
        return (
            c.budgets == "cap"
            or (c.delivery == "expected" and stragglers)
            or (rules.complete_information and stragglers)
            or (rules.cartel and bool(problem.colluder.any()))
        )

    def optimal_reward(self, problem: LeaderProblem, *, t: int) -> float:
        """The leader's cost-minimising R_t: Theorem 2, or the general solution (module doc)."""
        params = self.params()
        t = min(t, params.rounds)
        if not self.anticipates_response(problem):
            a = accuracy_constant(problem.nu, problem.sizes, phi=self.config.phi, params=params)
            return optimal_reward(a, t=t, params=params)
        rules = problem.rules
        p_follow = problem.p if rules.complete_information else None
        p_cost = problem.p if self.config.delivery == "expected" else None
        cartel = problem.colluder if rules.cartel else None

        def response(reward: float, caps: np.ndarray | None) -> np.ndarray:
            return contest_equilibrium(
                problem.nu, reward=reward, phi=self.config.phi, p=p_follow, caps=caps, cartel=cartel
            )

        coeff = response(1.0, None)
        if not np.any(coeff > 0):
            return 0.0
        free = proportional_reward(coeff, problem.sizes, p=p_cost, t=t, params=params)
        if self.config.budgets != "cap" or not np.isfinite(problem.left).any():
            return free

        def cost(reward: float) -> float:
            rho = response(reward, problem.left)
            return expected_server_cost(
                reward, rho=rho, data_sizes=problem.sizes, p=p_cost, t=t, params=params
            ).total

        return numeric_reward(cost, around=free)

    # ------------------------------------------------------------------ settlement
    def settle(self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo) -> Settlement:
        """Reward shares (module doc), the round's outcome at the true ν and its columns."""
        terms = contest_terms(offer)
        ids = ids_of(delivered)
        rho = column_of(delivered, "rho")
        rho = np.where(np.isfinite(rho), rho, 0.0)  # nan_to_num(nan=posinf=neginf=0), quicker
        total = float(rho.sum())
        pay = rho / total * offer.reward if total > 0 else np.zeros(rho.size)
        nu = terms.nu[ids] if ids.size else np.zeros(0)
        cost = self.config.phi * nu * (rho**2 if self.quadratic else rho)
        acc = pay_term = math.nan
        if total > 0:
            sc = server_cost(
                offer.reward,
                rho=rho,
                data_sizes=np.maximum(terms.sizes[ids], 1.0),
                t=min(max(info.round, 1), self.rounds),
                params=self.params(),
            )
            acc, pay_term = sc.accuracy, sc.payment
        self.last_sum_rho = total  # cross-round memory (the next offer's plan)
        removed, players = terms.removed, terms.players
        round_metrics = {
            "reward": offer.reward,
            "sum_rho": total,
            "players": float(players.size),
            "server_cost_accuracy": acc,
            "server_cost_payment": pay_term,
            "server_cost": acc + pay_term,
            "payments_total": float(pay.sum()),
            "welfare": float((pay - cost).sum()) - (acc + pay_term),
            "removed_for_feasibility": float(removed.size),
            "solver_converged": terms.solver[0],
            "solver_residual": terms.solver[1],
        }
        marked = np.concatenate([removed, players])
        flags = np.concatenate([np.ones(removed.size), np.zeros(players.size)])
        client_metrics: dict[str, Any] = {
            "rho": ClientValues(ids, rho),
            "payment": ClientValues(ids, pay),
            "privacy_cost": ClientValues(ids, cost),
            "game_utility": ClientValues(ids, pay - cost),
            "removed": ClientValues(marked, flags),
        }
        if self.beliefs is not None:
            client_metrics["nu_believed"] = self.believed_privacy_values(offer)
        # the outcome (``ReportsOutcome``): the delivered clients, units = their ρ, payments =
        # their reward shares, true cost φ·ν_i·c(ρ_i) at the true ν (a leader with a belief
        # is accounted at the true values too); None when nobody delivered
        outcome = RoundOutcome(ids, rho, pay, cost) if ids.size else None
        return Settlement(
            dict(zip(ids.tolist(), pay.tolist())), offer, outcome, round_metrics, client_metrics
        )

    # ------------------------------------------------------------------ economics
    def deviation_gains(
        self,
        ids: np.ndarray,
        *,
        settlement: Settlement,
        faults: FaultDraw | None = None,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """Ex-post regret of each of ``ids`` (``MeasuresDeviation``): its best-response utility
        against the other delivered clients' played ρ (the settlement's outcome), within
        min(cap, its budget left at the offer), minus its realised utility
        (:func:`fedgame.game.economics.contest_deviation_gains`); 0 for a client whose update
        was not delivered. No draw from ``rng``; ``faults`` is not needed (a client that did
        not deliver has no played ρ).
        """
        del rng, faults
        ids = np.asarray(ids, dtype=np.int64)
        gains = np.zeros(ids.size)
        outcome = settlement.outcome
        if outcome is None or not ids.size:
            return gains
        played, rho, reward = outcome.ids, outcome.units, float(settlement.offer.reward)
        if not played.size:
            return gains
        terms = contest_terms(settlement.offer)
        order = np.argsort(played, kind="stable")
        at = np.searchsorted(played, ids, sorter=order)
        at = np.minimum(at, played.size - 1)
        found = played[order[at]] == ids
        if not found.any():
            return gains
        caps = np.minimum(terms.left[played], self.cap)
        gains[found] = contest_deviation_gains(
            rho,
            terms.nu[played],
            reward=reward,
            phi=self.config.phi,
            quadratic=self.quadratic,
            caps=caps,
            which=order[at[found]],
        )
        return gains


def _by_id(ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    out = np.zeros(int(ids.max()) + 1 if ids.size else 0)
    out[ids] = values
    return out
