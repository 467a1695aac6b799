"""``FedGameModel``: one Mesa step is one federated round, in ten named phases.

Agents decide (server: offer, selection, aggregation, payment; clients: participation and
privacy level); the one ``BatchedLearner`` computes (all selected clients trained at once).
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any

import mesa
import numpy as np
import torch

from fedgame.agents.client import ClientAgent, client_row
from fedgame.agents.server import ServerAgent
from fedgame.collect import (
    declared_columns,
    extra_reporter,
    round_reporters,
    round_summary,
)
from fedgame.errors import DivergenceError
from fedgame.learning.batched import LocalResult
from fedgame.mechanisms.base import FaultDraw
from fedgame.privacy.base import PrivacyPlan
from fedgame.privacy.ledger import PrivacyLedger
from fedgame.scenario.build import World, build_world
from fedgame.scenario.schema import Scenario
from fedgame.seeding import SeedPlan
from fedgame.views import ClientView, MarketView, Offer, RoundInfo, Selection, SetupContext


@dataclass
class RoundState:
    """What the phases of the current round hand to each other."""

    info: RoundInfo
    started: float
    views: list[ClientView] = field(default_factory=list)
    offer: Offer = field(default_factory=Offer)
    selection: Selection = field(default_factory=lambda: Selection(()))
    local: LocalResult | None = None
    privacy: PrivacyPlan | None = None
    updates: torch.Tensor | None = None
    uploaded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    failed_links: int = 0
    faults: FaultDraw | None = None
    aggregation_failed: bool = False
    extra: dict[str, float] = field(default_factory=dict)


class FedGameModel(mesa.Model):
    """A DP federated-learning game: a server agent and ``population.clients`` client agents.

    Args:
        scenario: a validated scenario.
        replicate: replicate index for the seed plan (sweeps use it; common random numbers).
    """

    def __init__(self, scenario: Scenario, *, replicate: int = 0) -> None:
        plan = SeedPlan(scenario.seed, replicate)
        super().__init__(seed=plan.seed_int("mesa"))
        self.scenario = scenario
        self.plan = plan
        self.world: World = build_world(scenario, plan=plan)
        self.learner = self.world.learner
        comps = self.world.components
        self.policy = comps["policy"]
        self.privacy = comps["privacy"]
        self.faults = comps["network.faults"]
        self.server = ServerAgent(
            self,
            incentive=comps["incentive"],
            selection=comps["selection"],
            aggregation=comps["aggregation"],
        )
        self.clients = self._create_clients()
        self.client_set = self.agents_by_type[ClientAgent]
        self.ledger = PrivacyLedger(self.privacy.accountant, [c.delta for c in self.clients])
        self._prepare_components()  # before budgets: next_charge may need prepared state
        for client in self.clients:
            self._refresh_budget(client)
        self.test_accuracy, self.test_loss = self.learner.evaluate()
        self._touched: set[int] = set()
        self.summary: dict[str, Any] = {}
        self.state = RoundState(
            RoundInfo(0, scenario.rounds, len(self.clients)), time.perf_counter()
        )
        self.round_wall_time = 0.0
        round_extra, client_extra = declared_columns(comps.values())
        self.datacollector = mesa.DataCollector(
            model_reporters=round_reporters() | {c: extra_reporter(c) for c in round_extra},
            agenttype_reporters={ClientAgent: {"row": client_row(client_extra)}},
        )

    def _create_clients(self) -> list[ClientAgent]:
        pop = self.world.population
        return [
            ClientAgent(
                self,
                client_id=i,
                dataset_size=int(pop.dataset_size[i]),
                label_counts=tuple(int(v) for v in pop.label_counts[i]),
                emd=float(pop.emd[i]),
                privacy_value=float(pop.privacy_value[i]),
                epsilon_total=float(pop.epsilon_total[i]),
                delta=float(pop.delta[i]),
                epsilon_round=float(pop.epsilon_round[i]),
                delta_round=float(pop.delta_round[i]),
                straggle_prob=float(pop.straggle_prob[i]),
                colluder=bool(pop.colluder[i]),
            )
            for i in range(self.scenario.population.clients)
        ]

    def _prepare_components(self) -> None:
        """Call each plug-in's optional ``prepare`` hook once, with its own random stream."""
        ctx = SetupContext(
            num_clients=len(self.clients),
            rounds=self.scenario.rounds,
            clients=tuple(c.view() for c in self.clients),
            graph=self.world.graph,
            components={**self.world.components, "learner": self.learner},
            planned_participations=self.world.planned_participations,
        )
        for path, comp in self.world.components.items():
            if hasattr(comp, "prepare"):
                comp.prepare(ctx, rng=self.plan.rng("prepare", path))

    def _refresh_budget(self, client: ClientAgent) -> None:
        """Recompute what one more default participation would leave ``client`` at."""
        charge = self.privacy.next_charge(client.view())
        client.priced_charge = charge
        client.epsilon_after_next = self.ledger.epsilon_if(client.client_id, charge)

    def _affordable(self, plan: PrivacyPlan) -> list[bool]:
        """Budget guard: may each planned release happen without passing the client's ε_total?

        Clients answered the offer knowing the price of their default release
        (``can_afford_next``); when the round's plan charges something else (a policy's own ε
        or ρ, a planner that re-planned), the release is re-priced here, and a client it would
        push past its budget withdraws (reason ``budget``) instead of training.
        """
        keep = []
        for cid, charge in zip(plan.client_ids, plan.charges):
            client = self.clients[cid]
            ok = charge.free or charge == client.priced_charge
            if not ok:
                after = self.ledger.epsilon_if(cid, charge)
                ok = after <= client.epsilon_total * (1 + 1e-9)
            if not ok:
                client.selected, client.decline_reason = False, "budget"
            keep.append(ok)
        return keep

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

    def phase_network(self) -> None:
        """1. Draw this round's failed links and stragglers."""
        info = RoundInfo(
            self.steps, self.scenario.rounds, len(self.clients), self.test_accuracy, self.test_loss
        )
        self.state = RoundState(info, time.perf_counter())
        for cid in self._touched:
            self.clients[cid].reset_round()
        self._touched = set()
        views = [c.view() for c in self.clients]
        draw = self.faults.draw(
            views, graph=self.world.graph, info=info, rng=self.plan.rng("faults", info.round)
        )
        for client, up, late in zip(self.clients, draw.link_up, draw.straggler):
            client.link_up = bool(up)
            client.straggled = bool(late)
            if not up:
                views[client.client_id] = client.view()
        self.state.failed_links = int((~np.asarray(draw.link_up)).sum()) + len(draw.failed_edges)
        self.state.faults = draw
        self.state.views = views

    def phase_offer(self) -> None:
        """2. The leader announces its reward / plan."""
        market = MarketView(tuple(self.state.views), self.state.info)
        self.state.offer = self.server.make_offer(market, self.state.info)

    def phase_respond(self) -> None:
        """3. Followers decide participation and privacy level."""
        market = MarketView(tuple(self.state.views), self.state.info)
        for client, view in zip(self.clients, self.state.views):
            client.respond(self.state.offer, market, view)

    def phase_select(self) -> None:
        """4. The server chooses participants among reachable responders."""
        candidates = [self.state.views[c.client_id] for c in self.clients if c.participating]
        selection = self.server.select(candidates, self.state.info)
        for cid in selection.client_ids:
            self.clients[cid].selected = True
        self._touched.update(selection.client_ids)
        self.state.selection = selection

    def phase_train(self) -> None:
        """5. Batched local training of every selected client (under the privacy plan)."""
        ids = list(self.state.selection.client_ids)
        if not ids:
            return
        views = [self.state.views[i] for i in ids]
        responses = [self.clients[i].response for i in ids]
        plan = self.privacy.plan(views, responses, info=self.state.info)
        keep = self._affordable(plan)
        while not all(keep):  # re-plan without the withdrawn (mechanism state stays aligned)
            views = [v for v, k in zip(views, keep) if k]
            responses = [r for r, k in zip(responses, keep) if k]
            ids = [v.client_id for v in views]
            self.state.selection = dataclasses.replace(self.state.selection, client_ids=tuple(ids))
            if not ids:
                return
            plan = self.privacy.plan(views, responses, info=self.state.info)
            keep = self._affordable(plan)
        self.state.privacy = plan
        gen = self.plan.torch_generator("training", self.state.info.round, device=self.world.device)
        self.state.local = self.learner.train(
            ids, round_index=self.state.info.round - 1, generator=gen, **_training_hooks(plan)
        )
        losses = self.state.local.train_loss.detach().cpu().numpy()
        for cid, loss in zip(ids, losses):
            self.clients[cid].train_loss = float(loss)

    def phase_privatise(self) -> None:
        """6. Each selected client clips and noises its update (its privacy mechanism)."""
        if self.state.local is None:
            return
        plan = self.state.privacy
        assert plan is not None  # phase_train sets the plan whenever it sets ``local``
        gen = self.plan.torch_generator("noise", self.state.info.round, device=self.world.device)
        self.state.updates = self.privacy.privatise(self.state.local.updates, plan, generator=gen)
        for cid, std in zip(plan.client_ids, plan.noise_std):
            self.clients[cid].noise_std = float(std)

    def phase_upload(self) -> None:
        """7. Stragglers miss the deadline; their updates never arrive."""
        ids = self.state.selection.client_ids
        self.state.uploaded = np.array([not self.clients[i].straggled for i in ids], dtype=bool)
        for cid, ok in zip(ids, self.state.uploaded):
            self.clients[cid].uploaded = bool(ok)

    def phase_aggregate(self) -> None:
        """8. Combine the received updates, update the global model, evaluate."""
        if self.state.updates is not None and self.state.uploaded.any():
            selected = self.state.selection.client_ids
            ids = [i for i, ok in zip(selected, self.state.uploaded) if ok]
            lost = [i for i, ok in zip(selected, self.state.uploaded) if not ok]
            mask = torch.as_tensor(self.state.uploaded, device=self.state.updates.device)
            received = self.state.updates[mask]
            delta = self.server.aggregate(
                received,
                [self.state.views[i] for i in ids],
                [self.state.views[i] for i in lost],
                self.state.info,
            )
            if delta is None:
                self.state.aggregation_failed = True
                return
            if hasattr(self.privacy, "finalise"):
                gen = self.plan.torch_generator(
                    "noise", self.state.info.round, "central", device=self.world.device
                )
                delta = self.privacy.finalise(
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
        delivered = []
        if plan is not None:
            for cid, charge in zip(plan.client_ids, plan.charges):
                client = self.clients[cid]
                if client.uploaded:
                    self.ledger.charge(cid, charge)
                    if hasattr(self.privacy, "record_release"):  # closed-form ε columns
                        self.privacy.record_release(cid, charge)
                    client.record_release(epsilon_spent=self.ledger.epsilon(cid))
                    self._refresh_budget(client)
                    assert client.response is not None  # every client responds in phase_respond
                    delivered.append(client.response)
        payments = self.server.pay(delivered, self.state.info)
        self._touched.update(payments)
        for cid in self._touched:
            self.clients[cid].settle(reward=float(payments.get(cid, 0.0)))

    def phase_collect(self) -> None:
        """10. One row for the round, one per client (plug-ins add their declared columns)."""
        for comp in self.world.components.values():
            if hasattr(comp, "round_metrics"):
                self.extra.update(comp.round_metrics())
            if hasattr(comp, "client_metrics"):
                for name, values in comp.client_metrics().items():
                    for cid, value in values.items():
                        self.clients[cid].extra[name] = value
                    self._touched.update(values)
        self.summary = round_summary(self)
        self.round_wall_time = time.perf_counter() - self.state.started
        self.datacollector.collect(self)

    # ------------------------------------------------------------------ summaries
    @property
    def extra(self) -> dict[str, float]:
        """Plug-in round metrics of the current round (declared in ``round_columns``)."""
        return self.state.extra

    @property
    def epsilon_spent(self) -> np.ndarray:
        return np.array([c.epsilon_spent for c in self.clients])


def _training_hooks(plan: PrivacyPlan) -> dict[str, Any]:
    """Learner keywords a privacy plan asks for (per-sample clipping, per-step noise)."""
    hooks: dict[str, Any] = {}
    if plan.per_sample_clip is not None:
        hooks["per_sample_clip"] = plan.per_sample_clip
    if plan.step_noise_std is not None:
        hooks["step_noise_std"] = torch.as_tensor(plan.step_noise_std)
    return hooks
