"""fedgame from Python: load, run and sweep scenarios as the command line does.

``load_scenario``, ``run`` and ``sweep`` take a scenario as a file path, a mapping (what a
file would hold) or a :class:`~fedgame.scenario.schema.Scenario`, plus any scenario key as a
keyword with ``.`` written ``__`` (``population__clients=20``), and validate it exactly as
``fedgame validate`` does: bad input raises :class:`~fedgame.errors.ScenarioError` with the
CLI's message (an unknown key names the nearest valid ones).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedgame.errors import ScenarioError
from fedgame.scenario.coerce import ScenarioLike, scenario_data, scenario_from

if TYPE_CHECKING:
    from fedgame.analysis.sweep import Sweep
    from fedgame.run.single import RunResult
    from fedgame.scenario.schema import Scenario

__all__ = ["load_scenario", "run", "sweep"]


def load_scenario(scenario: ScenarioLike = None, **keys: Any) -> Scenario:
    """A validated ``Scenario`` from a path, a mapping or a ``Scenario``, with overrides.

    >>> load_scenario("scenarios/quickstart.yaml", selection__k=5).selection.params
    {'k': 5}
    """
    return scenario_from(scenario, **keys)


def run(
    scenario: ScenarioLike = None,
    *,
    out: str | Path | None = None,
    seed: int | None = None,
    replicate: int = 0,
    progress: bool = False,
    **keys: Any,
) -> RunResult:
    """Run a scenario as ``fedgame run`` does and return its tables.

    The checks ``fedgame run`` makes come first (data, device, memory, and the results
    folder when ``out`` is given). With ``out``, the run folder is written to
    ``out/<name>/<run-id>/`` (``RunResult.run_dir``); without it nothing is written.

    Returns:
        A ``RunResult``: ``rounds`` and ``clients`` DataFrames, the ``manifest`` (``status``
        is ``completed`` or ``diverged``) and the resolved ``scenario``.

    Raises:
        ScenarioError: bad input, nothing run.
        Interrupted: SIGINT/SIGTERM stopped the run (``exc.result`` holds what it kept).
    """
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate
    from fedgame.scenario.preflight import preflight

    if seed is not None:
        keys["seed"] = seed
    if isinstance(replicate, bool) or not isinstance(replicate, int) or replicate < 0:
        raise ScenarioError("replicate", replicate, "an integer >= 0")
    data, file = scenario_data(scenario, **keys)
    resolved = validate(data, file=file)
    for line in preflight(resolved, out=out, out_key="out", file=file).warnings(file):
        warnings.warn(line, UserWarning, stacklevel=2)
    return simulate(
        resolved,
        out_dir=None if out is None else Path(out),
        replicate=replicate,
        progress=progress,
    )


def sweep(
    scenario: ScenarioLike = None,
    *,
    grid: dict[str, list[Any]] | None = None,
    replicates: int | None = None,
    out: str | Path | None = None,
    executor: str = "local",
    workers: int | None = None,
    address: str | None = None,
    progress: bool = False,
    **keys: Any,
) -> Sweep:
    """Run a sweep as ``fedgame sweep`` does and return it loaded.

    ``grid`` ({dotted key: values}) adds to or replaces the scenario's ``sweep.grid``;
    ``replicates`` overrides ``sweep.replicates``. Every run is validated before any runs;
    results go to ``<out or output.dir>/<name>/sweep-<id>/`` (the folder the same command
    line would use, so either resumes the other). ``executor`` is ``local`` (a process pool of
    ``workers``), ``batched`` (the same pool, each worker stepping a batch of runs in lockstep
    and training their clients in one batched computation: :mod:`fedgame.run.batched`),
    ``serial`` or ``ray``. Runs that failed are listed in a warning and in
    ``Sweep.runs["status"]``.

    Returns:
        ``fedgame.analysis.Sweep``: ``path`` (the sweep folder), ``rounds``, ``clients`` and
        ``runs`` DataFrames.
    """
    from fedgame.analysis.sweep import load_sweep
    from fedgame.run.grid import plan_from_data
    from fedgame.run.sweep import run_sweep

    data, file = scenario_data(scenario, **keys)
    plan = plan_from_data(data, grid=grid, replicates=replicates, out=out, file=file)
    for line in plan.idle:
        warnings.warn(line, UserWarning, stacklevel=2)
    summary = run_sweep(
        plan, executor=executor, workers=workers, address=address, progress=progress
    )
    if summary.failed:
        listed = "; ".join(f"{run_id}: {error}" for run_id, error in summary.failed.items())
        warnings.warn(
            f"{len(summary.failed)} of {summary.total} runs failed ({listed})", stacklevel=2
        )
    return load_sweep(summary.sweep_dir)
