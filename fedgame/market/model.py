"""``MarketModel``: several servers bid for one client population; one Mesa step is one round.

Round t, in order (the one-server phases, per server where the server acts):

1. network: one fault draw for the clients (links and stragglers are the clients');
2. offers: each server's incentive makes its monopoly offer; with ``market.competition:
   best_response`` the leaders then play iterated best responses on rewards
   (:mod:`fedgame.market.leaders`);
3. respond: every client splits its remaining budget among the contests it can reach
   (:mod:`fedgame.market.followers`), and answers each server with its budget for it;
4. select: each server's selection rule, among the clients that answered it;
5/9. budget: servers in turn (the first one rotates each round) pass their plans through the
   one budget path over the clients' one ledger, and the releases that will leave are
   charged; ε spent is then the same in every server's table;
5. train: every server's admitted clients, in one call (:mod:`fedgame.market.training`);
6-9. each server privatises, aggregates what arrived, evaluates and pays its reward shares.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import mesa
import numpy as np
import pandas as pd

from fedgame.agents.roster_model import ScenarioModel
from fedgame.market.compete import compete, respond
from fedgame.market.followers import JointPlay
from fedgame.market.leaders import LeadersPlay
from fedgame.market.server import MarketServer, ServerRound, SharedReleases
from fedgame.market.spec import server_scenarios
from fedgame.market.tables import MarketRecorder
from fedgame.market.training import (
    TrainingJob,
    evaluate_federations,
    learner_groups,
    train_federations,
)
from fedgame.mechanisms.base import ObservesFaults
from fedgame.privacy.budget import PrivacyBudget
from fedgame.privacy.invariant import PrivacyInvariant
from fedgame.scenario.build import build_world, prepare_components
from fedgame.scenario.coerce import ScenarioLike
from fedgame.scenario.schema import Scenario
from fedgame.seeding import SeedPlan
from fedgame.views import MarketView, RoundRecord


class MarketClient(mesa.Agent):
    """A client of the market: one privacy ledger, courted by every server it can reach."""

    def __init__(self, model: MarketModel, client_id: int) -> None:
        super().__init__(model)
        self.client_id = client_id

    @property
    def epsilon_spent(self) -> float:
        return float(self.model.budget.spent[self.client_id])  # type: ignore[attr-defined]

    @property
    def served(self) -> tuple[str, ...]:
        """The servers this client delivered an update to in the last round."""
        return self.model.served_by(self.client_id)  # type: ignore[attr-defined]


class _Quiet:
    """The round check of the one-server model has nothing to say about a market (yet)."""

    stop_requested = False
    degenerate_reason = ""

    class log:
        rounds = 0

        @staticmethod
        def warnings() -> dict[str, Any]:
            return {}


class MarketModel(ScenarioModel):
    """Competing servers over shared clients (module doc); arguments as ``FedGameModel``."""

    def __init__(
        self,
        scenario: ScenarioLike = None,
        *,
        seed: int | None = None,
        replicate: int = 0,
        **kwargs: Any,
    ) -> None:
        super().__init__(scenario, seed=seed, replicate=replicate, **kwargs)
        resolved, plan = self.scenario, self.plan
        self.rules = resolved.market
        self.servers: list[MarketServer] = []
        for j, (spec, one) in enumerate(zip(resolved.servers, server_scenarios(resolved))):
            world = build_world(one, plan=plan)  # the same plan: the same clients
            own = SeedPlan(plan.seed_int("server", j), replicate)
            self.servers.append(
                MarketServer(self, index=j, name=spec.name, scenario=one, world=world, plan=own)
            )
        first = self.servers[0]
        self.world = first.world  # faults, graph, device, dataset name of the run
        for srv in self.servers[1:]:
            for col in ("epsilon_total", "delta", "privacy_value", "straggle_prob"):
                if not np.array_equal(srv.table.columns[col], first.table.columns[col]):
                    raise RuntimeError(f"server {srv.name} sees other clients ({col})")
        accountant = first.privacy.accountant
        total, delta = first.table.epsilon_total, first.table.delta
        #: the clients' one ledger each: every server charges it
        self.budget = PrivacyBudget(accountant, epsilon_total=total, delta_total=delta)
        invariant = PrivacyInvariant(accountant, epsilon_total=total)
        for srv in self.servers:
            srv.privacy.accountant = accountant
            srv.releases = SharedReleases(
                srv.privacy, srv.table, budget=self.budget, invariant=invariant
            )
            prepare_components(srv.world, srv.table.views(), plan=srv.plan, rounds=resolved.rounds)
            srv.releases.refresh(srv.table.client_id)
        #: servers whose learners can train in one batched call share a group number
        self.learner_groups = learner_groups(
            [srv.learner for srv in self.servers],
            [
                [
                    srv.scenario.model.model_dump(mode="json"),
                    srv.scenario.data.model_dump(mode="json"),
                ]
                for srv in self.servers
            ],
        )
        self.clients = [MarketClient(self, i) for i in range(len(first.table))]
        self.faults = first.world.components.faults
        self._observers = [
            (srv, c)
            for srv in self.servers
            for _, c in srv.world.components.by_path()
            if isinstance(c, ObservesFaults)
        ]
        self.previous: dict[str, RoundRecord] = {}
        self.leaders = LeadersPlay(np.zeros(len(self.servers)), True, 0)
        self.followers = JointPlay(np.zeros((len(self.servers), len(self.clients))), True, 0)
        self.recorder = MarketRecorder([s.name for s in self.servers])
        self.monitor = _Quiet()
        self.round_wall_time = 0.0
        self.running = True

    # ------------------------------------------------------------------ the round
    def step(self) -> None:
        started = time.perf_counter()
        t, rounds = self.steps, self.scenario.rounds
        infos = [srv.info(t, rounds) for srv in self.servers]
        first = self.servers[0]
        for srv in self.servers:
            srv.table.reset_round()
            srv.now = ServerRound()
        # 1. network
        draw = self.faults.draw(
            first.table.views(),
            graph=self.world.graph,
            info=infos[0],
            rng=self.plan.rng("faults", t),
        )
        for srv in self.servers:
            srv.table.link_up[:] = np.asarray(draw.link_up, dtype=bool)
            srv.table.straggled[:] = np.asarray(draw.straggler, dtype=bool)
        # 2. offers, and the leaders' competition
        for srv, info in zip(self.servers, infos):
            market = MarketView(
                srv.table.views(),
                info,
                game=self.scenario.game,
                previous=self.previous.get(srv.name),
            )
            srv.now.offer = srv.incentive.offer(market, info=info)
        self.leaders = compete(self.servers, self.rules, t)
        for srv, reward in zip(self.servers, self.leaders.rewards):
            srv.now.offer = dataclasses.replace(srv.now.offer, reward=float(reward))
        # 3. the clients' joint answer
        self.followers = respond(self.servers, self.rules)
        # 4. selection
        for srv, info in zip(self.servers, infos):
            srv.select(info)
        # 5/9. the one budget path, servers in turn
        before = self.budget.spent.copy()
        order = np.roll(np.arange(len(self.servers)), -((t - 1) % len(self.servers)))
        for j in order.tolist():
            charged = self.servers[j].admit_and_charge(infos[j])
            self.share_spent(self.servers[j], charged)
        for srv, comp in self._observers:
            comp.observe_faults(draw, info=infos[srv.index])
        for srv in self.servers:  # the uploads are over: each plan carries the round's faults
            if srv.now.plan is not None:
                srv.now.plan = srv.now.plan.after_upload(draw)
        # 5. training, every federation in one call; 6-9. privatise, aggregate, pay
        jobs = [self._job(srv, t) for srv in self.servers]
        batched = self.rules.batched_evaluation
        for srv, local, info in zip(self.servers, train_federations(jobs), infos):
            srv.finish(local, info, evaluate=not batched)
        if batched:
            self._evaluate(infos)
        self.round_wall_time = time.perf_counter() - started
        self.recorder.record(self, spent_before=before)
        for srv in self.servers:
            self.previous[srv.name] = RoundRecord(
                t,
                float(srv.now.offer.reward),
                srv.table.responses(),
                srv.now.selected[srv.now.sent] if srv.now.plan is not None else np.zeros(0, int),
            )
        if self.steps >= rounds:
            self.running = False

    def _job(self, srv: MarketServer, t: int) -> TrainingJob | None:
        if srv.now.plan is None or len(srv.now.selected) == 0:
            return None
        return TrainingJob(
            srv.learner,
            srv.now.selected,
            t - 1,
            srv.torch_generator("training", t),
            dict(srv.now.plan.training_hooks()),
            self.learner_groups[srv.index],
        )

    def _evaluate(self, infos: list[Any]) -> None:
        """The changed models, one ``evaluate_models`` call per learner group."""
        changed = [srv for srv in self.servers if srv.now.evaluate]
        groups = [self.learner_groups[srv.index] for srv in changed]
        results = evaluate_federations([srv.learner for srv in changed], groups)
        for srv, (acc, loss) in zip(changed, results):
            srv.test_accuracy, srv.test_loss = acc, loss
            srv.check_finite(infos[srv.index])

    def share_spent(self, charging: MarketServer, ids: np.ndarray) -> None:
        """After ``charging`` charged ``ids``: the same ε spent in every other server's
        table (its ``epsilon_after_next`` priced again by that server's mechanism)."""
        if len(ids) == 0:
            return
        for srv in self.servers:
            if srv is charging:
                continue
            srv.table.columns["epsilon_spent"][ids] = self.budget.spent[ids]
            srv.table.budget_version += 1
            assert srv.releases is not None
            srv.releases.refresh(ids)

    # ------------------------------------------------------------------ reading it
    def served_by(self, client_id: int) -> tuple[str, ...]:
        """The servers ``client_id`` delivered to in the last round."""
        return tuple(
            srv.name
            for srv in self.servers
            if srv.now.plan is not None
            and client_id in set(srv.now.selected[srv.now.sent].tolist())
        )

    @property
    def test_accuracy(self) -> float:
        """The servers' mean test accuracy."""
        return float(np.mean([s.test_accuracy for s in self.servers]))

    @property
    def epsilon_spent(self) -> np.ndarray:
        return self.budget.spent.copy()

    def frames(self, last_step: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The rounds table (one row per round and server) and the clients table."""
        return self.recorder.frames(last_step)

    @property
    def datacollector(self) -> MarketRecorder:
        return self.recorder


def is_market(scenario: Scenario) -> bool:
    """Whether ``scenario`` builds a market (it lists ``servers``)."""
    return bool(scenario.servers)
