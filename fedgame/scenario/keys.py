"""Every key a scenario file may set, read from the pydantic schema: ``fedgame explain scenario``.

A key's type and default come from its field; its meaning from the field's ``description``,
or else from the ``Attributes:`` section of its class docstring (the game rules). A section
(``population``, ``training``, ...) is listed with the first sentence of its class docstring,
then its keys. A plug-in key (``selection``, ``privacy``, ...) is ``{kind: NAME, ...}``: its
own parameters are listed by ``fedgame explain FAMILY NAME``. A list of sub-models
(``population.behaviours``) lists the keys of one item as ``population.behaviours.N.KEY``,
the form ``--set`` takes. Only the schema is read; nothing is validated or built.
"""

from __future__ import annotations

import re
import textwrap
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from fedgame.agents.population import Constant
from fedgame.plugin_help import WIDTH, first_sentence, plain, type_name
from fedgame.scenario.schema import COMPONENT_FAMILIES, Component, Scenario

#: how a distribution-valued key is written
DISTRIBUTION = "distribution: a number, a list (one value per client) or {dist: ...}"
_ATTRIBUTE = re.compile(r"^\s{4,}(\w+):\s*(.*)$")


@dataclass(frozen=True)
class Key:
    """One scenario key: dotted path, type, default, meaning; ``section`` for a sub-model."""

    path: str
    type: str
    default: str
    meaning: str
    section: bool = False


def scenario_keys() -> list[Key]:
    """Every key of :class:`~fedgame.scenario.schema.Scenario`, depth first, in schema order."""
    return _walk(Scenario, "")


def _walk(model: type[BaseModel], prefix: str) -> list[Key]:
    attributes = _attributes(model)
    out: list[Key] = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        meaning = " ".join((field.description or attributes.get(name, "")).split())
        sub = _sub_model(field.annotation)
        if sub is not None and not issubclass(sub, Component):
            out.append(Key(path, "section", "", meaning or _summary(sub), section=True))
            out += _walk(sub, f"{path}.")
            continue
        items = _list_item(field.annotation)
        if items is not None:
            out.append(Key(path, f"list of {{{_item_keys(items)}}}", _default(field), meaning))
            out += _walk(items, f"{path}.N.")
            continue
        out.append(Key(path, _type(path, field), _default(field), meaning))
    return out


def _sub_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    return None


def _list_item(annotation: Any) -> type[BaseModel] | None:
    if typing.get_origin(annotation) is list:
        (item,) = typing.get_args(annotation)
        return _sub_model(item)
    return None


def _item_keys(model: type[BaseModel]) -> str:
    names = list(model.model_fields)
    extra = ", ..." if model.model_config.get("extra") == "allow" else ""
    return ", ".join(names) + extra


def _type(path: str, field: FieldInfo) -> str:
    if _is_distribution(field.annotation):
        return DISTRIBUTION
    if field.annotation is Component or path in COMPONENT_FAMILIES:
        family = COMPONENT_FAMILIES.get(path, "")
        return f"{family} plug-in: {{kind: NAME, ...}} (fedgame list {family})"
    return type_name(field.annotation, field.metadata)


def _is_distribution(annotation: Any) -> bool:
    args = typing.get_args(annotation)
    inner = typing.get_args(args[0]) if args else ()
    return Constant in (*args, *inner)


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default  # type: ignore[call-arg]
    if isinstance(value, Constant):
        return repr(value.value)
    if isinstance(value, Component):
        params = "".join(f", {k}: {v!r}" for k, v in value.params.items())
        return f"{{kind: {value.kind}{params}}}"
    if isinstance(value, BaseModel):
        return "{}"
    return repr(value)


def _summary(model: type[BaseModel]) -> str:
    doc = (model.__doc__ or "").strip()
    return first_sentence(plain(re.split(r"\n\s*\n", doc, maxsplit=1)[0])) if doc else ""


def _attributes(model: type[BaseModel]) -> dict[str, str]:
    """``name -> text`` of a Google-style ``Attributes:`` section of ``model``'s docstring."""
    doc = model.__doc__ or ""
    if "Attributes:" not in doc:
        return {}
    found: dict[str, list[str]] = {}
    current = None
    for line in doc.split("Attributes:", 1)[1].splitlines():
        match = _ATTRIBUTE.match(line)
        if match and len(line) - len(line.lstrip()) <= 8:
            current = match.group(1)
            found[current] = [match.group(2)]
        elif current and line.strip():
            found[current].append(line.strip())
        elif current and not line.strip() and found[current]:
            current = None
    return {name: plain(_join(words)) for name, words in found.items()}


def _join(lines: list[str]) -> str:
    """Docstring lines as one text (a word broken after a hyphen is joined again)."""
    text = ""
    for line in lines:
        glue = "" if text.endswith("-") and text[-2:-1].isalpha() else " "
        text = f"{text}{glue}{line}" if text else line
    return text


def matching(prefix: str | None) -> list[Key]:
    """The keys at ``prefix`` and under it (all of them for None); [] when there is none."""
    keys = scenario_keys()
    if not prefix:
        return keys
    wanted = _as_schema_path(prefix)
    return [k for k in keys if k.path == wanted or k.path.startswith(f"{wanted}.")]


def _as_schema_path(key: str) -> str:
    """``population.behaviours.0.share`` (as ``--set`` writes it) -> ``...behaviours.N.share``."""
    return ".".join("N" if part.isdigit() else part for part in key.split("."))


def key_paths() -> list[str]:
    return [k.path for k in scenario_keys()]


def describe(keys: list[Key]) -> str:
    """``fedgame explain scenario``'s text: one block per key."""
    lines = []
    indent = " " * 6
    for key in keys:
        if key.section:
            lines.append(f"{key.path}: section")
        else:
            lines.append(f"{key.path}: {key.type} (default: {key.default})")
        if key.meaning:
            lines.append(textwrap.fill(key.meaning, WIDTH, initial_indent=indent,
                                       subsequent_indent=indent))  # fmt: skip
        if key.path in COMPONENT_FAMILIES:
            lines.append(
                f"{indent}its parameters: fedgame explain {COMPONENT_FAMILIES[key.path]} NAME"
            )
    return "\n".join(lines)
