"""Load run folders into tidy pandas frames."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from fedgame.errors import FedGameError


@dataclass
class Run:
    """One run: ``rounds`` (one row per round), ``clients`` (one row per round x client)."""

    path: Path
    rounds: pd.DataFrame
    clients: pd.DataFrame
    manifest: dict[str, Any]
    scenario: dict[str, Any] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return str(self.manifest.get("status", "unknown"))


def find_runs(path: str | Path) -> list[Path]:
    """Every run folder (one holding a ``manifest.json``) at or under ``path``, oldest first.

    Runs are ordered by when their manifest (written last) was written.
    """
    root = Path(path)
    if (root / "manifest.json").is_file():
        return [root]
    manifests = sorted(root.rglob("manifest.json"), key=lambda p: (p.stat().st_mtime_ns, str(p)))
    return [p.parent for p in manifests]


def sweep_of(run_dir: Path) -> Path | None:
    """The sweep folder a run belongs to (``<sweep>/runs/<run-id>``), or None."""
    parent = run_dir.parent
    if parent.name == "runs" and (parent.parent / "sweep.json").is_file():
        return parent.parent
    return None


def single_runs(path: str | Path) -> list[Path]:
    """``find_runs`` without the runs of sweeps found below ``path`` (oldest first).

    Asked about a sweep folder (or a folder inside one), its runs are kept.
    """
    root = Path(path).resolve()
    kept = []
    for run in find_runs(path):
        sweep = sweep_of(run.resolve())
        if sweep is None or root == sweep or sweep in root.parents:
            kept.append(run)
    return kept


def load_run(path: str | Path) -> Run:
    """Load a run folder; given a folder of runs (e.g. ``results/quickstart``), the newest single
    run there (``fedgame run``), not one of a sweep's runs (use ``load_sweep`` for those)."""
    runs = single_runs(path)
    if not runs:
        raise FedGameError(
            f"{path}: no single run folder (one with a manifest.json, outside a sweep) found there"
        )
    run_dir = runs[-1]
    manifest = json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    scenario_file = run_dir / "scenario.resolved.yaml"
    scenario = yaml.safe_load(scenario_file.read_text()) if scenario_file.is_file() else {}
    return Run(
        path=run_dir,
        rounds=pd.read_parquet(run_dir / "rounds.parquet"),
        clients=pd.read_parquet(run_dir / "clients.parquet"),
        manifest=manifest,
        scenario=scenario,
    )
