"""A scenario from whatever a Python user hands over: a file path, a dict or a ``Scenario``.

``FedGameModel(scenario=..., **kwargs)`` and ``fedgame.run`` accept Mesa-style keyword
parameters: any keyword other than the scenario is a dotted scenario key with ``.`` written
``__`` (``population__clients=20`` sets ``population.clients``), so ``mesa.batch_run`` grids and
SolaraViz inputs can drive a model. The result is validated exactly as ``fedgame run``
validates a file (same messages, ``ScenarioError``).
"""

from __future__ import annotations

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
    return validate(data, file=file)
