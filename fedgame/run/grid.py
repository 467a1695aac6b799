"""Sweep plans: a base scenario x a grid over dotted keys x replicates, validated up front.

Every grid point is applied to the base scenario with the same machinery as ``--set`` and
validated, preflight checks included (:mod:`fedgame.scenario.preflight`: data files, device,
memory), before anything runs, so a bad key or value stops the sweep with one
``ScenarioError``. A sweep holds at most :data:`MAX_RUNS` runs (grid points x replicates).
Run ids are deterministic: ``<hash of the run's resolved scenario>-r<replicate>``, and the
sweep folder is
``<out>/<name>/sweep-<hash of base scenario and grid>/``; rerunning the same command
therefore finds the runs it already finished. Replicate ``r`` runs with ``SeedPlan(seed, r)``
at every grid point (common random numbers).
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedgame.errors import ScenarioError
from fedgame.run.single import resolved_scenario
from fedgame.scenario.effects import idle_in_sweep
from fedgame.scenario.load import (
    OVERRIDE_KEY,
    apply_overrides,
    parse_override,
    read_raw,
    validate,
)
from fedgame.scenario.preflight import preflight
from fedgame.scenario.safe_yaml import load_yaml
from fedgame.scenario.schema import Scenario

#: top-level keys a grid may not sweep: they name or place the results, or are the sweep itself
UNSWEEPABLE = ("name", "output", "sweep")
#: most runs (grid points x replicates) in one sweep
MAX_RUNS = 10_000


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: a grid point (dotted key -> value) and a replicate."""

    run_id: str
    point: dict[str, Any]
    replicate: int
    data: dict[str, Any]


@dataclass(frozen=True)
class SweepPlan:
    """A validated sweep: every run it consists of and the folder its results go to."""

    name: str
    sweep_id: str
    grid: dict[str, list[Any]]
    replicates: int
    runs: tuple[SweepRun, ...]
    out: Path
    #: largest memory estimate of one run (bytes), for the executor's concurrency check
    memory_per_run: int = 0
    #: the key that set ``out`` (``--out`` or ``output.dir``), for error messages
    out_key: str = "output.dir"
    #: ``sweep.gpus_per_run`` (Ray) and ``sweep.workers_per_gpu`` (local pool)
    gpus_per_run: float = 1.0
    workers_per_gpu: int = 1
    #: ``sweep.batch_runs`` (the batched executor's cap on the runs of a batch)
    batch_runs: int = 16
    #: warnings about keys without effect on any run (``effects.idle_in_sweep``)
    idle: tuple[str, ...] = ()

    @property
    def sweep_dir(self) -> Path:
        return self.out / self.name / f"sweep-{self.sweep_id}"

    def run_dir(self, run: SweepRun) -> Path:
        return self.sweep_dir / "runs" / run.run_id

    def describe(self) -> dict[str, Any]:
        """A JSON-ready description (written to ``sweep.json``)."""
        return {
            "name": self.name,
            "sweep_id": self.sweep_id,
            "grid": self.grid,
            "replicates": self.replicates,
            "runs": [
                {"run_id": r.run_id, "replicate": r.replicate, "point": r.point} for r in self.runs
            ],
        }


def short_hash(value: Any, *, length: int = 8) -> str:
    """A stable hex digest of a JSON-serialisable value (keys sorted)."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def parse_grid_arg(text: str) -> tuple[str, list[Any]]:
    """``"a.b=1,2,3"`` (or ``"a.b=[1, 2, 3]"``) -> ``("a.b", [1, 2, 3])``."""
    try:
        key, raw = parse_override(text)
    except ScenarioError as err:
        raise ScenarioError("--grid", err.value, err.allowed.replace("--set", "--grid")) from None
    if isinstance(raw, list):
        return key, raw
    if raw == "" or raw is None:
        return key, []
    _, _, text_values = text.partition("=")
    return key, [_grid_value(part) for part in text_values.split(",") if part.strip()]


def _grid_value(text: str) -> Any:
    try:
        return load_yaml(text)
    except ScenarioError as err:
        if "YAML syntax error" not in err.allowed:
            raise ScenarioError("--grid", ..., err.allowed) from None
        return text.strip()


def merge_grid(
    file_grid: Mapping[str, Any], cli_grid: Iterable[tuple[str, list[Any]]]
) -> dict[str, list[Any]]:
    """The file's ``sweep.grid`` updated by ``--grid`` entries (the command line wins)."""
    grid = dict(file_grid)
    grid.update(dict(cli_grid))
    return grid


def check_grid(grid: Mapping[str, Any]) -> dict[str, list[Any]]:
    """Reject unsweepable keys and empty or non-list value lists."""
    out: dict[str, list[Any]] = {}
    for key, values in grid.items():
        where = f"sweep.grid.{key}"
        if (
            not isinstance(key, str)
            or not OVERRIDE_KEY.fullmatch(key)
            or key.split(".")[0] in UNSWEEPABLE
        ):
            raise ScenarioError(
                where, key, f"a dotted scenario key outside {', '.join(UNSWEEPABLE)}"
            )
        if not isinstance(values, list):
            raise ScenarioError(where, values, "a list of values, e.g. [20, 50, 100]")
        if not values:
            raise ScenarioError(where, values, "a non-empty list of values")
        out[key] = list(values)
    return out


def check_size(grid: Mapping[str, list[Any]], replicates: int) -> None:
    """Refuse a sweep of more than :data:`MAX_RUNS` runs (before expanding the grid)."""
    total = replicates
    for values in grid.values():
        total *= len(values)
    if total > MAX_RUNS:
        sizes = " x ".join(str(len(v)) for v in grid.values())
        raise ScenarioError(
            "sweep.grid",
            f"{sizes} points x {replicates} replicates = {total} runs",
            f"at most {MAX_RUNS} runs per sweep",
        )


def expand(grid: Mapping[str, list[Any]]) -> list[dict[str, Any]]:
    """Every grid point (the Cartesian product, first key slowest); ``[{}]`` for no grid."""
    keys = list(grid)
    return [dict(zip(keys, combo)) for combo in itertools.product(*(grid[k] for k in keys))]


def plan_sweep(
    file: str | Path,
    *,
    overrides: Iterable[str] = (),
    grid: Iterable[str] = (),
    replicates: int | None = None,
    out: str | Path | None = None,
) -> SweepPlan:
    """Read a scenario file and validate every run of its sweep. Raises ``ScenarioError``."""
    path = Path(file)
    raw = read_raw(path)
    try:
        data = apply_overrides(raw, [parse_override(o) for o in overrides])
        data.setdefault("name", path.stem)
        cli_grid = dict(parse_grid_arg(g) for g in grid)
    except ScenarioError as err:
        raise err.with_file(str(path)) from None
    return plan_from_data(data, grid=cli_grid, replicates=replicates, out=out, file=str(path))


def plan_from_data(
    data: dict[str, Any],
    *,
    grid: Mapping[str, Any] | None = None,
    replicates: int | None = None,
    out: str | Path | None = None,
    file: str | None = None,
) -> SweepPlan:
    """Validate every run of the sweep of scenario ``data`` (a raw mapping, overrides applied).

    ``grid`` (dotted key -> values) adds to or replaces the scenario's ``sweep.grid``; ``file``
    names the scenario file in errors. Raises ``ScenarioError``.
    """
    try:
        base = validate(data, file=file)
        full_grid = check_grid(merge_grid(base.sweep.grid, (grid or {}).items()))
        reps = base.sweep.replicates if replicates is None else replicates
        if not isinstance(reps, int) or isinstance(reps, bool) or reps < 1:
            raise ScenarioError("--replicates", reps, "a positive integer")
        check_size(full_grid, reps)
        points = expand(full_grid)
        checked = [_validate_point(data, point, file=file) for point in points]
        memory = max(m for m, _, _ in checked)
        idle = idle_in_sweep(list(full_grid), [scenario for _, _, scenario in checked])
    except ScenarioError as err:
        raise (err.with_file(file) if file else err) from None
    identity = base.model_dump(mode="json", exclude={"sweep", "output"})
    sweep_id = short_hash({"base": identity, "grid": full_grid}, length=10)
    runs = tuple(
        SweepRun(
            run_id=f"{short_hash(resolved)}-r{rep}",
            point=point,
            replicate=rep,
            data=apply_overrides(data, point.items()),
        )
        for point, (_, resolved, _) in zip(points, checked)
        for rep in range(reps)
    )
    out_dir = Path(out) if out is not None else Path(base.output.dir)
    out_key = "--out" if out is not None else "output.dir"
    return SweepPlan(
        base.name,
        sweep_id,
        full_grid,
        reps,
        runs,
        out_dir,
        memory,
        out_key,
        gpus_per_run=base.sweep.gpus_per_run,
        workers_per_gpu=base.sweep.workers_per_gpu,
        batch_runs=base.sweep.batch_runs,
        idle=tuple(f"{file}: {line}" if file else line for line in idle),
    )


def _validate_point(
    data: dict[str, Any], point: dict[str, Any], *, file: str | None = None
) -> tuple[int, dict[str, Any], Scenario]:
    """Validate and preflight one grid point: its memory estimate (bytes), its identity and
    its scenario.

    The identity is the whole resolved scenario of the run (every default and plug-in
    parameter filled in; ``sweep`` and ``output`` aside), so two sweeps that differ anywhere,
    e.g. by a ``--set``, give their runs different ids.
    """
    try:
        scenario = validate(apply_overrides(data, point.items()), file=file)
        memory = preflight(scenario).footprint.total
        resolved = resolved_scenario(scenario)
        resolved.pop("sweep", None)
        resolved.pop("output", None)
        return memory, resolved, scenario
    except ScenarioError as err:
        where = ", ".join(f"{k}={v!r}" for k, v in point.items())
        raise ScenarioError(
            err.key, err.value, f"{err.allowed} (in sweep grid point {where})", file=err.file
        ) from None
