"""The live model behind the dashboard: a ``FedGameModel`` built from the scenario and the knobs.

SolaraViz's Reset builds a new model as ``DashboardModel(scenario=..., **knob_values)``. The
knobs that moved become scenario overrides (:func:`fedgame.viz.knobs.overrides`), validated
and preflighted as ``fedgame run`` would; a combination that does not validate (say k above
N for a rule that needs k <= N) keeps the scenario's own settings and says why in ``notice``.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from fedgame.errors import ScenarioError
from fedgame.model import FedGameModel
from fedgame.scenario.coerce import scenario_from
from fedgame.scenario.load import validated_tree
from fedgame.scenario.preflight import preflight
from fedgame.scenario.schema import Scenario
from fedgame.viz.knobs import overrides


def current(value: Any) -> Any:
    """What a knob holds now: the value of an input the page keeps itself (a Solara reactive,
    for the knobs that follow the reward kind), else ``value`` as given."""
    try:
        from solara.toestand import ValueBase
    except ImportError:  # without the viz extra no page passes one
        return value
    return value.value if isinstance(value, ValueBase) else value


class PageFacts:
    """What the page reads of a live model, one server or a market: its title, rounds
    planned, the notice of settings kept, the validated settings, the network and where the
    network view draws each client. Mixed in before the model class; reads the model's
    ``scenario``, ``world`` and ``_notice``."""

    scenario: Scenario
    world: Any
    _notice: str

    @property
    def title(self) -> str:
        return self.scenario.name

    @property
    def rounds_planned(self) -> int:
        return self.scenario.rounds

    @property
    def notice(self) -> str:
        return self._notice

    @cached_property
    def settings(self) -> dict[str, Any]:
        return validated_tree(self.scenario, mode="json")

    @property
    def graph(self) -> nx.Graph:
        return self.world.graph

    @cached_property
    def positions(self) -> dict[int, np.ndarray]:
        """Where the network view draws each client (computed once)."""
        from fedgame.viz.network import layout

        return layout(self.graph)


class DashboardModel(PageFacts, FedGameModel):
    """A ``FedGameModel`` whose keyword parameters are the dashboard's knob values.

    Args:
        scenario: the validated scenario the dashboard was started with.
        seed, replicate: as for ``FedGameModel``.
        **kwargs: knob values by keyword (``population__clients=20``), or the page's
            reactive holding one (:func:`current`); values equal to the scenario's change
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
        base = scenario if scenario is not None else scenario_from(None)
        kwargs = {name: current(value) for name, value in kwargs.items()}
        if seed is not None:
            kwargs["seed"] = seed
        keys, notes = overrides(base, kwargs)
        resolved = base
        if keys:
            try:
                resolved = scenario_from(base, **keys)
                preflight(resolved)
            except ScenarioError as err:
                resolved = base
                notes = [f"kept the scenario's settings: {err}"]
        super().__init__(resolved, replicate=replicate)
        self.base = base
        self._notice = "; ".join(notes)
        #: wall-clock seconds the latest round took to simulate (the page shows it)
        self.step_seconds = 0.0
        self._history: tuple[int, pd.DataFrame] = (-1, pd.DataFrame())
        self._clients: tuple[int, pd.DataFrame] = (-1, pd.DataFrame())

    def step(self) -> None:
        """Play one round, timing it."""
        start = time.perf_counter()
        super().step()
        self.step_seconds = time.perf_counter() - start

    def history(self) -> pd.DataFrame:
        """Rounds 0..now from the DataCollector (a round being recorded is left out); built
        once per round, so the views of one render share it (do not modify it)."""
        columns = self.datacollector.model_vars
        done = min((len(v) for v in columns.values()), default=0)
        if self._history[0] != done:
            frame = pd.DataFrame({name: values[:done] for name, values in columns.items()})
            frame.insert(0, "round", np.arange(done, dtype=np.int64))
            self._history = (done, frame)
        return self._history[1]

    def current_clients(self) -> pd.DataFrame:
        """The clients table of the latest recorded round (step 0: the population as built);
        built once per round (do not modify it)."""
        collector = self.datacollector
        steps = list(collector.blocks)  # one C-level copy: a playing model may add a block
        if not steps:
            return pd.DataFrame()
        last = max(steps)
        if self._clients[0] != last:
            block = collector.blocks[last]
            frame = pd.DataFrame({name: block[name] for name in collector.client_columns})
            frame.insert(0, "round", last)
            self._clients = (last, frame.astype({"decline_reason": str, "behaviour": str}))
        return self._clients[1]
