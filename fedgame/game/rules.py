"""The rules of the game a scenario plays, shared by the leader, the followers and the model.

``game:`` in a scenario file::

    game:
      complete_information: true   # straggle probabilities are common knowledge
      cartel: true                 # the colluders (population.colluders) form a cartel
      stop_on_degenerate: true     # stop the run at the first degenerate round
      degeneracy: {noise_norm_over_clip: 1.0, reward_jump: 10}
      economics: {value_per_point: 1.0, regret_sample: 8}   # docs/economics.md

Every plug-in sees them as ``MarketView.game``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from fedgame.errors import ScenarioError


class DegeneracyThresholds(BaseModel):
    """When a round counts as degenerate (:mod:`fedgame.game.degeneracy`), each threshold in
    the unit of the quantity it bounds.

    Attributes:
        min_players: players (clients) a contest needs: fewer admitted players, or a zero
            reward, is ``no_market``; fewer delivered contributors with a reward is
            ``lone_player`` (0 contributors: ``no_players``).
        max_share: one player earning at least this share (fraction) of the round's payments
            is ``near_lone``.
        knife_edge_share: the marginal player's budget ρ_m below this fraction of the largest
            delivered budget makes it marginal ...
        knife_edge_impact: ... and ``knife_edge`` when removing it changes the leader's
            optimal reward by at least this fraction of R* (|R*_{−m} − R*|/R*).
        knife_edge: where the impact cannot be computed (an incentive that does not price a
            contest), ρ_m below this fraction of the largest budget alone is ``knife_edge``.
        noise_norm_over_clip: the released average's noise L2 norm, in units of the clipping
            bound C (the round's ``noise_norm_over_clip`` column), above this is ``noise``.
        reward_jump: R_t/R_(t−1) above this factor or below its inverse (``reward_jump``).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_players: int = Field(
        default=2, ge=1, description="players (clients) a contest needs (no_market, lone_player)"
    )
    max_share: float = Field(
        default=0.9,
        gt=0.5,
        le=1.0,
        description="share of the round's payments one player may take (near_lone), fraction",
    )
    knife_edge_share: float = Field(
        default=0.05,
        gt=0.0,
        lt=1.0,
        description="the marginal player's budget below this fraction of the largest (knife_edge)",
    )
    knife_edge_impact: float = Field(
        default=0.25,
        gt=0.0,
        allow_inf_nan=False,
        description="|R* without it - R*| / R* at or above this fraction (knife_edge)",
    )
    knife_edge: float = Field(
        default=1e-3,
        ge=0.0,
        lt=1.0,
        description="budget ratio alone, where the impact is unknown (knife_edge), fraction",
    )
    noise_norm_over_clip: float = Field(
        default=1.0,
        gt=0.0,
        allow_inf_nan=False,
        description="noise L2 norm of the released average, in clipping bounds C (noise)",
    )
    reward_jump: float = Field(
        default=10.0,
        gt=1.0,
        allow_inf_nan=False,
        description="R_t / R_(t-1) above this factor or below its inverse (reward_jump)",
    )


class EconomicsRules(BaseModel):
    """How the economics columns of the rounds table are measured (docs/economics.md).

    Attributes:
        value_per_point: the server's value of one percentage point of test accuracy gained
            in a round, in reward units per accuracy point: the round's value is
            ``value_per_point`` · 100 · (accuracy after − accuracy before).
        regret_sample: clients whose ex-post regret the deviation search measures each round
            (drawn without replacement from the clients the incentive dealt with; all of them
            when fewer).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    value_per_point: float = Field(
        default=1.0,
        ge=0.0,
        allow_inf_nan=False,
        description="server's value of one accuracy point gained in a round, reward units",
    )
    regret_sample: int = Field(
        default=8,
        ge=0,
        description="clients a round whose deviation gains are searched (0: none)",
    )


class GameRules(BaseModel):
    """Switches of the game (module doc).

    Attributes:
        complete_information: the straggle probabilities are common knowledge: equilibrium-
            playing followers (and a leader with ``delivery: expected``) maximise expected-
            delivery utilities (:mod:`fedgame.game.contest`).
        cartel: the colluding clients form a cartel that coordinates its budgets to maximise
            the cartel's joint utility (:func:`fedgame.game.contest.contest_equilibrium`).
        stop_on_degenerate: stop the run after the first degenerate round (manifest status
            ``degenerate``, ``fedgame run`` exit code 4).
        degeneracy: the thresholds of the per-round check.
        economics: how the economics columns are measured (:class:`EconomicsRules`).
        audit_contributions: estimate every delivered client's Shapley value in each round's
            accuracy gain under any incentive (exact up to 8 clients, else GTG-Shapley;
            ``RoundState.contributions``), an audit of the payments; off by default (it
            costs coalition evaluations every round). An incentive that values
            contributions itself (``shapley``) is used instead.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    complete_information: bool = False
    cartel: bool = False
    stop_on_degenerate: bool = False
    degeneracy: DegeneracyThresholds = Field(default_factory=DegeneracyThresholds)
    economics: EconomicsRules = Field(default_factory=EconomicsRules)
    audit_contributions: bool = False


def check_rules(scenario: Any) -> None:
    """Cross-field checks of ``game:`` against the population (exit 2 on failure)."""
    rules, pop = scenario.game, scenario.population
    if not rules.cartel:
        return
    if pop.colluders < 2:
        raise ScenarioError(
            "game.cartel",
            True,
            f"a cartel needs at least 2 colluding clients (population.colluders is "
            f"{pop.colluders}, at most population.clients - 1 = {pop.clients - 1})",
        )
    if rules.complete_information and pop.straggle_prob.support()[1] > 0:
        raise ScenarioError(
            "game.cartel",
            True,
            "a cartel is modelled with full delivery only: not with game.complete_information "
            "and straggle_prob > 0",
        )
