"""A scenario from whatever a Python user hands over: a file path, a dict or a ``Scenario``.

``FedGameModel(scenario=..., **kwargs)`` and ``fedgame.run`` accept Mesa-style keyword
parameters: any keyword other than the scenario is a dotted scenario key with ``.`` written
``__`` (``population__clients=20`` sets ``population.clients``), so ``mesa.batch_run`` grids and
SolaraViz inputs can drive a model. The result is validated exactly as ``fedgame run``
validates a file (same messages, ``ScenarioError``).

``mesa.batch_run(..., iterations=n)`` (Mesa 3.0-3.3) builds the model n times with the same
keywords and passes it no iteration number, and a fedgame run is fixed by its seed and
replicate: iteration k > 0 repeats iteration 0 exactly. A model built by iteration k > 0 of
Mesa's batch runner says so in a ``UserWarning`` (once per process); independent replicates
are ``"replicate": range(n)`` in the parameters, with ``iterations=1``.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedgame.errors import ScenarioError
from fedgame.scenario.load import apply_overrides, read_raw, validate
from fedgame.scenario.schema import Scenario

ScenarioLike = str | Path | Mapping[str, Any] | Scenario | None


def dotted(keyword: str) -> str:
    """``population__clients`` -> ``population.clients``."""
    return keyword.replace("__", ".")


def scenario_data(scenario: ScenarioLike = None, **keys: Any) -> tuple[dict[str, Any], str | None]:
    """The raw scenario mapping with the dotted-key overrides ``keys`` applied, and the file
    it came from (None for a mapping or a ``Scenario``); nothing is validated yet."""
    overrides = [(dotted(k), v) for k, v in keys.items() if v is not None]
    if isinstance(scenario, str | Path):
        path = Path(scenario)
        raw = read_raw(path)
        try:
            data = apply_overrides(raw, overrides)
        except ScenarioError as err:
            raise err.with_file(str(path)) from None
        data.setdefault("name", path.stem)
        return data, str(path)
    if isinstance(scenario, Scenario):
        data = scenario.model_dump(mode="json", exclude_unset=True)
    else:
        data = dict(scenario or {})
    return apply_overrides(data, overrides), None


def scenario_from(scenario: ScenarioLike = None, **keys: Any) -> Scenario:
    """Validate ``scenario`` with the dotted-key overrides ``keys``.

    Args:
        scenario: a scenario file path, a mapping (as a file would hold), a ``Scenario``
            (built in Python, defaults allowed) or None (every default).
        **keys: scenario keys with ``.`` written ``__``; a value of None is ignored (Mesa's
            parameter grids use it for "not set").

    Raises:
        ScenarioError: the same error ``fedgame validate`` gives (file, key, value, allowed;
            an unknown key names the nearest valid ones).
    """
    data, file = scenario_data(scenario, **keys)
    resolved = validate(data, file=file)
    if batch_iteration():
        warnings.warn(REPEATED_ITERATION, UserWarning, stacklevel=3)
    return resolved


#: what a model built by a later iteration of ``mesa.batch_run`` is told
REPEATED_ITERATION = (
    "mesa.batch_run's iterations repeat one run exactly: Mesa passes no iteration number to "
    "the model, and a fedgame run is fixed by its seed and replicate. For n independent "
    'replicates put "replicate": range(n) in the parameters and keep iterations=1.'
)


def batch_iteration(depth: int = 12) -> int | None:
    """The iteration of ``mesa.batch_run`` building the model being made (None outside it).

    Mesa's batch runner (3.0-3.3) keeps it in a local variable ``iteration`` of
    ``mesa.batchrunner._model_run_func``, the function that calls the model class; the
    calling frames (at most ``depth`` of them) are searched for that function.
    """
    frame = sys._getframe(1)
    for _ in range(depth):
        frame = frame.f_back  # type: ignore[assignment]
        if frame is None:
            return None
        code = frame.f_code
        if (
            code.co_name == "_model_run_func"
            and frame.f_globals.get("__name__") == "mesa.batchrunner"
        ):
            iteration = frame.f_locals.get("iteration")
            return iteration if isinstance(iteration, int) else None
    return None
