"""Load a sweep folder into tidy frames: rounds (x run), clients (x run) and runs.

``load_sweep(path)`` accepts a sweep folder (``<out>/<name>/sweep-<id>``), its
``sweep.parquet``, or a scenario's results folder holding sweeps (the newest is taken).
Swept keys appear as columns named by their dotted key (``population.clients``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from fedgame.analysis.totals import round_total
from fedgame.errors import FedGameError

#: run statuses that count as finished (a resumed sweep skips them)
FINISHED = ("completed", "diverged", "degenerate")
ID_COLUMNS = ("replicate", "run_id", "status")


def _manifest(run_dir: Path) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _cell(value: Any) -> Any:
    """Grid values as table cells: scalars stay, lists and mappings become JSON text."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return json.dumps(value, sort_keys=True)


def _key_frame(runs: Sequence[dict[str, Any]], keys: Sequence[str]) -> pd.DataFrame:
    frame = pd.DataFrame(
        [{**{k: _cell(r["point"].get(k)) for k in keys}, "run_id": r["run_id"]} for r in runs],
        columns=[*keys, "run_id"],
    )
    for key in keys:
        kinds = {type(v) for v in frame[key] if v is not None}
        if kinds and not (kinds <= {int, float} or kinds == {bool}):
            frame[key] = frame[key].map(lambda v: v if v is None else str(v))
    return frame


def _run_keys(runs: Sequence[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(k for r in runs for k in r["point"]))


def _resolved(run_dir: Path) -> dict[str, Any] | None:
    try:
        scenario = yaml.safe_load((run_dir / "scenario.resolved.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return None
    return scenario if isinstance(scenario, dict) else None


def _num_clients(run_dir: Path) -> int | None:
    try:
        return int((_resolved(run_dir) or {})["population"]["clients"])
    except (KeyError, TypeError, ValueError):
        return None


def _stack(sweep_dir: Path, runs: Sequence[dict[str, Any]], table: str) -> pd.DataFrame:
    keys = _run_keys(runs)
    key_frame = _key_frame(runs, keys).set_index("run_id")
    parts = []
    for run in runs:
        run_dir = sweep_dir / "runs" / run["run_id"]
        manifest = _manifest(run_dir)
        if manifest is None or manifest.get("status") not in FINISHED:
            continue
        part = pd.read_parquet(run_dir / f"{table}.parquet")
        head = {k: key_frame.at[run["run_id"], k] for k in keys}
        head.update(replicate=run["replicate"], run_id=run["run_id"], status=manifest["status"])
        if table == "rounds":
            head["num_clients"] = _num_clients(run_dir)
        for i, (col, value) in enumerate(head.items()):
            part.insert(i, col, value)
        parts.append(part)
    if not parts:
        return pd.DataFrame(columns=[*keys, *ID_COLUMNS])
    frame = pd.concat(parts, ignore_index=True)
    for key in keys:
        if key_frame[key].dtype != object:
            frame[key] = frame[key].astype(key_frame[key].dtype)
    return frame


def build_sweep_frame(sweep_dir: str | Path, runs: Sequence[dict[str, Any]]) -> pd.DataFrame:
    """One row per finished run x round: keys, replicate, run_id, status, num_clients, rounds."""
    return _stack(Path(sweep_dir), runs, "rounds")


@dataclass
class Sweep:
    """A loaded sweep: ``rounds`` (sweep.parquet), lazy ``clients`` and ``runs`` frames."""

    path: Path
    info: dict[str, Any]

    @property
    def keys(self) -> list[str]:
        """The swept dotted keys, in grid order."""
        return list(self.info.get("grid", {}))

    @property
    def plan_runs(self) -> list[dict[str, Any]]:
        return list(self.info.get("runs", []))

    @cached_property
    def rounds(self) -> pd.DataFrame:
        """One row per finished run x round (``sweep.parquet``, rebuilt if it is missing)."""
        file = self.path / "sweep.parquet"
        if file.is_file():
            return pd.read_parquet(file)
        return build_sweep_frame(self.path, self.plan_runs)

    @cached_property
    def clients(self) -> pd.DataFrame:
        """One row per finished run x round x client, with the swept keys."""
        return _stack(self.path, self.plan_runs, "clients")

    @cached_property
    def scenarios(self) -> dict[str, dict[str, Any]]:
        """The resolved scenario of each run that has one (``scenario.resolved.yaml``)."""
        out = {}
        for run in self.plan_runs:
            scenario = _resolved(self.path / "runs" / run["run_id"])
            if scenario is not None:
                out[run["run_id"]] = scenario
        return out

    @cached_property
    def runs(self) -> pd.DataFrame:
        """One row per planned run: keys, replicate, status, message and final metrics."""
        rows = []
        for run in self.plan_runs:
            manifest = _manifest(self.path / "runs" / run["run_id"]) or {}
            rows.append(
                {
                    "run_id": run["run_id"],
                    "replicate": run["replicate"],
                    "status": manifest.get("status", "missing"),
                    "message": manifest.get("message", ""),
                    "rounds_completed": manifest.get("rounds_completed", 0),
                    "seconds": manifest.get("sweep", {}).get("seconds"),
                }
            )
        frame = _key_frame(self.plan_runs, self.keys).merge(pd.DataFrame(rows), on="run_id")
        finals = final_metrics(self.rounds)
        return frame.merge(finals, on="run_id", how="left")


def final_metrics(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per run: final accuracy and ε, total reward, mean participation (columns if present)."""
    if rounds.empty:
        return pd.DataFrame(columns=["run_id"])
    g = rounds.sort_values("round").groupby("run_id", sort=False)
    out = pd.DataFrame({"final_accuracy": g["test_accuracy"].last()})
    if "epsilon_spent_mean" in rounds:
        out["final_epsilon_mean"] = g["epsilon_spent_mean"].last()
    if "reward_total" in rounds:
        out["total_reward"] = g["reward_total"].agg(lambda x: round_total(x).value)
    if "participants" in rounds and "num_clients" in rounds:
        rate = rounds["participants"] / rounds["num_clients"]
        out["participation_rate"] = rate.groupby(rounds["run_id"]).mean()
    return out.reset_index()


def find_sweep(path: str | Path) -> Path:
    """The sweep folder at ``path`` (a folder, its sweep.parquet, or a parent of sweeps)."""
    p = Path(path)
    if p.is_file() and p.name in ("sweep.parquet", "sweep.json"):
        return p.parent
    if (p / "sweep.json").is_file():
        return p
    found = sorted(p.glob("**/sweep.json"), key=lambda f: f.stat().st_mtime) if p.is_dir() else []
    if not found:
        raise FedGameError(f"{path}: no sweep folder (one with a sweep.json) found there")
    return found[-1].parent


def load_sweep(path: str | Path) -> Sweep:
    """Load a sweep folder; see the module docstring for what ``path`` may be."""
    sweep_dir = find_sweep(path)
    info = json.loads((sweep_dir / "sweep.json").read_text(encoding="utf-8"))
    return Sweep(sweep_dir, info)
