"""Run one scenario end to end: build the model, step it, write the run folder."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from fedgame.errors import DivergenceError
from fedgame.run import store
from fedgame.scenario.load import dump_resolved
from fedgame.scenario.schema import COMPONENT_FAMILIES, Scenario


@dataclass
class RunResult:
    """Tables and metadata of one run (``run_dir`` is None when nothing was written)."""

    rounds: pd.DataFrame
    clients: pd.DataFrame
    manifest: dict[str, Any]
    run_dir: Path | None = None
    scenario: dict[str, Any] = field(default_factory=dict)

    @property
    def completed(self) -> bool:
        return self.manifest.get("status") == "completed"


def resolved_scenario(scenario: Scenario) -> dict[str, Any]:
    """The scenario with every default and every plug-in's defaults filled in."""
    data = yaml.safe_load(dump_resolved(scenario))
    for path in COMPONENT_FAMILIES:
        node = data
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        cfg = scenario.config(path).model_dump(mode="json")
        node[last] = {"kind": scenario.component(path).kind, **cfg}
    return data


def tables(model: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The model's DataCollector records as tidy frames (rounds, clients)."""
    dc = model.datacollector
    return dc.round_frame(), dc.client_frame()


def simulate(
    scenario: Scenario,
    *,
    out_dir: str | Path | None = None,
    replicate: int = 0,
    progress: bool = False,
    run_id: str | None = None,
) -> RunResult:
    """Run ``scenario`` for ``scenario.rounds`` rounds.

    When ``out_dir`` is given, results go to ``out_dir/<name>/<run-id>/``. A run whose loss
    turns non-finite stops, keeps the rounds done and is marked ``diverged`` in the manifest.
    """
    from fedgame.model import FedGameModel

    started = time.perf_counter()
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    model = FedGameModel(scenario, replicate=replicate)
    setup_s = time.perf_counter() - started
    status, message = "completed", ""
    bar = _progress_bar(scenario, enabled=progress)
    try:
        for _ in range(scenario.rounds):
            model.step()
            if bar is not None:
                bar.update(1)
                bar.set_postfix(
                    acc=f"{model.test_accuracy:.3f}",
                    eps=f"{model.epsilon_spent.mean():.2f}",
                    refresh=False,
                )
    except DivergenceError as exc:
        status, message = "diverged", str(exc)
    except KeyboardInterrupt:
        status, message = "interrupted", "stopped by the user"
    finally:
        if bar is not None:
            bar.close()
    rounds, clients = tables(model)
    manifest = {
        "scenario": scenario.name,
        "run_id": run_id,
        "seed": scenario.seed,
        "replicate": replicate,
        "status": status,
        "message": message,
        "rounds_planned": scenario.rounds,
        "rounds_completed": len(rounds),
        "created": created,
        "device": str(model.world.device),
        "dataset": model.world.dataset.name,
        "timings": {
            "setup_s": setup_s,
            "total_s": time.perf_counter() - started,
            "round_mean_s": float(rounds["wall_time_s"].mean()) if len(rounds) else None,
        },
        "versions": store.versions(),
        "git_sha": store.git_sha(),
        "final_test_accuracy": float(model.test_accuracy),
    }
    result = RunResult(rounds, clients, manifest, None, resolved_scenario(scenario))
    if out_dir is not None:
        result.run_dir = write_run(result, Path(out_dir), run_id=run_id)
    if status == "interrupted":
        raise KeyboardInterrupt
    return result


def write_run(result: RunResult, out_dir: Path, *, run_id: str | None = None) -> Path:
    """Write the run folder; the manifest goes last."""
    manifest = result.manifest
    run_id = run_id or store.new_run_id(manifest["seed"], manifest["replicate"])
    manifest["run_id"] = run_id
    run_dir = out_dir / manifest["scenario"] / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    store.atomic_write_parquet(run_dir / "rounds.parquet", result.rounds)
    store.atomic_write_parquet(run_dir / "clients.parquet", result.clients)
    store.atomic_write_text(
        run_dir / "scenario.resolved.yaml", yaml.safe_dump(result.scenario, sort_keys=False)
    )
    store.write_manifest(run_dir, manifest)
    return run_dir


def _progress_bar(scenario: Scenario, *, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=scenario.rounds, desc=scenario.name, unit="round")
