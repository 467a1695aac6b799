"""The plug-in kit: the one import a mechanism written outside fedgame needs.

``from fedgame import kit`` (or ``from fedgame.kit import ...``) gives every name below; each
is fedgame's own object, re-exported, not a copy, so a plug-in written against the kit runs
exactly what the built-in plug-ins run. ``docs/plugins.md`` ("Writing a mechanism") walks
through a worked incentive and a worked policy that import nothing else from fedgame
(``docs/examples/posted_price/``).

**Registering.** :func:`register` (``@register(family, name)``) puts a class in the registry
under a family (``incentive``, ``policy``, ``selection``, ``privacy``, ``aggregation``,
``faults``, ...); the class has the family's members (the Protocols below; ``register``
refuses a class that lacks one), a pydantic ``Config`` with ``extra="forbid"`` for its knobs
(each ``Field`` with a one-line ``description``) and may declare an :class:`Example`: a small
valid configuration and the scenario sections it needs, which the contract tests build the
plug-in from. ``register(family, name, reads=(...))`` declares the scenario keys outside its
own section that the plug-in reads (``"population.privacy_value"``, ``"network.topology"``,
...; or a function of its config and the scenario): validation warns about a key a scenario
sets that no chosen plug-in reads (:mod:`fedgame.scenario.effects`). :class:`ScenarioError`
is what a ``check_scenario`` hook raises (one line
naming the key, the value and what is allowed).

**What a mechanism sees.** Frozen views, never agents:

* :class:`ClientView`: the facts about one client its agent could know (``client_id``,
  ``dataset_size`` |D_i|, ``privacy_value`` ν_i, ``epsilon_total``, ``delta``,
  ``epsilon_spent``, ``straggle_prob``, ``reachable``, ...); :class:`ClientViews` the same
  for many clients, with ``ids`` and ``column(name)`` arrays. :func:`column_of` and
  :func:`ids_of` read a field of any sequence of views or responses as an array.
* :class:`MarketView`: what the leader sees at a round (``clients``, ``info``, the scenario's
  ``game`` rules and ``previous``, the :class:`RoundRecord` of the last round: its offered
  reward, every client's :class:`Response` and the ids whose updates were delivered).
* :class:`RoundInfo`: the round t (1-based), the horizon T, the population size N.
* :class:`Offer`: the leader's move: ``reward`` R_t, optional per-client ``prices``, a
  free-form ``plan`` (numbers the followers read, e.g. a posted price), ``excluded`` ids and
  ``terms``, the leader's own frozen record of what it fixed and reads again in ``settle``
  (the followers get :meth:`Offer.public`, without it).
* :class:`Response` / :class:`Responses`: a follower's move, one or as columns: take part or
  not, at which level (``rho``: a zCDP budget ρ_i; ``epsilon``: a per-round ε), and why not
  (``reason``, e.g. ``budget``).
* :class:`Selection`: the server's choice of participants; :class:`SetupContext`: what the
  optional ``prepare(ctx, *, rng)`` hook sees once before round 1 (the topology, the other
  plug-ins, the learner); :class:`FaultDraw`: one round's link failures and stragglers.
* :class:`ClientValues`: ``{client id: value}`` over two arrays, for per-client columns.

**The families' Protocols** (what ``register`` checks a class has):
:class:`IncentiveMechanism` (``offer``, and ``settle``, which gets back the offer it made and
returns a :class:`Settlement`: the payments, the round's outcome and the values of its
declared columns; a plain ``{id: payment}`` is read by :func:`settlement_of` as payments
only), :class:`ClientPolicy` (``chooses``,
``respond``; optionally the batched ``respond_all(offer, *, clients, market) -> Responses``,
which the model prefers), :class:`SelectionPolicy`, :class:`Aggregator`,
:class:`FaultModel` and :class:`PrivacyMechanism` (with its records :class:`Charge`,
:class:`Charges` and :class:`PrivacyPlan`). A policy's ``chooses`` declares the privacy level
its responses name (``"default"``: none; ``"rho"``; ``"epsilon"``); validation refuses a
privacy mechanism whose noise does not follow it (its ``follows``).

**A plug-in keeps nothing of the round on** ``self``: a phase returns what it measured with
its result, for the columns it declares (:class:`DeclaresRoundColumns` ``round_columns``,
:class:`DeclaresClientColumns` ``client_columns``). ``select``, ``aggregate``, ``privatise``
and ``finalise`` may return ``(result, metrics)`` (:func:`split_metrics` reads either form);
a batched policy's ``respond_all`` ``(responses, client_metrics)``; an incentive's ``settle``
a :class:`Settlement`; a fault model's client columns come from its draw
(:class:`ReportsDraw`: ``draw_metrics(draw)``); a metric no plug-in declares stops the run,
naming it. Cross-round memory (a belief, a learning
rule's state, a plan made in ``prepare``) is the plug-in's own.

**Optional capabilities**, checked once when the model is built: :class:`Preparable`
(``prepare``), :class:`ReportsRounds` / :class:`ReportsClients` (``round_columns`` /
``client_columns`` filled by ``round_metrics()`` / ``client_metrics()`` when the round is
collected: the older form, still read), :class:`ObservesFaults` (told the round's
fault draw after the uploads) and :class:`OffersContest` (an incentive whose offer is a
Tullock contest: the model then adds the game diagnostics and the ``no_market`` check),
:class:`ClearsMarket` (an incentive that allocates after the bids, an auction: ``clear``
returns a :class:`Cleared`, the winners and the offer with the terms the clearing fixed, at
the end of phase 3) and :class:`ValuesContributions` (an incentive that values the round's
delivered updates before they are applied, e.g. Shapley payments, and returns a
:class:`Valuation` that the server hands to its ``settle``). An incentive keeps no round on
``self``: what a later phase needs travels in these values.
A privacy mechanism may declare :class:`FinalisesAggregate` (server-side noise on the
aggregate after phase 8, central mechanisms) and :class:`ReportsRelease` (columns computed
from the round's plan, its faults included, when the round is collected); its ``privatise``
and ``finalise`` return their metrics as above.

**Economics** (docs/economics.md): an incentive that declares :class:`ReportsOutcome`
(``reports_outcome = True``) puts each round's :class:`RoundOutcome` (privacy bought,
payments, true and reported costs per client) in its :class:`Settlement` and gets the
``econ_*`` columns of the rounds table; one that also declares :class:`MeasuresDeviation`
(``deviation_gains(ids, *, settlement, faults, rng)``: each sampled client's best gain from
another report or action, read from the round's settlement and fault draw) gets the ex-post
regret columns.

**Budgets** in zCDP units (ρ adds up over releases): :func:`epsilon_to_zcdp`
ρ(ε) = (ε/(sqrt(L + ε) + sqrt(L)))², L = ln(1/δ), the largest ρ whose ε at δ is at most ε
(Bun & Steinke 2016, Prop. 1.3 inverted); :func:`rho_left` every client's remaining budget
ρ(ε_total) − ρ(ε_spent), :func:`rho_remaining` one client's.

**The QI-DPFL game** (Yuan & Wang 2024, paper 003): :func:`server_cost`, the leader's cost
of a round, Eq. 15: accuracy = 2βγ/(λ²T²)·(V² + 2dC²/N²·Σ_i 1/(|D_i|²ρ_i)) plus payment =
(1 − γ)·π^(t−1)·R_t, with its constants in :class:`ServerCostParams` and the result a
:class:`ServerCost`; :func:`contest_equilibrium`, the followers' equilibrium budgets of the
Tullock contest (each paid ρ_i/Σρ·R, paying φ·ν_i·ρ_i; Theorem 1 on the active set, with
delivery probabilities, budget caps or a cartel), and :func:`solve_contest`, the same without
checking its inputs again.

Importing the kit imports numpy and pydantic, not torch, pandas or Mesa, so ``fedgame
validate`` of a scenario whose plug-ins use it stays quick.
"""

from __future__ import annotations

from fedgame.errors import ScenarioError
from fedgame.game.contest import contest_equilibrium, solve_contest
from fedgame.game.economics import RoundOutcome
from fedgame.game.monitor import OffersContest
from fedgame.game.stackelberg import ServerCost, ServerCostParams, server_cost
from fedgame.mechanisms.base import (
    Aggregator,
    Cleared,
    ClearsMarket,
    ClientPolicy,
    DeclaresClientColumns,
    DeclaresRoundColumns,
    FaultDraw,
    FaultModel,
    IncentiveMechanism,
    MeasuresDeviation,
    ObservesFaults,
    Preparable,
    ReportsClients,
    ReportsDraw,
    ReportsOutcome,
    ReportsRounds,
    SelectionPolicy,
    Settlement,
    Valuation,
    ValuesContributions,
    settlement_of,
)
from fedgame.mechanisms.policy.market import epsilon_to_zcdp, rho_left, rho_remaining
from fedgame.privacy.base import (
    Charge,
    Charges,
    FinalisesAggregate,
    PrivacyMechanism,
    PrivacyPlan,
    ReportsRelease,
    split_metrics,
)
from fedgame.registry import Example, register
from fedgame.views import (
    ClientValues,
    ClientView,
    ClientViews,
    MarketView,
    Offer,
    Response,
    Responses,
    RoundInfo,
    RoundRecord,
    Selection,
    SetupContext,
    column_of,
    ids_of,
)

#: in the reading order of the module doc, not sorted
__all__ = [  # noqa: RUF022
    # registering
    "register",
    "Example",
    "ScenarioError",
    # what a mechanism sees
    "ClientView",
    "ClientViews",
    "column_of",
    "ids_of",
    "MarketView",
    "RoundRecord",
    "RoundInfo",
    "Offer",
    "Response",
    "Responses",
    "Selection",
    "SetupContext",
    "FaultDraw",
    "ClientValues",
    # the families' Protocols
    "IncentiveMechanism",
    "Settlement",
    "settlement_of",
    "ClientPolicy",
    "SelectionPolicy",
    "Aggregator",
    "FaultModel",
    "PrivacyMechanism",
    "Charge",
    "Charges",
    "PrivacyPlan",
    # optional capabilities
    "Preparable",
    "ReportsRounds",
    "ReportsClients",
    "ReportsDraw",
    "DeclaresRoundColumns",
    "DeclaresClientColumns",
    "ObservesFaults",
    "OffersContest",
    "ClearsMarket",
    "Cleared",
    "ValuesContributions",
    "Valuation",
    "FinalisesAggregate",
    "ReportsRelease",
    "split_metrics",
    # economics
    "ReportsOutcome",
    "MeasuresDeviation",
    "RoundOutcome",
    # budgets
    "epsilon_to_zcdp",
    "rho_left",
    "rho_remaining",
    # the QI-DPFL game
    "server_cost",
    "ServerCostParams",
    "ServerCost",
    "contest_equilibrium",
    "solve_contest",
]
