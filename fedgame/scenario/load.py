"""Read scenario files (YAML or TOML by extension), apply ``--set`` overrides, validate.

Every problem becomes one ``ScenarioError`` naming the file, the dotted key, the bad value and
what is allowed. Files are read as bounded UTF-8 text; YAML goes through the bounded, strict
reader of :mod:`fedgame.scenario.safe_yaml` (safe constructor only, limited size, depth and
alias expansion, repeated keys refused), TOML through ``tomllib`` with the same limits checked
on the result (:mod:`fedgame.scenario.raw`).
"""

from __future__ import annotations

import copy
import os
import re
import stat
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

import fedgame.registry as registry
from fedgame.agents.population import ExplicitList
from fedgame.errors import ScenarioError
from fedgame.privacy.levels import check_coupling
from fedgame.scenario import behaviours
from fedgame.scenario.raw import check_finite, check_no_bool_numbers, check_raw
from fedgame.scenario.safe_yaml import MAX_DEPTH, MAX_DOCUMENT_BYTES, decode, load_yaml
from fedgame.scenario.schema import COMPONENT_FAMILIES, Scenario

SUFFIXES = {".yaml": "yaml", ".yml": "yaml", ".toml": "toml"}
#: a ``--set``/``--grid`` key: dotted names of letters, digits, ``_`` and ``-``
OVERRIDE_KEY = re.compile(r"[A-Za-z0-9_\-]+(\.[A-Za-z0-9_\-]+)*")


def read_raw(path: str | Path) -> dict[str, Any]:
    """Parse a scenario file into a plain dict (no validation)."""
    if not str(path).strip():
        raise ScenarioError("", ..., "path is empty: name a scenario file (.yaml, .yml or .toml)")
    path = Path(path)
    fmt = SUFFIXES.get(path.suffix.lower())
    if fmt is None:
        raise ScenarioError("", ..., _not_a_scenario_file(path)).with_file(str(path))
    try:
        return _parse(_read_bytes(path), fmt)
    except ScenarioError as err:
        raise err.with_file(str(path)) from None


def _not_a_scenario_file(path: Path) -> str:
    """Why ``path`` (without a scenario suffix) is refused, in words."""
    if path.is_dir():
        what = "is a folder"
    elif not path.suffix:
        what = "has no suffix"
    else:
        what = f"ends in {path.suffix!r}"
    return f"{what}; scenario files end in .yaml, .yml or .toml"


def _read_bytes(path: Path) -> bytes:
    """The file's bytes: a regular file of at most ``MAX_DOCUMENT_BYTES`` bytes."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
        data = _head(path, MAX_DOCUMENT_BYTES + 1) if regular else b""
    except OSError as exc:
        raise ScenarioError("", ..., f"cannot be read: {exc.strerror or exc}") from None
    except ValueError as exc:  # e.g. an embedded NUL byte in the path
        raise ScenarioError("", ..., f"cannot be read: {exc}") from None
    if not regular:
        raise ScenarioError("", ..., "cannot be read: not a regular file")
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ScenarioError(
            "", ..., f"is larger than {MAX_DOCUMENT_BYTES} bytes, the limit for a scenario"
        )
    return data


def _head(path: Path, size: int) -> bytes:
    with open(path, "rb") as fh:
        return fh.read(size)


def _parse(data: bytes, fmt: str) -> dict[str, Any]:
    text = decode(data)
    if fmt == "yaml":
        parsed = load_yaml(text)
    else:
        try:
            parsed = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ScenarioError("", ..., f"TOML syntax error: {exc}") from None
        except RecursionError:
            raise ScenarioError("", ..., f"nests deeper than {MAX_DEPTH} levels") from None
    if parsed is None:
        parsed = {}
    if not isinstance(parsed, dict):
        raise ScenarioError(
            "", ..., f"holds a {type(parsed).__name__}; a scenario is a mapping of keys"
        )
    check_raw(parsed)
    return parsed


def parse_override(text: str) -> tuple[str, Any]:
    """``"a.b=v"`` -> ``("a.b", v)`` with ``v`` parsed as a YAML scalar/list/mapping."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ScenarioError("--set", text, "overrides are written KEY=VALUE, e.g. privacy.clip=2.0")
    if not OVERRIDE_KEY.fullmatch(key) or key.count(".") >= MAX_DEPTH:
        raise ScenarioError(
            "--set",
            key,
            f"a dotted key of at most {MAX_DEPTH} names of ASCII letters, digits, '_' and '-', "
            f"e.g. privacy.clip; {key_problem(key)}",
        )
    try:
        value = load_yaml(raw) if raw.strip() else ""
    except ScenarioError as err:
        if "YAML syntax error" not in err.allowed:
            raise ScenarioError(key, ..., f"(from --set) {err.allowed}") from None
        value = raw
    return key, value


def key_problem(key: str) -> str:
    """What is wrong with a dotted key that :data:`OVERRIDE_KEY` refuses, naming the segment."""
    parts = key.split(".")
    if len(parts) > MAX_DEPTH:
        return f"this one has {len(parts)} names"
    for i, part in enumerate(parts, start=1):
        if not part:
            return f"name {i} of {len(parts)} is empty"
        bad = next((c for c in part if not (c.isascii() and (c.isalnum() or c in "_-"))), None)
        if bad is not None:
            return f"name {i} ({part!r}) holds {bad!r}"
    return "it is not one"


def apply_overrides(data: dict[str, Any], overrides: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """Return a copy of ``data`` with each dotted key set (missing parents are created).

    A number names an element of an existing list (``population.behaviours.0.share``); an
    index outside the list, or a name where a list is, is a ``ScenarioError``.
    """
    out = copy.deepcopy(data)
    for key, value in overrides:
        node: Any = out
        parts = key.split(".")
        for i, part in enumerate(parts[:-1]):
            slot: Any = _list_index(node, parts, i) if isinstance(node, list) else part
            child = node[slot] if isinstance(node, list) else node.get(part)
            if isinstance(child, str) and _is_component_path(".".join(parts[: i + 1])):
                child = {"kind": child}
            if not isinstance(child, (dict, list)):
                child = {}
            node[slot] = child
            node = child
        if isinstance(node, list):
            node[_list_index(node, parts, len(parts) - 1)] = value
        else:
            node[parts[-1]] = value
    return out


def _list_index(items: list[Any], parts: list[str], i: int) -> int:
    """``parts[i]`` as an index into ``items`` (the list at ``parts[:i]``), or ``ScenarioError``."""
    path = ".".join(parts[:i])
    if not parts[i].isdigit() or int(parts[i]) >= len(items):
        allowed = (
            f"an index 0..{len(items) - 1} into the list at {path}"
            if items
            else (f"nothing: the list at {path} is empty")
        )
        raise ScenarioError(".".join(parts), parts[i], allowed)
    return int(parts[i])


def _is_component_path(path: str) -> bool:
    return path in COMPONENT_FAMILIES


def validate(data: Mapping[str, Any], *, file: str | None = None) -> Scenario:
    """Validate a raw dict into a ``Scenario`` with every plug-in config resolved.

    The schema's own keys are checked first; only then are the scenario's ``plugins``
    imported (when trusted: :mod:`fedgame.trust`; looked for beside ``file`` first), before
    the components they may register are looked up.
    """
    from fedgame.plugins import load_modules

    try:
        check_raw(data)
        try:
            scenario = Scenario.model_validate(dict(data))
        except ValidationError as exc:
            raise registry.scenario_error_from_pydantic(exc, model=Scenario) from None
        check_population(scenario)
        load_modules(scenario.plugins, near=Path(file).parent if file else None)
        resolve_components(scenario)
        scenario._behaviours = behaviours.resolve(scenario)
        tree = validated_tree(scenario)
        check_no_bool_numbers(data, tree)
        check_finite(tree)
        check_cross_fields(scenario)
        if scenario.servers:
            from fedgame.market.spec import server_scenarios

            server_scenarios(scenario)
    except ScenarioError as err:
        raise (err.with_file(file) if file else err) from None
    return scenario


def validated_tree(scenario: Scenario, *, mode: str = "python") -> dict[str, Any]:
    """The scenario as plain data, each component replaced by its plug-in's validated config.

    A population with ``behaviours`` has each behaviour's policy defaults filled in and no
    top-level ``policy`` (the two exclude each other), so the tree validates again as it is.
    """
    data = scenario.model_dump(mode=mode)
    for path in COMPONENT_FAMILIES:
        node = data
        *parents, last = path.split(".")
        for part in parents:
            node = node[part]
        cfg = scenario.config(path).model_dump(mode=mode)
        node[last] = {"kind": scenario.component(path).kind, **cfg}
    if scenario.population.behaviours:
        del data["policy"]
        for spec, node in zip(scenario.behaviours(), data["population"]["behaviours"]):
            node.update(spec.config.model_dump(mode=mode))
    return data


def resolve_components(scenario: Scenario) -> None:
    """Validate each component's params against its plug-in's ``Config``."""
    configs = {}
    for path, family in COMPONENT_FAMILIES.items():
        comp = scenario.component(path)
        configs[path] = registry.validate(family, {"kind": comp.kind, **comp.params}, key=path)
    scenario._configs = configs


def check_population(scenario: Scenario) -> None:
    """Checks of ``population`` that need no plug-in (made before any plug-in is imported)."""
    pop = scenario.population
    if pop.colluders >= pop.clients:
        raise ScenarioError(
            "population.colluders", pop.colluders, f"must be < population.clients ({pop.clients})"
        )
    _check_range(pop.privacy_value, "population.privacy_value", low=0.0, low_open=True)
    _check_range(pop.budget.epsilon, "population.budget.epsilon", low=0.0, low_open=True)
    _check_range(pop.budget.delta, "population.budget.delta", low=0.0, high=1.0, open_=True)
    _check_range(pop.straggle_prob, "population.straggle_prob", low=0.0, high=1.0)
    for key, dist in (
        ("population.privacy_value", pop.privacy_value),
        ("population.budget.epsilon", pop.budget.epsilon),
        ("population.budget.delta", pop.budget.delta),
        ("population.straggle_prob", pop.straggle_prob),
    ):
        if isinstance(dist, ExplicitList) and len(dist.values) != pop.clients:
            raise ScenarioError(
                key,
                f"a list of {len(dist.values)} values",
                f"one value per client: {pop.clients} values (population.clients)",
            )


def check_cross_fields(scenario: Scenario) -> None:
    """Checks that need the plug-ins: classes declaring
    :class:`~fedgame.registry.ChecksScenario` add theirs (:func:`check_population` made the
    population's own before any plug-in was imported)."""
    for path, family in COMPONENT_FAMILIES.items():
        cls = registry.entry(family, scenario.component(path).kind).cls
        if issubclass(cls, registry.ChecksScenario):
            cls.check_scenario(scenario.config(path), scenario, key=path)
    check_coupling(scenario)


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
    raw = read_raw(path)
    path = Path(path)
    try:
        data = apply_overrides(raw, [parse_override(o) for o in overrides])
    except ScenarioError as err:
        raise err.with_file(str(path)) from None
    data.setdefault("name", path.stem)
    return validate(data, file=str(path))


def dump_resolved(scenario: Scenario) -> str:
    """The scenario with every default filled in, as YAML."""
    return yaml.safe_dump(scenario.model_dump(mode="json"), sort_keys=False)
