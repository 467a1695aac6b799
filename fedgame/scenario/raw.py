"""Checks on a scenario's raw mapping that no single schema field can make.

Run on the plain data (file contents with ``--set`` overrides or a grid point applied), before
and after the schema and the plug-ins' ``Config`` models have validated it:

* :func:`check_raw`: keys are text; nesting and size stay within the limits of
  :mod:`fedgame.scenario.safe_yaml` (so a mapping built in Python or by ``--set`` obeys them
  too); no number is NaN, and none is infinite except where infinity means "no bound"
  (:func:`infinity_allowed`). A walk over the raw data covers every plug-in's knobs at once.
* :func:`check_finite`: the same rule on the validated scenario, every plug-in's config
  included (a number written as text, ``"1e400"``, is only infinite once validated);
* :func:`check_no_bool_numbers`: ``true``/``false`` written where the validated scenario holds
  a number (pydantic reads ``clients: true`` as 1) is refused.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from fedgame.errors import ScenarioError
from fedgame.scenario.safe_yaml import MAX_DEPTH, MAX_NODES

#: distributions whose ``low``/``high`` may be infinite (a clip bound; infinity = no clip)
CLIPPED_DISTRIBUTIONS = ("normal", "lognormal")


def infinity_allowed(key: str, parent: Any) -> bool:
    """Where ``±inf`` means something: the clip bounds of a normal or lognormal distribution."""
    return (
        key in ("low", "high")
        and isinstance(parent, Mapping)
        and parent.get("dist") in CLIPPED_DISTRIBUTIONS
    )


def check_raw(data: Mapping[str, Any]) -> None:
    """Walk ``data`` once (iteratively); raise ``ScenarioError`` at the first bad entry."""
    # (dotted path, key, parent, value, depth)
    todo: list[tuple[str, str, Any, Any, int]] = [("", "", None, data, 0)]
    nodes = 0
    while todo:
        path, key, parent, value, depth = todo.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise ScenarioError("", ..., f"a scenario holds at most {MAX_NODES} values")
        if isinstance(value, Mapping | list | tuple):
            if depth >= MAX_DEPTH:
                raise ScenarioError(path, ..., f"nests deeper than {MAX_DEPTH} levels")
            if isinstance(value, Mapping):
                for k, v in value.items():
                    if not isinstance(k, str):
                        where = f"{path}.{k}" if path else str(k)
                        raise ScenarioError(where, k, "keys are names (text), not numbers")
                    todo.append((f"{path}.{k}" if path else k, k, value, v, depth + 1))
            else:
                todo += [(f"{path}[{i}]", "", value, v, depth + 1) for i, v in enumerate(value)]
        elif isinstance(value, float) and not math.isfinite(value):
            if math.isnan(value):
                raise ScenarioError(path, value, "a number, not NaN")
            if not infinity_allowed(key, parent):
                raise ScenarioError(path, value, "a finite number")


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def check_finite(validated: Mapping[str, Any]) -> None:
    """No NaN, and infinity only where :func:`infinity_allowed`, in the validated scenario.

    Catches what the raw walk cannot see: a value that only became non-finite when validated
    (``lr: "1e400"`` is text until pydantic reads it as ``inf``).
    """
    todo: list[tuple[str, str, Any, Any]] = [("", "", None, validated)]
    while todo:
        path, key, parent, value = todo.pop()
        if isinstance(value, Mapping):
            todo += [(_join(path, k), str(k), value, v) for k, v in value.items()]
        elif isinstance(value, list | tuple):
            todo += [(f"{path}[{i}]", "", value, v) for i, v in enumerate(value)]
        elif (
            isinstance(value, float)
            and not math.isfinite(value)
            and (math.isnan(value) or not infinity_allowed(key, parent))
        ):
            raise ScenarioError(path, value, "a finite number")


def check_no_bool_numbers(raw: Mapping[str, Any], validated: Mapping[str, Any]) -> None:
    """Refuse a raw ``true``/``false`` whose validated value (same dotted path) is not a bool.

    ``validated`` is the scenario as plain data with every plug-in's config resolved
    (:func:`fedgame.scenario.load.validated_tree`); paths it does not hold are skipped.
    """
    todo: list[tuple[str, Any, Any]] = [("", raw, validated)]
    while todo:
        path, value, seen = todo.pop()
        if isinstance(value, bool):
            if not isinstance(seen, bool):
                raise ScenarioError(path, value, "a number, not true/false")
        elif isinstance(value, Mapping) and isinstance(seen, Mapping):
            for k, v in value.items():
                if k in seen:
                    todo.append((f"{path}.{k}" if path else str(k), v, seen[k]))
        elif (
            isinstance(value, list | tuple)
            and isinstance(seen, list | tuple)
            and len(value) == len(seen)
        ):
            todo += [(f"{path}[{i}]", v, s) for i, (v, s) in enumerate(zip(value, seen))]
