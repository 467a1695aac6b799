"""A finished run, replayed read-only: a Mesa model whose step shows the next recorded round.

The replay opens at the first recorded round (round 1) and :meth:`ReplayModel.jump` shows any
recorded round (the page's round slider). Given a sweep folder, the page lists the sweep's runs
(:func:`sweep_runs`) and opens the one chosen. The tables come from the run folder
(``rounds.parquet``, ``clients.parquet``); nothing is
simulated and nothing is written. The topology is rebuilt from ``scenario.resolved.yaml`` with
the run's seed plan (the ``topology`` stream, as the run built it), so the network is the one
the run had; when it cannot be rebuilt (e.g. an edge file that is gone) the view shows the
clients without client-client links and says so.
"""

from __future__ import annotations

import os
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


class RunChoice(os.PathLike[str]):
    """The run folder a replay shows, changed when the page opens another run of a sweep (so
    that Reset, which re-creates the model from fixed parameters, reopens the run chosen)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"RunChoice({str(self.path)!r})"


class ReplayModel(mesa.Model):
    """Steps through the rounds of the run in ``run_dir`` (Reset starts again at round 1).

    Args:
        run_dir: a run folder (one with a ``manifest.json``), or a folder of runs (the newest).
    """

    def __init__(self, run_dir: str | os.PathLike[str] = ".") -> None:
        super().__init__(seed=0)
        run = load_run(Path(run_dir))
        self.run_dir = run.path
        self.manifest = run.manifest
        self.scenario = run.scenario
        self._rounds = run.rounds.sort_values("round", ignore_index=True)
        self._clients = run.clients
        self._notice = ""
        self.step_seconds = 0.0  # nothing is simulated
        self.jump(min(1, self.last_round))

    @property
    def last_round(self) -> int:
        """The last recorded round (0 for a run with none)."""
        return int(self._rounds["round"].max()) if len(self._rounds) else 0

    def step(self) -> None:
        """Show the next recorded round (Mesa has counted the step); stop at the last one."""
        self.steps: int = min(self.steps, self.last_round)
        self.running = self.steps < self.last_round

    def jump(self, round_: int) -> None:
        """Show recorded round ``round_`` (clipped to 0..last round)."""
        self.steps = max(0, min(int(round_), self.last_round))
        self.running = self.steps < self.last_round

    @property
    def title(self) -> str:
        return f"{self.manifest.get('scenario', 'run')} (replay of {self.run_dir.name})"

    @property
    def rounds_planned(self) -> int:
        return self.last_round

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


def sweep_runs(path: str | Path) -> dict[str, Path]:
    """The runs of the sweep at or above ``path`` (a sweep folder or one of its runs), labelled
    by their swept settings (``straggle_prob=0.1 · replicate=1``), in run-id order; empty when
    ``path`` is in no sweep."""
    import json

    from fedgame.analysis.load import find_runs, sweep_of

    here = Path(path).resolve()
    sweep = here if (here / "sweep.json").is_file() else sweep_of(here)
    if sweep is None:
        return {}
    out: dict[str, Path] = {}
    for run in sorted(find_runs(sweep / "runs"), key=lambda p: p.name):
        try:
            manifest = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        swept = manifest.get("sweep") or {}
        parts = [f"{str(k).rsplit('.', 1)[-1]}={v}" for k, v in swept.get("point", {}).items()]
        parts.append(f"replicate={swept.get('replicate', manifest.get('replicate', 0))}")
        out[f"{run.name}: {' · '.join(parts)}"] = run
    return out
