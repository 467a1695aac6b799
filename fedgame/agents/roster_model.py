"""``ScenarioModel``: a Mesa model built from a scenario and its seed plan; ``RosterModel``: one
whose client agents live in a :class:`ClientRoster`.

Mesa's own views of the agents (``agents``, ``agents_by_type``, ``agent_types``) create the
roster's agents first, so they always list every client; ``clients`` is the roster itself.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mesa

from fedgame.agents.client import answers_in_batch, behaviour_type
from fedgame.agents.roster import ClientRoster
from fedgame.agents.table import ClientTable
from fedgame.round_state import AgentGroup
from fedgame.scenario.build import BehaviourGroup
from fedgame.scenario.coerce import ScenarioLike, scenario_from
from fedgame.scenario.schema import Scenario
from fedgame.seeding import SeedPlan


class ScenarioModel(mesa.Model):
    """The set-up every fedgame model shares: the scenario resolved (``seed`` and the
    ``__``-spelled ``kwargs`` override its keys, validated as ``fedgame run`` does), its
    :class:`SeedPlan` for ``replicate``, and Mesa seeded from the plan's ``mesa`` stream."""

    def __init__(
        self, scenario: ScenarioLike = None, *, seed: int | None, replicate: int, **kwargs: Any
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
        self.scenario: Scenario = resolved
        self.replicate = replicate
        self.plan = plan


class RosterModel(ScenarioModel):
    """A Mesa model with one client agent type per behaviour, created on first use."""

    _roster: ClientRoster

    def _create_clients(
        self, behaviours: Sequence[BehaviourGroup], table: ClientTable
    ) -> tuple[AgentGroup, ...]:
        """One Mesa agent type per behaviour; the agents (``ClientRoster``) are created in
        client-id order when first needed, at once here if a type answers agent by agent."""
        groups = []
        types = {}
        for group in behaviours:
            types[group.label] = behaviour_type(group.label, group.decision, params=group.params)
        self._roster = ClientRoster(self, table, types)
        for group in behaviours:
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
