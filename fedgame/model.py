"""``FedGameModel``: one Mesa step is one federated round, in ten named phases.

Agents decide (the server: offer, selection, aggregation, payment; each client: participation
and privacy level, through its agent type's ``respond``); the one ``BatchedLearner`` computes
(all selected clients trained at once) and the one ``PrivacyBudget`` prices every release.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import mesa
import numpy as np
import torch

from fedgame.agents.client import ClientAgent, answers_in_batch, behaviour_type
from fedgame.agents.roster import ClientRoster
from fedgame.agents.server import ServerAgent
from fedgame.agents.table import ClientTable
from fedgame.collect import ClientTableCollector, declared_columns, round_summary
from fedgame.errors import DivergenceError
from fedgame.game.monitor import OffersContest, RoundMonitor
from fedgame.learning.batched import LocalResult
from fedgame.mechanisms.base import (
    FaultDraw,
    ObservesFaults,
    Preparable,
    ReportsClients,
    ReportsRounds,
)
from fedgame.privacy.base import (
    FinalisesAggregate,
    PrivacyPlan,
    RecordsReleases,
    charge_columns,
)
from fedgame.privacy.budget import PrivacyBudget
from fedgame.scenario.build import World, build_world
from fedgame.scenario.coerce import ScenarioLike, scenario_from
from fedgame.scenario.output import clients_table_mode
from fedgame.scenario.schema import Scenario
from fedgame.seeding import SeedPlan
from fedgame.views import (
    ClientValues,
    ClientViews,
    MarketView,
    Offer,
    Response,
    Responses,
    RoundInfo,
    RoundRecord,
    Selection,
    SetupContext,
    ids_of,
)


@dataclass
class RoundState:
    """What the phases of the current round hand to each other."""

    info: RoundInfo
    started: float
    views: ClientViews | None = None
    offer: Offer = field(default_factory=Offer)
    selection: Selection = field(default_factory=lambda: Selection(()))
    #: ``selection.client_ids`` as an array (the clients that train, once the budget admitted)
    selected: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    local: LocalResult | None = None
    privacy: PrivacyPlan | None = None
    responses: Responses | None = None  # of the selected clients, aligned with the plan
    updates: torch.Tensor | None = None
    uploaded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    withdrawn_budget: int = 0  # releases the budget refused this round
    faults: FaultDraw | None = None
    aggregation_failed: bool = False
    extra: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class AgentGroup:
    """The clients of one agent type and whether the type answers as a batch."""

    agent_type: type[ClientAgent]
    ids: np.ndarray
    batched: bool


class FedGameModel(mesa.Model):
    """A DP federated-learning game: a server agent and ``population.clients`` client agents.

    Args:
        scenario: a scenario file path, a mapping, a ``Scenario`` or None (all defaults).
        seed: the scenario seed (overrides the scenario's ``seed``).
        replicate: replicate index for the seed plan (sweeps use it; common random numbers).
        **kwargs: any scenario key with ``.`` written ``__`` (``population__clients=20``), so
            ``mesa.batch_run`` and SolaraViz can set them; validated as ``fedgame run`` does
            (the name ``kwargs`` is what SolaraViz's parameter check accepts).

    ``run_model()`` stops after ``rounds`` steps. ``datacollector`` holds the rounds table
    (model reporters) and the clients table (``get_agent_vars_dataframe()``, one row per step
    and client agent).
    """

    def __init__(
        self,
        scenario: ScenarioLike = None,
        *,
        seed: int | None = None,
        replicate: int = 0,
        **kwargs: Any,
    ) -> None:
        if seed is not None:
            kwargs["seed"] = seed
        resolved = (
            scenario
            if isinstance(scenario, Scenario) and not kwargs
            else scenario_from(scenario, **kwargs)
        )
        plan = SeedPlan(resolved.seed, replicate)
        super().__init__(seed=plan.seed_int("mesa"))
        self.scenario = resolved
        self.replicate = replicate
        self.plan = plan
        self.world: World = build_world(resolved, plan=plan)
        self.learner = self.world.learner
        comps = self.world.components
        self.privacy = comps.privacy
        self.faults = comps.faults
        self.server = ServerAgent(
            self,
            incentive=comps.incentive,
            selection=comps.selection,
            aggregation=comps.aggregation,
        )
        self.monitor = RoundMonitor(
            resolved.game,
            contest=isinstance(comps.incentive, OffersContest),
            clip=_clip_of(resolved.config("privacy")),
            incentive=comps.incentive,
        )
        plugins = [c for _, c in comps.by_path()]
        reporting = [c for c in plugins if isinstance(c, ReportsRounds | ReportsClients)]
        reporting.append(self.monitor)
        self.previous: RoundRecord | None = None  # what everyone saw of the last round
        round_extra, client_extra = declared_columns(reporting)
        self.table = ClientTable(self.world.population, extra_columns=client_extra)
        self.groups = self._create_clients()
        self.budget = PrivacyBudget(
            self.privacy.accountant,
            epsilon_total=self.table.epsilon_total,
            delta_total=self.table.delta,
        )
        self._prepare_components()  # before budgets: next_charges may need prepared state
        self._refresh_budgets(self.table.client_id)
        self.test_accuracy, self.test_loss = self.learner.evaluate()
        self.payments: dict[int, float] = {}
        self.summary: dict[str, Any] = {}
        self.state = RoundState(
            RoundInfo(0, resolved.rounds, len(self.clients)), time.perf_counter()
        )
        self.round_wall_time = 0.0
        # declared capabilities, checked once here (not each round)
        self._reporters: list[tuple[ReportsRounds | None, ReportsClients | None]] = [
            (
                c if isinstance(c, ReportsRounds) else None,
                c if isinstance(c, ReportsClients) else None,
            )
            for c in reporting
        ]
        self._observers = [c for c in plugins if isinstance(c, ObservesFaults)]
        self._finaliser = self.privacy if isinstance(self.privacy, FinalisesAggregate) else None
        self._release_recorder = self.privacy if isinstance(self.privacy, RecordsReleases) else None
        self.datacollector = ClientTableCollector(
            round_extra=round_extra, table=self.table, clients=clients_table_mode(resolved)
        )
        self.summary = round_summary(self)
        self.datacollector.collect(self)  # step 0: the model as built (Mesa's convention)
        self.running = True

    def _create_clients(self) -> tuple[AgentGroup, ...]:
        """One Mesa agent type per behaviour; the agents (``ClientRoster``) are created in
        client-id order when first needed, at once here if a type answers agent by agent."""
        groups = []
        types = {}
        for group in self.world.behaviours:
            types[group.label] = behaviour_type(group.label, group.decision, params=group.params)
        self._roster = ClientRoster(self, self.table, types)
        for group in self.world.behaviours:
            agent_type = types[group.label]
            groups.append(AgentGroup(agent_type, group.ids, answers_in_batch(agent_type)))
        if not all(g.batched for g in groups):
            self._roster.materialise()
        return tuple(groups)

    @property
    def clients(self) -> ClientRoster:
        """The client agents in client-id order (created on first use)."""
        return self._roster

    @property
    def agents(self) -> mesa.agent.AgentSet:
        """Mesa's set of every agent (the client agents are created first if needed)."""
        self._roster.materialise()
        return super().agents

    @property
    def agents_by_type(self) -> dict[type[mesa.Agent], mesa.agent.AgentSet]:
        """Mesa's agents per type, every client of a behaviour type included."""
        self._roster.materialise()
        return super().agents_by_type

    @property
    def agent_types(self) -> list[type]:
        self._roster.materialise()
        return super().agent_types

    def _prepare_components(self) -> None:
        """Call each plug-in's ``prepare`` once (its declared capability), own random stream."""
        comps = self.world.components
        ctx = SetupContext(
            num_clients=len(self.clients),
            rounds=self.scenario.rounds,
            clients=self.table.views(),
            graph=self.world.graph,
            planned_participations=self.world.planned_participations,
            incentive=comps.incentive,
            selection=comps.selection,
            privacy=comps.privacy,
            aggregation=comps.aggregation,
            faults=comps.faults,
            learner=self.learner,
        )
        for path, comp in comps.by_path():
            if isinstance(comp, Preparable):
                comp.prepare(ctx, rng=self.plan.rng("prepare", path))

    def _refresh_budgets(self, ids: np.ndarray) -> None:
        """Price one more default participation of clients ``ids`` (``epsilon_after_next``)."""
        if len(ids) == 0:
            return
        charges = self.privacy.next_charges(self.table.views(ids))
        self.table.epsilon_after_next[ids] = self.budget.price(ids, charge_columns(charges))

    @cached_property
    def network(self) -> mesa.discrete_space.Network:
        """The client topology as a ``mesa.discrete_space.Network`` whose cells hold the
        client agents (built on first use: a million-client run need not pay for it)."""
        space = mesa.discrete_space.Network(self.world.graph, random=self.random)
        for agent in self.clients:
            space[agent.client_id].add_agent(agent)
        return space

    # ------------------------------------------------------------------ the round
    def step(self) -> None:
        """One federated round."""
        self.phase_network()
        self.phase_offer()
        self.phase_respond()
        self.phase_select()
        self.phase_train()
        self.phase_privatise()
        self.phase_upload()
        self.phase_aggregate()
        self.phase_settle()
        self.phase_collect()
        if self.steps >= self.scenario.rounds:
            self.running = False

    def phase_network(self) -> None:
        """1. Draw this round's failed links and stragglers."""
        info = RoundInfo(
            self.steps, self.scenario.rounds, len(self.clients), self.test_accuracy, self.test_loss
        )
        self.state = RoundState(info, time.perf_counter())
        table = self.table
        table.reset_round()
        self.payments = {}
        views = table.views()
        draw = self.faults.draw(
            views, graph=self.world.graph, info=info, rng=self.plan.rng("faults", info.round)
        )
        link_up = np.asarray(draw.link_up, dtype=bool)
        table.link_up[:] = link_up
        table.straggled[:] = np.asarray(draw.straggler, dtype=bool)
        self.state.faults = draw
        self.state.views = views

    def phase_offer(self) -> None:
        """2. The leader announces its reward / plan."""
        market = self._market()
        self.state.offer = self.server.offer(market, self.state.info)
        self.monitor.at_play(self.table)

    def phase_respond(self) -> None:
        """3. Followers decide participation and privacy level: each agent type's ``respond``.

        Unreachable clients decline (``unreachable``), clients the leader excluded decline
        (``excluded``); the others are asked, a whole agent type at once when its policy
        answers in batch, else one agent at a time.
        """
        table, offer = self.table, self.state.offer
        market = self._market()
        eligible = table.link_up.copy()
        if offer.excluded:
            excluded = np.fromiter(offer.excluded, np.int64, len(offer.excluded))
            table.decline_reason[excluded] = "excluded"
            eligible[excluded] = False
        everyone = bool(eligible.all())
        if not everyone:
            table.decline_reason[~table.link_up] = "unreachable"
        for group in self.groups:
            ids = group.ids if everyone else group.ids[eligible[group.ids]]
            if len(ids) == 0:
                continue
            if group.batched:
                # ids are sorted and distinct: all N of them are every client (plain copies)
                views = table.views() if len(ids) == len(table) else table.views(ids)
                responses = group.agent_type.policy.respond_all(offer, clients=views, market=market)
            else:
                clients = self.clients
                responses = Responses.of([clients[i].respond(offer, market) for i in ids.tolist()])
            if not np.array_equal(ids_of(responses), ids):
                raise RuntimeError(
                    f"{group.agent_type.__name__} answered for other clients than it was asked"
                )
            table.record_responses(responses, fresh=True)

    def phase_select(self) -> None:
        """4. The server chooses participants among reachable responders."""
        candidates = self.table.views(np.flatnonzero(self.table.participating))
        selection = self.server.select(candidates, self.state.info)
        ids = np.asarray(selection.client_ids, dtype=np.int64)
        self._check_candidates(ids)
        self.table.touch(ids)
        self.table.selected[ids] = True
        self.state.selection, self.state.selected = selection, ids

    def _check_candidates(self, ids: np.ndarray) -> None:
        """A selection names only this round's candidates (O(K): the willing mask)."""
        n = len(self.table)
        inside = (ids >= 0) & (ids < n)
        ok = inside.copy()
        ok[inside] = self.table.participating[ids[inside]]
        if not ok.all():
            rule = type(self.server.selection_rule).__name__
            raise RuntimeError(
                f"selection rule {rule} chose clients that were not candidates in round "
                f"{self.state.info.round}: {ids[~ok][:10].tolist()}"
            )

    def phase_train(self) -> None:
        """5. Batched local training of every selected client (under the privacy plan)."""
        if len(self.state.selected) == 0:
            return
        planned = self._plan_privacy(self.state.selected)
        if planned is None:
            return
        plan, responses = planned
        ids = self.state.selected
        self.state.privacy, self.state.responses = plan, responses
        gen = self.plan.torch_generator("training", self.state.info.round, device=self.world.device)
        self.state.local = self.learner.train(
            ids, round_index=self.state.info.round - 1, generator=gen, **_training_hooks(plan)
        )
        self.table.train_loss[ids] = self.state.local.train_loss.detach().cpu().numpy()

    def _plan_privacy(self, ids: np.ndarray) -> tuple[PrivacyPlan, Responses] | None:
        """The privacy plan of the selected ``ids`` that the budget admits in full (None when
        the budget withdrew every one of them: mechanisms are never asked to plan for nobody).

        Every plan goes through ``PrivacyBudget.admit``, which prices the round's releases
        together with the clients' accountants; releases that would pass a budget are
        withdrawn (reason ``budget``), the mechanism re-plans without them, and the loop ends
        when the whole plan fits. Leaves ``state.selected``/``state.selection`` at the clients
        that train.
        """
        while True:
            responses = self.table.responses(ids)
            plan = self.privacy.plan(self.table.views(ids), responses, info=self.state.info)
            if not np.array_equal(np.asarray(plan.client_ids, dtype=np.int64), ids):
                raise RuntimeError("privacy plan covers other clients than were selected")
            keep = self.budget.admit(ids, charge_columns(plan.charges))
            if keep.all():
                return plan, responses
            self._withdraw(ids, keep)
            ids = ids[keep]
            self.state.selected = ids
            self.state.selection = dataclasses.replace(
                self.state.selection, client_ids=tuple(ids.tolist())
            )
            if ids.size == 0:
                return None

    def _withdraw(self, ids: np.ndarray, keep: np.ndarray) -> None:
        """Record refused releases: a client none of whose releases fits declines (``budget``)."""
        self.state.withdrawn_budget += int((~keep).sum())
        out = np.setdiff1d(ids[~keep], ids[keep])
        self.table.selected[out] = False
        self.table.participating[out] = False
        self.table.decline_reason[out] = "budget"

    def phase_privatise(self) -> None:
        """6. Each selected client clips and noises its update (its privacy mechanism)."""
        if self.state.local is None:
            return
        plan = self.state.privacy
        assert plan is not None  # phase_train sets the plan whenever it sets ``local``
        gen = self.plan.torch_generator("noise", self.state.info.round, device=self.world.device)
        self.state.updates = self.privacy.privatise(self.state.local.updates, plan, generator=gen)
        self.table.noise_std[self.state.selected] = plan.noise_std

    def phase_upload(self) -> None:
        """7. Stragglers miss the deadline; their updates never arrive.

        From now on the round's fault draw is knowable: plug-ins that declare
        ``ObservesFaults`` receive it.
        """
        ids = self.state.selected
        self.state.uploaded = ~self.table.straggled[ids]
        self.table.uploaded[ids] = self.state.uploaded
        if self.state.faults is not None:
            for comp in self._observers:
                comp.observe_faults(self.state.faults, info=self.state.info)

    def phase_aggregate(self) -> None:
        """8. Combine the received updates, update the global model, evaluate."""
        if self.state.updates is not None and self.state.uploaded.any():
            selected = self.state.selected
            ok = self.state.uploaded
            ids = selected[ok]
            updates = self.state.updates
            received = updates if ok.all() else updates[torch.as_tensor(ok, device=updates.device)]
            delta = self.server.aggregate(
                received,
                self.table.views(ids),
                self.table.views(selected[~ok]),
                self.state.info,
            )
            if delta is None:
                self.state.aggregation_failed = True
                return
            if self._finaliser is not None and self.state.privacy is not None:
                gen = self.plan.torch_generator(
                    "noise", self.state.info.round, "central", device=self.world.device
                )
                delta = self._finaliser.finalise(
                    delta, self.state.privacy, num_received=len(ids), generator=gen
                )
                if delta is None:  # e.g. secure aggregation could not unmask the sum
                    self.state.aggregation_failed = True
                    return
            try:
                self.learner.apply_update(delta)
                self.test_accuracy, self.test_loss = self.learner.evaluate()
            except DivergenceError as exc:
                raise self._diverged(str(exc)) from None
        if not math.isfinite(self.test_loss):
            raise self._diverged(f"test loss became {self.test_loss}")

    def _diverged(self, what: str) -> DivergenceError:
        return DivergenceError(
            f"round {self.state.info.round}: {what} (non-finite); "
            "lower training.lr or the noise, or clip updates"
        )

    def phase_settle(self) -> None:
        """9. Privacy accounting for released updates, payments and utilities."""
        plan = self.state.privacy
        delivered: Sequence[Response] = ()
        if plan is not None and self.state.responses is not None:
            sent = self.state.uploaded
            ids = self.state.selected[sent]
            charged, _ = self.budget.charge_admitted(sent)
            recorder = self._release_recorder
            if recorder is not None:  # closed-form ε columns
                charges = charge_columns(plan.charges)
                recorder.record_releases(ids, charges if sent.all() else charges[sent])
            self.table.record_release(charged, self.budget.spent[charged])
            self._refresh_budgets(charged)
            delivered = self.state.responses if sent.all() else self.state.responses[sent]
        self.payments = self.server.pay(delivered, self.state.info)
        self.table.settle(self.payments)

    def phase_collect(self) -> None:
        """10. One row for the round, one per client (plug-ins add their declared columns).

        First the round check (game diagnostics, degeneracy: ``self.monitor``); a degenerate
        round ends the run when the scenario says ``game.stop_on_degenerate``.
        """
        self.monitor.check(self)
        for round_reporter, client_reporter in self._reporters:
            if round_reporter is not None:
                self.extra.update(round_reporter.round_metrics())
            if client_reporter is not None:
                for name, values in client_reporter.client_metrics().items():
                    if isinstance(values, ClientValues):
                        self.table.extra[name][values.ids] = values.array
                    elif values:
                        column = self.table.extra[name]
                        ids = np.fromiter(values.keys(), np.int64, len(values))
                        self.table.touch(ids)
                        column[ids] = np.fromiter(values.values(), float, len(values))
        self.round_wall_time = time.perf_counter() - self.state.started
        self.summary = round_summary(self)
        self.datacollector.collect(self)
        self.previous = RoundRecord(
            self.state.info.round,
            float(self.state.offer.reward),
            self.table.responses(),
            self.state.selected[self.state.uploaded],
        )
        if self.monitor.stop_requested:
            self.running = False

    def _views(self) -> ClientViews:
        views = self.state.views
        return views if views is not None else self.table.views()

    def _market(self) -> MarketView:
        return MarketView(
            self._views(), self.state.info, game=self.scenario.game, previous=self.previous
        )

    # ------------------------------------------------------------------ summaries
    @property
    def extra(self) -> dict[str, float]:
        """Plug-in round metrics of the current round (declared in ``round_columns``)."""
        return self.state.extra

    @property
    def epsilon_spent(self) -> np.ndarray:
        return self.table.epsilon_spent.copy()


def _clip_of(config: Any) -> float:
    """The privacy mechanism's clipping bound C (its ``clip`` setting; 1 when it has none)."""
    return float(dict(config).get("clip", 1.0) or 1.0)


def _training_hooks(plan: PrivacyPlan) -> dict[str, Any]:
    """Learner keywords a privacy plan asks for (per-sample clipping, per-step noise)."""
    hooks: dict[str, Any] = {}
    if plan.per_sample_clip is not None:
        hooks["per_sample_clip"] = plan.per_sample_clip
    if plan.step_noise_std is not None:
        hooks["step_noise_std"] = torch.as_tensor(plan.step_noise_std)
    return hooks
