"""``FedGameModel``: one Mesa step is one federated round, in ten named phases.

Agents decide (the server: offer, selection, aggregation, payment; each client: participation
and privacy level, through its agent type's ``respond``); the one ``BatchedLearner`` computes
(all selected clients trained at once) and the one release service (``Releases``: budget,
re-planning, the model's own privacy check) prices, guards and charges every release.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import mesa
import numpy as np
import torch

from fedgame.agents.followers import ask
from fedgame.agents.roster_model import RosterModel
from fedgame.agents.server import ServerAgent
from fedgame.agents.table import ClientTable
from fedgame.collect import (
    ClientTableCollector,
    declared_columns,
    gather_metrics,
    reporters_of,
    reporting_components,
    round_summary,
)
from fedgame.errors import DivergenceError, ScenarioError
from fedgame.game.economics_monitor import EconomicsMonitor
from fedgame.game.monitor import OffersContest, RoundMonitor
from fedgame.mechanisms.base import ObservesFaults
from fedgame.privacy.base import FinalisesAggregate, RecordsReleases, split_metrics
from fedgame.privacy.releases import Releases
from fedgame.round_state import RoundState
from fedgame.scenario.build import World, build_world, prepare_components
from fedgame.scenario.coerce import ScenarioLike
from fedgame.scenario.output import clients_table_mode
from fedgame.views import MarketView, Response, RoundInfo, RoundRecord

#: what a ``FedGameModel`` says to a scenario with competing servers
MARKET_ONLY = "empty for FedGameModel: build fedgame.market.model.MarketModel for several servers"


class FedGameModel(RosterModel):
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
        super().__init__(scenario, seed=seed, replicate=replicate, **kwargs)
        resolved = self.scenario
        if resolved.servers:  # several servers: fedgame run and fedgame.api build the market
            raise ScenarioError("servers", len(resolved.servers), MARKET_ONLY)
        self.world: World = build_world(resolved, plan=self.plan)
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
            clip=float(dict(resolved.config("privacy")).get("clip", 1.0) or 1.0),
            incentive=comps.incentive,
        )
        plugins = [c for _, c in comps.by_path()]
        reporting = reporting_components(plugins)
        reporting.append(self.monitor)
        #: the economics columns, for an incentive that reports its outcome (docs/economics.md)
        self.economics = EconomicsMonitor.of(resolved.game.economics, incentive=comps.incentive)
        if self.economics is not None:
            reporting.append(self.economics)
        self.previous: RoundRecord | None = None  # what everyone saw of the last round
        round_extra, client_extra = declared_columns(reporting)
        self.table = ClientTable(self.world.population, extra_columns=client_extra)
        self.groups = self._create_clients(self.world.behaviours, self.table)
        #: budgets, the model's own privacy check and re-planning (the one budget path)
        self.releases = Releases(self.privacy, self.table)
        # before budgets: next_charges may need prepared state
        prepare_components(self.world, self.table.views(), plan=self.plan, rounds=resolved.rounds)
        self.releases.refresh(self.table.client_id)
        self.test_accuracy, self.test_loss = self.learner.evaluate()
        self._measured = True  # test_accuracy and test_loss are the current model's
        self.payments: dict[int, float] = {}
        self.state = RoundState(
            RoundInfo(0, resolved.rounds, len(self.clients)), time.perf_counter()
        )
        self.round_wall_time = 0.0
        # declared capabilities, checked once here (not each round)
        self._reporters = reporters_of(reporting)
        self._observers = [c for c in plugins if isinstance(c, ObservesFaults)]
        self._finaliser = self.privacy if isinstance(self.privacy, FinalisesAggregate) else None
        self._release_recorder = self.privacy if isinstance(self.privacy, RecordsReleases) else None
        self.datacollector = ClientTableCollector(
            round_extra=round_extra, table=self.table, clients=clients_table_mode(resolved)
        )
        self.summary = round_summary(self)
        self.datacollector.collect(self)  # step 0: the model as built (Mesa's convention)
        self.running = True

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
        """3. Followers decide participation and privacy level: each agent type's ``respond``
        (unreachable and excluded clients decline; :func:`fedgame.agents.followers.ask`); an
        incentive that ``ClearsMarket`` then picks the winners, the other willing clients
        decline (``not allocated``)."""
        ask(self.groups, self.table, self.clients, self.state.offer, self._market())
        self.server.clear(self.table, self.state.info)
        self.state.offer = self.server.offer_made  # with the terms the clearing fixed

    def phase_select(self) -> None:
        """4. The server chooses participants among reachable responders."""
        selection, metrics = self.server.select(self.table, self.state.info)
        self.state.extra.update(metrics)
        ids = np.asarray(selection.client_ids, dtype=np.int64)
        self.table.touch(ids)
        self.table.selected[ids] = True
        self.state.selection, self.state.selected = selection, ids

    def phase_train(self) -> None:
        """5. Batched local training of every selected client, under the privacy plan the
        budget admits in full (``Releases.admit``: withdrawn releases decline for
        ``budget``; the selection shrinks to the clients that train)."""
        if len(self.state.selected) == 0:
            return
        admitted = self.releases.admit(self.state.selected, self.state.info)
        self.state.withdrawn_budget += admitted.withdrawn
        ids = admitted.ids
        if len(ids) != len(self.state.selected):
            self.state.selected = ids
            self.state.selection = dataclasses.replace(
                self.state.selection, client_ids=tuple(ids.tolist())
            )
        plan = admitted.plan
        if plan is None:
            return
        self.state.privacy, self.state.responses = plan, admitted.responses
        gen = self.plan.torch_generator("training", self.state.info.round, device=self.world.device)
        self.state.local = self.learner.train(
            ids, round_index=self.state.info.round - 1, generator=gen, **plan.training_hooks()
        )
        self.table.train_loss[ids] = self.state.local.train_loss.detach().cpu().numpy()

    def phase_privatise(self) -> None:
        """6. Each selected client clips and noises its update (its privacy mechanism)."""
        if self.state.local is None:
            return
        plan = self.state.privacy
        assert plan is not None  # phase_train sets the plan whenever it sets ``local``
        gen = self.plan.torch_generator("noise", self.state.info.round, device=self.world.device)
        out = self.privacy.privatise(self.state.local.updates, plan, generator=gen)
        self.state.updates, metrics = split_metrics(out)
        self.state.extra.update(metrics)
        self.table.noise_std[self.state.selected] = plan.noise_std

    def phase_upload(self) -> None:
        """7. Stragglers miss the deadline; their updates never arrive.

        From now on the round's fault draw is knowable: plug-ins that declare
        ``ObservesFaults`` receive it, and the round's privacy plan carries it.
        """
        ids = self.state.selected
        self.state.uploaded = ~self.table.straggled[ids]
        self.table.uploaded[ids] = self.state.uploaded
        if self.state.faults is not None:
            for comp in self._observers:
                comp.observe_faults(self.state.faults, info=self.state.info)
            if self.state.privacy is not None:  # finalise and the noise columns read it
                self.state.privacy = self.state.privacy.after_upload(self.state.faults)

    def phase_aggregate(self) -> None:
        """8. Combine the received updates, update the global model, evaluate it when due."""
        state = self.state
        if state.updates is not None and state.uploaded.any():
            ok, ids = state.uploaded, state.selected[state.uploaded]
            updates = state.updates
            received = updates if ok.all() else updates[torch.as_tensor(ok, device=updates.device)]
            state.contributions = self.server.value(received, ids, self.table, state.info)
            dropped = self.table.views(state.selected[~ok])
            views = self.table.views(ids)
            delta, metrics = self.server.aggregate(received, views, dropped, state.info)
            state.extra.update(metrics)
            plan = state.privacy
            if delta is not None and self._finaliser is not None and plan is not None:
                gen = self.plan.torch_generator(
                    "noise", state.info.round, "central", device=self.world.device
                )
                out = self._finaliser.finalise(delta, plan, num_received=len(ids), generator=gen)
                delta, metrics = split_metrics(out)
                state.extra.update(metrics)
            if delta is None:  # the aggregate failed (e.g. secure aggregation did not unmask)
                state.aggregation_failed = True
                return
            try:
                self.learner.apply_update(delta)
                self._measured = False
            except DivergenceError as exc:
                raise DivergenceError.in_round(state.info.round, str(exc)) from None
        self._evaluate_when_due()

    def _evaluate_when_due(self, *, last: bool = False) -> None:
        """Evaluate a changed global model in an evaluation round (``training.eval_every``:
        every k-th round and the last; ``last``: this round ends the run early, e.g.
        ``game.stop_on_degenerate``); in other rounds its accuracy and loss are NaN (not
        measured). A measured loss that is not finite stops the run (``DivergenceError``)."""
        r = self.state.info.round
        due = last or self.learner.settings.evaluates(r, self.scenario.rounds)
        if not self._measured and due:
            self.test_accuracy, self.test_loss = self.learner.evaluate()
            self._measured = True
        elif not self._measured:
            self.test_accuracy = self.test_loss = math.nan
        if self._measured and not math.isfinite(self.test_loss):
            raise DivergenceError.in_round(r, f"test loss became {self.test_loss}")

    def phase_settle(self) -> None:
        """9. Privacy accounting for released updates, payments and utilities; the columns of
        the incentive's settlement (its ``round_metrics`` and ``client_metrics``)."""
        plan = self.state.privacy
        delivered: Sequence[Response] = ()
        if plan is not None and self.state.responses is not None:
            sent = self.state.uploaded
            self.releases.settle(
                plan, self.state.selected, sent, self.state.info, recorder=self._release_recorder
            )
            delivered = self.state.responses if sent.all() else self.state.responses[sent]
        self.payments = self.server.pay(delivered, self.state.info)
        self.table.settle(self.payments)
        settled = self.server.settlement  # the incentive's columns, with its settlement
        self.state.extra.update(settled.round_metrics)
        self.table.write_metrics(settled.client_metrics)

    def phase_collect(self) -> None:
        """10. One row for the round, one per client (plug-ins add their declared columns).

        First the round check (game diagnostics, degeneracy: ``self.monitor``); a degenerate
        round ends the run when the scenario says ``game.stop_on_degenerate``.
        """
        self.monitor.check(self)
        if self.monitor.stop_requested:  # the run ends with this round: measure its model
            self._evaluate_when_due(last=True)
        if self.economics is not None:
            self.economics.measure(self)
        gather_metrics(self._reporters, self.table, self.state)
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

    def _market(self) -> MarketView:
        views = self.state.views if self.state.views is not None else self.table.views()
        return MarketView(views, self.state.info, game=self.scenario.game, previous=self.previous)

    # ------------------------------------------------------------------ summaries
    @property
    def extra(self) -> dict[str, float]:
        """Plug-in round metrics of the current round (declared in ``round_columns``)."""
        return self.state.extra

    @property
    def epsilon_spent(self) -> np.ndarray:
        return self.table.epsilon_spent.copy()
