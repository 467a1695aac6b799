"""A competing server: a Mesa agent with its own task, global model, plug-ins and table.

Its client table holds the round's answers to *its* offer (participation, ρ, selection,
payment); ε spent is the clients' one ledger, kept the same in every server's table by the
market (:meth:`fedgame.market.model.MarketModel.share_spent`). Its releases go through the
one budget path (:class:`fedgame.privacy.releases.Releases`) over the market's shared budget.
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

import mesa
import numpy as np
import torch

from fedgame.agents.server import check_candidates
from fedgame.agents.table import ClientTable
from fedgame.errors import DivergenceError
from fedgame.mechanisms.base import DrawsMasks, Settlement, settlement_of
from fedgame.privacy.base import FinalisesAggregate, RecordsReleases, split_metrics
from fedgame.privacy.budget import PrivacyBudget
from fedgame.privacy.invariant import PrivacyInvariant
from fedgame.privacy.releases import Releases
from fedgame.scenario.build import World
from fedgame.scenario.schema import Scenario
from fedgame.seeding import SeedPlan
from fedgame.views import Offer, RoundInfo, Selection

if TYPE_CHECKING:
    from fedgame.market.model import MarketModel


class SharedReleases(Releases):
    """:class:`Releases` of one server over the market's one budget and invariant (the
    clients' single ledgers), instead of a budget of its own."""

    def __init__(
        self,
        privacy: Any,
        table: ClientTable,
        *,
        budget: PrivacyBudget,
        invariant: PrivacyInvariant,
    ) -> None:
        self.privacy = privacy
        self.table = table
        self.budget = budget
        self.invariant = invariant


@dataclasses.dataclass
class ServerRound:
    """What one server did this round."""

    offer: Offer = dataclasses.field(default_factory=Offer)
    selection: Selection = dataclasses.field(default_factory=lambda: Selection(()))
    selected: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    plan: Any = None
    responses: Any = None
    sent: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, bool))
    withdrawn: int = 0
    payments: dict[int, float] = dataclasses.field(default_factory=dict)
    settlement: Settlement = dataclasses.field(default_factory=lambda: Settlement({}))
    aggregation_failed: bool = False
    evaluate: bool = False  # the model changed; the market evaluates it (batched_evaluation)


class MarketServer(mesa.Agent):
    """One server of the market (module doc); ``index`` keys its own random streams."""

    model: MarketModel

    def __init__(
        self,
        model: MarketModel,
        *,
        index: int,
        name: str,
        scenario: Scenario,
        world: World,
        plan: SeedPlan,
    ) -> None:
        super().__init__(model)
        self.index, self.name, self.scenario, self.world, self.plan = (
            index,
            name,
            scenario,
            world,
            plan,
        )
        comps = world.components
        self.incentive = comps.incentive
        self.selection_rule = comps.selection
        self.aggregation = comps.aggregation
        self.privacy = comps.privacy
        self.learner = world.learner
        self.table = ClientTable(world.population)
        self.releases: Releases | None = None  # set by the market (shared budget)
        self._finaliser = self.privacy if isinstance(self.privacy, FinalisesAggregate) else None
        self._recorder = self.privacy if isinstance(self.privacy, RecordsReleases) else None
        self._draws_masks = isinstance(self.aggregation, DrawsMasks)
        self.test_accuracy, self.test_loss = self.learner.evaluate()
        self.now = ServerRound()

    def rng(self, stream: str, round_: int) -> np.random.Generator:
        """This server's own stream ``stream`` in round ``round_``."""
        return self.plan.rng(stream, round_, "server", self.index)

    def torch_generator(self, stream: str, round_: int) -> torch.Generator:
        return self.plan.torch_generator(
            stream, round_, "server", self.index, device=self.world.device
        )

    def info(self, round_: int, rounds: int) -> RoundInfo:
        return RoundInfo(round_, rounds, len(self.table), self.test_accuracy, self.test_loss)

    # ------------------------------------------------------------------ phases
    def select(self, info: RoundInfo) -> None:
        """Phase 4: participants among the clients that answered its offer."""
        candidates = self.table.views(np.flatnonzero(self.table.participating))
        selection, _ = split_metrics(
            self.selection_rule.select(candidates, info=info, rng=self.rng("selection", info.round))
        )
        ids = np.asarray(selection.client_ids, dtype=np.int64)
        who = f"server {self.name}: selection"
        check_candidates(ids, self.table.participating, who=who, round_=info.round)
        self.table.touch(ids)
        self.table.selected[ids] = True
        self.now.selection, self.now.selected = selection, ids

    def admit_and_charge(self, info: RoundInfo) -> np.ndarray:
        """Phases 5 and 9 of the budget: the plan the shared budget admits in full, and the
        charge of the releases that will leave their clients (stragglers, drawn in phase 1,
        send nothing and are not charged; the one-server model's rule). Returns the ids
        charged."""
        assert self.releases is not None
        if len(self.now.selected) == 0:
            return np.zeros(0, np.int64)
        admitted = self.releases.admit(self.now.selected, info)
        self.now.withdrawn += admitted.withdrawn
        self.now.selected = admitted.ids
        if admitted.plan is None:
            return np.zeros(0, np.int64)
        self.now.plan, self.now.responses = admitted.plan, admitted.responses
        sent = ~self.table.straggled[admitted.ids]
        self.now.sent = sent
        self.table.uploaded[admitted.ids] = sent
        self.releases.settle(admitted.plan, admitted.ids, sent, info, recorder=self._recorder)
        return admitted.ids[sent]

    def finish(self, local: Any, info: RoundInfo, *, evaluate: bool = True) -> None:
        """Phases 6-9 after training: privatise, upload, aggregate and evaluate, pay
        (``evaluate=False``: the market evaluates the changed models afterwards, then calls
        :meth:`check_finite`)."""
        now = self.now
        if local is not None and now.plan is not None:
            ids = now.selected
            self.table.train_loss[ids] = local.train_loss.detach().cpu().numpy()
            updates, _ = split_metrics(
                self.privacy.privatise(
                    local.updates, now.plan, generator=self.torch_generator("noise", info.round)
                )
            )
            self.table.noise_std[ids] = now.plan.noise_std
            if now.sent.any():
                self._aggregate(updates, info, evaluate=evaluate)
        if evaluate:
            self.check_finite(info)
        delivered = () if now.responses is None else now.responses[now.sent]
        now.settlement = settlement_of(
            self.incentive.settle(now.offer, delivered, info=info), now.offer
        )
        now.payments = dict(now.settlement.payments)
        self.table.settle(now.payments)

    def check_finite(self, info: RoundInfo) -> None:
        """``DivergenceError`` if the test loss is not finite."""
        if not math.isfinite(self.test_loss):
            raise DivergenceError.in_round(
                info.round, f"server {self.name}: test loss became {self.test_loss}"
            )

    def _aggregate(self, updates: torch.Tensor, info: RoundInfo, *, evaluate: bool) -> None:
        now = self.now
        ok = now.sent
        ids = now.selected[ok]
        received = updates if ok.all() else updates[torch.as_tensor(ok, device=updates.device)]
        clients, dropped = self.table.views(ids), self.table.views(now.selected[~ok])
        if self._draws_masks:
            out = self.aggregation.aggregate(
                received,
                clients=clients,
                dropped=dropped,
                rng=self.rng("masks", info.round),
                faults=None if now.plan is None else now.plan.faults,
            )
        else:
            out = self.aggregation.aggregate(received, clients=clients, dropped=dropped)
        delta, _ = split_metrics(out)
        if delta is not None and self._finaliser is not None:
            delta, _ = split_metrics(
                self._finaliser.finalise(
                    delta,
                    now.plan,
                    num_received=len(ids),
                    generator=self.torch_generator("central", info.round),
                )
            )
        if delta is None:
            now.aggregation_failed = True
            return
        try:
            self.learner.apply_update(delta)
            if evaluate:
                self.test_accuracy, self.test_loss = self.learner.evaluate()
            else:
                now.evaluate = True
        except DivergenceError as exc:
            raise DivergenceError.in_round(info.round, f"server {self.name}: {exc}") from None
