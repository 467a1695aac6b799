"""Run one scenario end to end: build the model, step it, write the run folder."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from fedgame.errors import BudgetExhausted, DivergenceError, Interrupted, PrivacyViolation
from fedgame.progress import setup_progress
from fedgame.run import store
from fedgame.run.devices import CUDA_ENV
from fedgame.run.interrupts import StopOnSignal, signal_of
from fedgame.scenario.effects import idle_keys
from fedgame.scenario.load import validated_tree
from fedgame.scenario.schema import Scenario

if TYPE_CHECKING:
    import pyarrow as pa

    from fedgame.run.threads import ThreadChoice


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
    return validated_tree(scenario, mode="json")


def tables(model: Any) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The model's DataCollector records as tidy frames (rounds, clients).

    Only complete rounds are kept: a run stopped by a signal in the middle of recording a
    round has that round's rows in some columns and not others, and they are dropped.
    """
    if hasattr(model, "frames"):  # a market of several servers (fedgame.market)
        return model.frames()
    dc = model.datacollector
    recorded = min((len(v) for v in dc.model_vars.values()), default=0) - 1  # step 0 aside
    complete = max(min(recorded, max(dc.blocks, default=0)), 0)
    return dc.round_frame(last_step=complete), dc.client_frame(last_step=complete)


def simulate(
    scenario: Scenario,
    *,
    out_dir: str | Path | None = None,
    replicate: int = 0,
    progress: bool = False,
    run_id: str | None = None,
    threads: ThreadChoice | None = None,
) -> RunResult:
    """Run ``scenario`` for ``scenario.rounds`` rounds.

    When ``out_dir`` is given, results go to ``out_dir/<name>/<run-id>/``. A run whose loss
    turns non-finite stops, keeps the rounds done and is marked ``diverged`` in the manifest.
    A run whose charges break a client's (ε, δ) (the model's own check,
    :mod:`fedgame.privacy.invariant`, whatever plug-in caused it) stops the same way, marked
    ``privacy_violation``, the clients named in the manifest's ``privacy_violation``; the
    tables keep the rounds before the violating one.
    Degenerate rounds (:mod:`fedgame.game.degeneracy`) are listed in the manifest's
    ``warnings`` (kind -> first round, rounds, message) and named at the end of the progress
    bar; with ``game.stop_on_degenerate`` the run stops after the first one, keeps it and is
    marked ``degenerate``.
    SIGINT (Ctrl-C) or SIGTERM stops it too: the finished rounds are written, the manifest
    says ``interrupted``, and :class:`~fedgame.errors.Interrupted` is raised afterwards with
    the result attached (``exc.result``). Signals that arrive while the folder is written
    wait until it is complete.
    ``threads`` (a lockstep batch of sweep runs, :mod:`fedgame.run.lockstep`): the threads the
    caller has set for this process, recorded as they are; default: the run chooses its own
    (:func:`~fedgame.run.threads.choose_threads`) and restores the caller's afterwards.
    """
    import fedgame.model  # noqa: F401  (mesa before torch: see fedgame.run.threads.using_threads)
    from fedgame.learning.device import device_name
    from fedgame.run.threads import choose_threads, using_threads

    started = time.perf_counter()
    created = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    if threads is not None:
        return _simulate(scenario, out_dir, replicate, progress, run_id, started, created, threads)
    threads = choose_threads(scenario, device=device_name(scenario.training.device))
    with using_threads(threads.threads):
        return _simulate(scenario, out_dir, replicate, progress, run_id, started, created, threads)


def _simulate(
    scenario: Scenario,
    out_dir: str | Path | None,
    replicate: int,
    progress: bool,
    run_id: str | None,
    started: float,
    created: str,
    threads: ThreadChoice,
) -> RunResult:
    from fedgame.market.model import MarketModel
    from fedgame.model import FedGameModel

    with StopOnSignal() as stop:
        with setup_progress(progress):  # a line on stderr once set-up passes 2 s
            model = (  # a signal here keeps nothing
                MarketModel(scenario, replicate=replicate)
                if scenario.servers
                else FedGameModel(scenario, replicate=replicate)
            )
        setup_s = time.perf_counter() - started
        status, message, signum = "completed", "", 0
        violation: dict[str, Any] | None = None
        bar = _progress_bar(scenario, enabled=progress)
        try:
            for _ in range(scenario.rounds):
                model.step()
                if bar is not None:  # the round just finished: postfix first, then draw
                    bar.set_postfix(
                        acc=f"{model.test_accuracy:.3f}",
                        eps=f"{model.epsilon_spent.mean():.2f}",
                        refresh=False,
                    )
                    bar.update(1)
                if model.monitor.stop_requested:
                    status = "degenerate"
                    message = f"stopped in round {model.steps}: {model.monitor.degenerate_reason}"
                    break
            stop.disarm()
        except DivergenceError as exc:
            stop.disarm()
            status, message = "diverged", str(exc)
        except (PrivacyViolation, BudgetExhausted) as exc:
            stop.disarm()
            status, message = "privacy_violation", str(exc)
            violation = exc.describe() if isinstance(exc, PrivacyViolation) else {"why": str(exc)}
        except KeyboardInterrupt as exc:
            stop.disarm()
            signum = signal_of(exc)
            status, message = "interrupted", Interrupted(signum).describe()
        finally:
            if bar is not None:
                if model.monitor.log.rounds:
                    bar.set_postfix_str(f"{model.monitor.log.rounds} degenerate rounds")
                bar.close()
        result = _result(model, scenario, status, message, replicate, run_id, created, started)
        release_agent_ids(model)
        result.manifest["timings"]["setup_s"] = setup_s
        result.manifest["threads"] = threads.manifest()
        if status == "interrupted":
            result.manifest["signal"] = signal.Signals(signum).name
        if violation is not None:
            result.manifest["privacy_violation"] = violation
        if out_dir is not None:
            result.run_dir = write_run(result, Path(out_dir), run_id=run_id)
    if status == "interrupted":
        raise Interrupted(signum, result)
    stop.raise_pending(result)
    return result


def release_agent_ids(model: Any) -> None:
    """Drop ``model`` from Mesa's class-level agent-id counters.

    Mesa 3 numbers agents with ``Agent._ids``, a ``defaultdict`` keyed by the model that is
    never emptied, so every finished model (its data, learner and tables) stays alive for as
    long as the process: a sweep run in one process grows by a model per run until it is
    killed for memory. The ids of the next model do not change (each model has its own key).
    """
    import mesa

    counters = mesa.Agent.__dict__.get("_ids")
    if isinstance(counters, dict):
        counters.pop(model, None)


def _result(
    model: Any,
    scenario: Scenario,
    status: str,
    message: str,
    replicate: int,
    run_id: str | None,
    created: str,
    started: float,
) -> RunResult:
    from fedgame.plugins import describe_modules
    from fedgame.scenario.output import clients_table_reason

    rounds, clients = tables(model)
    if status == "interrupted":
        message = f"{message} after {len(rounds)} of {scenario.rounds} rounds"
        final = float(rounds["test_accuracy"].iloc[-1]) if len(rounds) else float("nan")
    else:
        final = float(model.test_accuracy)
    manifest = {
        "scenario": scenario.name,
        "run_id": run_id,
        "seed": scenario.seed,
        "replicate": replicate,
        "status": status,
        "message": message,
        "rounds_planned": scenario.rounds,
        "rounds_completed": int(rounds["round"].nunique()) if "server" in rounds else len(rounds),
        "created": created,
        "device": str(model.world.device),
        "device_requested": scenario.training.device,
        # the GPUs this process was given (a sweep worker's own GPU); None: not restricted
        "cuda_visible_devices": os.environ.get(CUDA_ENV),
        "clients_table": model.datacollector.clients,
        "clients_table_rule": clients_table_reason(scenario),
        "dataset": model.world.dataset.name,
        "timings": {
            "setup_s": None,
            "total_s": time.perf_counter() - started,
            "round_mean_s": float(rounds["wall_time_s"].mean()) if len(rounds) else None,
        },
        "versions": store.versions(),
        "git_sha": store.git_sha(),
        "git_dirty": store.git_dirty(),
        "final_test_accuracy": final,
        "warnings": model.monitor.log.warnings(),
        "degenerate_rounds": model.monitor.log.rounds,
        # keys set to a non-default value that no chosen plug-in reads (fedgame.scenario.effects)
        "idle_keys": {k.key: k.message for k in idle_keys(scenario)},
        # every plug-in module loaded (entry points, the scenario's plugins): file and SHA-256
        "plugins": describe_modules(scenario.plugins),
    }
    return RunResult(rounds, clients, manifest, None, resolved_scenario(scenario))


def write_run(result: RunResult, out_dir: Path, *, run_id: str | None = None) -> Path:
    """Write the run folder ``out_dir/<name>/<run id>`` (real folders below ``out_dir``, no
    link followed: :func:`fedgame.run.store.make_folders`); the manifest goes last."""
    manifest = result.manifest
    run_id = run_id or store.new_run_id(manifest["seed"], manifest["replicate"])
    manifest["run_id"] = run_id
    run_dir = store.make_folders(out_dir, manifest["scenario"], run_id)
    rounds, clients = run_tables(result)
    store.write_run_files(
        run_dir,
        rounds=rounds,
        clients=clients,
        scenario=result.scenario,
        manifest=manifest,
    )
    return run_dir


def run_tables(result: RunResult) -> tuple[pa.Table, pa.Table]:
    """The run's ``rounds`` and ``clients`` tables as Arrow tables carrying their column
    dictionary (:mod:`fedgame.columns`; writers named from the run's plug-ins)."""
    from fedgame.columns import arrow_table, plugins_of

    plugins = plugins_of(result.scenario)
    return (
        arrow_table(result.rounds, "rounds", plugins=plugins),
        arrow_table(result.clients, "clients", plugins=plugins),
    )


def _progress_bar(scenario: Scenario, *, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=scenario.rounds, desc=scenario.name, unit="round")
