"""Read scenario files (YAML or TOML by extension), apply ``--set`` overrides, validate.

Every problem becomes one ``ScenarioError`` naming the file, the dotted key, the bad value and
what is allowed. YAML is read with ``yaml.safe_load`` only.
"""

from __future__ import annotations

import copy
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from fedgame import registry
from fedgame.errors import ScenarioError
from fedgame.scenario import behaviours
from fedgame.scenario.schema import COMPONENT_FAMILIES, Scenario

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}


def read_raw(path: str | Path) -> dict[str, Any]:
    """Parse a scenario file into a plain dict (no validation)."""
    path = Path(path)
    fmt = SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise ScenarioError(
            "", path.suffix, "scenario files end in .yaml, .yml or .toml"
        ).with_file(str(path))
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(
            "", ..., f"cannot be read: {exc.strerror or exc}", file=str(path)
        ) from None
    try:
        data = tomllib.loads(text) if fmt == "toml" else yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(
            "", ..., f"YAML syntax error{where}: {problem}", file=str(path)
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError("", ..., f"TOML syntax error: {exc}", file=str(path)) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ScenarioError(
            "", type(data).__name__, "a scenario is a mapping of keys", file=str(path)
        )
    return data


def parse_override(text: str) -> tuple[str, Any]:
    """``"a.b=v"`` -> ``("a.b", v)`` with ``v`` parsed as a YAML scalar/list/mapping."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError("--set", text, "overrides are written KEY=VALUE, e.g. privacy.clip=2.0")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    return key, value


def apply_overrides(data: dict[str, Any], overrides: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Return a copy of ``data`` with each dotted key set (missing parents are created)."""
    out = copy.deepcopy(data)
    for key, value in overrides:
        node = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            child = node.get(part)
            if isinstance(child, str) and _is_component_path(".".join(parts[: i + 1])):
                child = {"kind": child}
            if not isinstance(child, dict):
                child = {}
            node[part] = child
            node = child
        node[parts[-1]] = value
    return out


def _is_component_path(path: str) -> bool:
    return path in COMPONENT_FAMILIES


def validate(data: Mapping[str, Any], *, file: str | None = None) -> Scenario:
    """Validate a raw dict into a ``Scenario`` with every plug-in config resolved."""
    try:
        try:
            scenario = Scenario.model_validate(dict(data))
        except ValidationError as exc:
            raise registry.scenario_error_from_pydantic(exc, model=Scenario) from None
        resolve_components(scenario)
        scenario._behaviours = behaviours.resolve(scenario)
        check_cross_fields(scenario)
    except ScenarioError as err:
        raise (err.with_file(file) if file else err) from None
    return scenario


def resolve_components(scenario: Scenario) -> None:
    """Validate each component's params against its plug-in's ``Config``."""
    configs = {}
    for path, family in COMPONENT_FAMILIES.items():
        comp = scenario.component(path)
        configs[path] = registry.validate(family, {"kind": comp.kind, **comp.params}, key=path)
    scenario._configs = configs


def check_cross_fields(scenario: Scenario) -> None:
    """Checks that need several sections; plug-ins add theirs via ``check_scenario``."""
    pop = scenario.population
    if pop.colluders >= pop.clients:
        raise ScenarioError(
            "population.colluders", pop.colluders, f"must be < population.clients ({pop.clients})"
        )
    _check_range(pop.privacy_value, "population.privacy_value", low=0.0, low_open=True)
    _check_range(pop.budget.epsilon, "population.budget.epsilon", low=0.0, low_open=True)
    _check_range(pop.budget.delta, "population.budget.delta", low=0.0, high=1.0, open_=True)
    _check_range(pop.straggle_prob, "population.straggle_prob", low=0.0, high=1.0)
    for path, family in COMPONENT_FAMILIES.items():
        cls = registry.entry(family, scenario.component(path).kind).cls
        check = getattr(cls, "check_scenario", None)
        if check is not None:
            check(scenario.config(path), scenario, key=path)


def _check_range(
    dist: Any,
    key: str,
    *,
    low: float = float("-inf"),
    high: float = float("inf"),
    low_open: bool = False,
    open_: bool = False,
) -> None:
    lo, hi = dist.support()
    bad_low = lo <= low if (low_open or open_) else lo < low
    bad_high = hi >= high if open_ else hi > high
    if bad_low or bad_high:
        left = "(" if (low_open or open_) else "["
        right = ")" if open_ else "]"
        raise ScenarioError(
            key,
            dist.model_dump(exclude_defaults=True),
            f"values must lie in {left}{low}, {high}{right}; "
            f"this distribution reaches [{lo}, {hi}]",
        )


def load_scenario(path: str | Path, overrides: Iterable[str] = ()) -> Scenario:
    """Read, override and validate a scenario file. Raises ``ScenarioError``."""
    path = Path(path)
    raw = read_raw(path)
    try:
        parsed = [parse_override(o) for o in overrides]
    except ScenarioError as err:
        raise err.with_file(str(path)) from None
    data = apply_overrides(raw, parsed)
    data.setdefault("name", path.stem)
    return validate(data, file=str(path))


def dump_resolved(scenario: Scenario) -> str:
    """The scenario with every default filled in, as YAML."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
