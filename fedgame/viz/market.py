"""The live market behind the dashboard: a ``MarketModel`` built from the scenario and the knobs.

A scenario with ``servers:`` (issue 35) opens as a market: the page's knobs are the shared
keys that every server's play reads (clients N, rounds T, straggle probability, link failure
where the fault model has it, the ε budget per client, the seed; selection ``k`` only while no
server sets its own selection) and one γ per server whose incentive has γ (the weight of
accuracy in its leader's cost: a larger γ, a larger optimal reward R*, the "bigger reward
budget" of ``scenarios/duopoly_asymmetric.yaml``). The reward kind is not a knob: each server's
incentive must offer a contest, and a market-wide kind would override the servers' own.

SolaraViz's Reset builds ``MarketDashboardModel(scenario=..., **knob_values)``; the moved knobs
become scenario overrides validated and preflighted as ``fedgame run`` would, and a
combination that does not validate keeps the scenario's settings and says why in ``notice``
(as :class:`fedgame.viz.live.DashboardModel` does).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from fedgame.errors import ScenarioError
from fedgame.market.model import MarketModel
from fedgame.market.spec import server_scenarios
from fedgame.scenario.coerce import scenario_from
from fedgame.scenario.load import validated_tree
from fedgame.scenario.preflight import preflight
from fedgame.scenario.schema import Scenario
from fedgame.viz.knobs import GAMMA, INCENTIVE_KIND, Knob, knobs
from fedgame.viz.live import PageFacts, current


def _gamma_keyword(index: int) -> str:
    return f"servers__{index}__incentive__gamma"


def market_knobs(scenario: Scenario) -> list[Knob]:
    """The knobs of a market scenario, each at the scenario's value (module doc)."""
    own_selection = any(spec.selection is not None for spec in scenario.servers)
    out = [
        k
        for k in knobs(scenario)
        if k.key not in (INCENTIVE_KIND, GAMMA) and not (k.key == "selection.k" and own_selection)
    ]
    for i, (spec, one) in enumerate(zip(scenario.servers, server_scenarios(scenario))):
        config = one.config("incentive")
        if "gamma" in type(config).model_fields:
            gamma = float(config.gamma)
            out.append(
                Knob(f"servers.{i}.incentive.gamma", f"γ of server {spec.name}", gamma,
                     0.05, 0.95, 0.05)
            )  # fmt: skip
    return out


def market_params(scenario: Scenario) -> dict[str, Any]:
    """SolaraViz ``model_params``: the scenario (fixed) and one input per knob."""
    return {"scenario": scenario, **{k.keyword: k.param() for k in market_knobs(scenario)}}


def market_overrides(scenario: Scenario, values: Mapping[str, Any]) -> dict[str, Any]:
    """The scenario keys (keyword form) the knob ``values`` change; a server's γ rewrites
    its entry of ``servers`` (its ``incentive`` gets that γ, its other settings kept)."""
    changed = {
        k.key: values[k.keyword]
        for k in market_knobs(scenario)
        if k.keyword in values and values[k.keyword] != k.value
    }
    keys = {k.replace(".", "__"): v for k, v in changed.items() if not k.startswith("servers.")}
    gammas = {int(k.split(".")[1]): v for k, v in changed.items() if k.startswith("servers.")}
    if gammas:
        servers = [dict(s) for s in validated_tree(scenario, mode="json")["servers"]]
        for i, gamma in gammas.items():
            servers[i]["incentive"] = {**(servers[i].get("incentive") or {}), "gamma": gamma}
        keys["servers"] = servers
    return keys


class MarketDashboardModel(PageFacts, MarketModel):
    """A ``MarketModel`` whose keyword parameters are the dashboard's knob values, offering
    :class:`fedgame.viz.data.DashboardData`.

    Args:
        scenario: the validated market scenario the dashboard was started with.
        seed, replicate: as for ``MarketModel``.
        **kwargs: knob values by keyword (``population__clients=20``,
            ``servers__0__incentive__gamma=0.7``); values equal to the scenario's change
            nothing.
    """

    def __init__(
        self,
        scenario: Scenario | None = None,
        *,
        seed: int | None = None,
        replicate: int = 0,
        **kwargs: Any,
    ) -> None:
        if scenario is None or not scenario.servers:
            raise ScenarioError("servers", ..., "a market scenario (one that lists servers)")
        values = {name: current(value) for name, value in kwargs.items()}
        if seed is not None:
            values["seed"] = seed
        keys = market_overrides(scenario, values)
        resolved, notice = scenario, ""
        if keys:
            try:
                resolved = scenario_from(scenario, **keys)
                server_scenarios(resolved)
                preflight(resolved)
            except ScenarioError as err:
                resolved, notice = scenario, f"kept the scenario's settings: {err}"
        super().__init__(resolved, replicate=replicate)
        self.base = scenario
        self._notice = notice
        #: wall-clock seconds the latest round took to simulate (the page shows it)
        self.step_seconds = 0.0
        self._history: tuple[int, pd.DataFrame] = (-1, pd.DataFrame())

    def step(self) -> None:
        """Play one round, timing it."""
        start = time.perf_counter()
        super().step()
        self.step_seconds = time.perf_counter() - start

    def _done(self) -> int:
        """Rounds recorded in full (a playing model may be recording one: its clients rows
        come after its rounds rows, so their count is the rounds complete in both)."""
        return len(self.recorder.clients_rows)

    def history(self) -> pd.DataFrame:
        """The rounds table so far (one row per round and server); built once per round,
        so the views of one render share it (do not modify it)."""
        done = self._done()
        if self._history[0] != done:
            rows = self.recorder.rounds[: done * len(self.servers)]
            self._history = (done, pd.DataFrame(rows))
        return self._history[1]

    def current_clients(self) -> pd.DataFrame:
        """The clients table of the latest recorded round; before the first round, the
        clients as built (``round`` 0, nobody served)."""
        done = self._done()
        if done:
            return self.recorder.clients_rows[done - 1]
        table = self.servers[0].table
        n = len(table)
        return pd.DataFrame(
            {
                "round": np.zeros(n, np.int64),
                "client_id": np.arange(n),
                "served": [""] * n,
                "servers_served": np.zeros(n, np.int64),
                "epsilon_spent": self.budget.spent.copy(),
                "epsilon_total": table.epsilon_total.copy(),
                "privacy_value": table.privacy_value.copy(),
            }
        )
