"""A finished run, replayed read-only: a Mesa model whose step shows the next recorded round.

The tables come from the run folder (``rounds.parquet``, ``clients.parquet``); nothing is
simulated and nothing is written. The topology is rebuilt from ``scenario.resolved.yaml`` with
the run's seed plan (the ``topology`` stream, as the run built it), so the network is the one
the run had; when it cannot be rebuilt (e.g. an edge file that is gone) the view shows the
clients without client-client links and says so.
"""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Any

import mesa
import networkx as nx
import numpy as np
import pandas as pd

import fedgame.registry as registry
from fedgame.analysis.load import load_run
from fedgame.errors import FedGameError
from fedgame.seeding import SeedPlan


class ReplayModel(mesa.Model):
    """Steps through the rounds of the run in ``run_dir`` (Reset starts again at round 0).

    Args:
        run_dir: a run folder (one with a ``manifest.json``), or a folder of runs (the newest).
    """

    def __init__(self, run_dir: str | Path = ".") -> None:
        super().__init__(seed=0)
        run = load_run(run_dir)
        self.run_dir = run.path
        self.manifest = run.manifest
        self.scenario = run.scenario
        self._rounds = run.rounds.sort_values("round", ignore_index=True)
        self._clients = run.clients
        self._notice = ""
        self.running = len(self._rounds) > 0

    def step(self) -> None:
        """Show the next recorded round; stop after the last one."""
        if self.steps >= len(self._rounds):
            self.running = False

    @property
    def title(self) -> str:
        return f"{self.manifest.get('scenario', 'run')} (replay of {self.run_dir.name})"

    @property
    def rounds_planned(self) -> int:
        return len(self._rounds)

    @property
    def settings(self) -> dict[str, Any]:
        return self.scenario

    @property
    def notice(self) -> str:
        status = self.manifest.get("status", "unknown")
        note = f"run {status}" if status != "completed" else ""
        return "; ".join(n for n in (note, self._notice) if n)

    @cached_property
    def graph(self) -> nx.Graph:
        """The run's topology, rebuilt from its resolved scenario and seed."""
        n = int(self.scenario.get("population", {}).get("clients", 0)) or int(
            self._clients["client_id"].max() + 1 if len(self._clients) else 0
        )
        spec = dict(self.scenario.get("network", {}).get("topology", {"kind": "star"}))
        kind = str(spec.pop("kind", "star"))
        plan = SeedPlan(int(self.manifest.get("seed", 0)), int(self.manifest.get("replicate", 0)))
        try:
            return registry.create("topology", kind, spec).build(n, rng=plan.rng("topology"))
        except (FedGameError, OSError, ValueError) as exc:
            self._notice = f"topology not rebuilt ({exc}); client-client links not shown"
            return nx.empty_graph(n)

    @cached_property
    def positions(self) -> dict[int, np.ndarray]:
        from fedgame.viz.network import layout

        return layout(self.graph)

    def history(self) -> pd.DataFrame:
        """The rounds recorded up to the current step."""
        return self._rounds[self._rounds["round"] <= self.steps]

    def current_clients(self) -> pd.DataFrame:
        """The clients table of the current step's round (empty at step 0)."""
        return self._clients[self._clients["round"] == self.steps].reset_index(drop=True)
