"""Plug-ins described for people: ``fedgame list``, ``fedgame list --verbose``, ``fedgame explain``.

A plug-in's summary is the first paragraph of its class docstring, in plain text: ReST roles
and literals (``:class:`~a.B```, ````clip````) become their words, lines are joined, and the
short form (``fedgame list``) keeps whole sentences, the first one. Its parameters are the
fields of its pydantic ``Config``: name, type with constraints (``float > 0``), default, and
the field's one-line ``description`` (blank where a knob has none). Only the registry and
the ``Config`` classes are read; no plug-in is built.
"""

from __future__ import annotations

import difflib
import re
import textwrap
import types
import typing
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from fedgame.errors import ScenarioError

#: width the descriptions are wrapped to
WIDTH = 100
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`~?([^`<]*?)\s*(?:<[^>]*>)?`")
_LITERAL = re.compile(r"``(.+?)``|`([^`]+)`")
#: a sentence ends at ``.``, ``!`` or ``?`` followed by a space and a capital or an opening
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(\"'])")
_ABBREVIATIONS = ("e.g.", "i.e.", "et al.", "vs.", "cf.", "Eq.", "Thm.", "Sec.", "approx.")
_BOUNDS = {"gt": ">", "ge": ">=", "lt": "<", "le": "<=", "multiple_of": "multiple of"}
_LENGTHS = {"min_length": "length >=", "max_length": "length <="}


def plain(text: str) -> str:
    """ReST markup to plain words: roles keep their last name, literals their content."""

    def role(match: re.Match[str]) -> str:
        target = match.group(1)
        return target.rsplit(".", 1)[-1] if match.group(0).count("~") else target

    text = _ROLE.sub(role, text)
    text = _LITERAL.sub(lambda m: m.group(1) or m.group(2), text)
    return " ".join(text.split())


def summary(cls: type, *, short: bool = False) -> str:
    """The first paragraph of ``cls``'s docstring as plain text; ``short``: its first sentence."""
    doc = typing.cast(str, cls.__doc__ or "").strip()
    paragraph = plain(re.split(r"\n\s*\n", doc, maxsplit=1)[0]) if doc else ""
    return first_sentence(paragraph) if short else paragraph


def first_sentence(text: str) -> str:
    """The first whole sentence of ``text`` (all of it when it has one sentence)."""
    pieces = _SENTENCE_END.split(text)
    sentence = pieces[0]
    for piece in pieces[1:]:
        if not sentence.endswith(_ABBREVIATIONS):
            break
        sentence = f"{sentence} {piece}"
    return sentence


@dataclass(frozen=True)
class Parameter:
    """One knob of a plug-in's ``Config``."""

    name: str
    type: str
    default: str
    description: str


def parameters(config: type[BaseModel]) -> list[Parameter]:
    """The fields of ``config``, in declaration order."""
    out = []
    for name, field in config.model_fields.items():
        if field.default_factory is not None:
            default = _value(field.default_factory())  # type: ignore[call-arg]
        elif field.is_required():
            default = "required"
        else:
            default = _value(field.default)
        kind = type_name(field.annotation, field.metadata)
        out.append(Parameter(name, kind, default, " ".join((field.description or "").split())))
    return out


def type_name(annotation: Any, metadata: Iterable[Any] = ()) -> str:
    """``float > 0``, ``'a' | 'b'``, ``list[int > 0]``, ``int > 0 | None`` ..."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        text = type_name(args[0], args[1:])
    elif origin is typing.Literal:
        text = " | ".join(repr(a) for a in args)
    elif origin in (typing.Union, types.UnionType):
        text = " | ".join("None" if a is type(None) else type_name(a) for a in args)
    elif origin is not None:
        inner = ", ".join("..." if a is Ellipsis else type_name(a) for a in args)
        text = f"{getattr(origin, '__name__', str(origin))}[{inner}]" if args else str(origin)
    elif isinstance(annotation, type):
        text = annotation.__name__
    else:
        text = str(annotation).replace("typing.", "")
    return " ".join([text, *_constraints(metadata)])


def _constraints(metadata: Iterable[Any]) -> list[str]:
    """``in [0, 1]`` for two bounds, ``> 0`` for one, ``length >= 1`` ..."""
    found = {
        attr: getattr(meta, attr)
        for meta in metadata
        for attr in (*_BOUNDS, *_LENGTHS)
        if getattr(meta, attr, None) is not None
    }
    low = next((k for k in ("ge", "gt") if k in found), None)
    high = next((k for k in ("le", "lt") if k in found), None)
    if low and high:
        left, right = "[" if low == "ge" else "(", "]" if high == "le" else ")"
        out = [f"in {left}{found.pop(low)}, {found.pop(high)}{right}"]
    else:
        out = []
    words = _BOUNDS | _LENGTHS
    return out + [f"{words[k]} {v}" for k, v in found.items()]


def _value(value: Any) -> str:
    if isinstance(value, BaseModel):
        return ", ".join(f"{k}={v!r}" for k, v in value.model_dump().items()) or "{}"
    return repr(value)


def describe(family: str, name: str, cls: type, config: type[BaseModel]) -> str:
    """``fedgame explain``'s text: summary, then one block per parameter."""
    head = textwrap.fill(f"{family} {name}: {summary(cls)}", WIDTH, subsequent_indent="  ")
    return "\n".join([head, "", *release_lines(family, cls), *parameter_lines(config, indent="  ")])


def release_lines(family: str, cls: type) -> list[str]:
    """A calibration's releases (``describes``): the privacy mechanisms it can serve."""
    if family != "calibration":
        return []
    kinds: dict[tuple[str, str], list[str]] = {}
    for r in sorted(getattr(cls, "describes", ())):
        kinds.setdefault((r.noise, r.placement), []).append(r.level)
    text = "; ".join(f"{n} noise, {p} ({', '.join(lv)} level)" for (n, p), lv in kinds.items())
    return [
        textwrap.fill(f"describes: {text}", WIDTH, initial_indent="  ", subsequent_indent="    "),
        "",
    ]


def parameter_lines(config: type[BaseModel], *, indent: str) -> list[str]:
    """Each parameter as ``name  type  (default: ...)`` and its description below it."""
    params = parameters(config)
    if not params:
        return [f"{indent}(no parameters)"]
    lines = [f"{indent}parameters:"]
    for p in params:
        lines.append(f"{indent}  {p.name}: {p.type} (default: {p.default})")
        if p.description:
            more = indent + " " * 6
            lines.append(
                textwrap.fill(p.description, WIDTH, initial_indent=more, subsequent_indent=more)
            )
    return lines


def listing_line(name: str, cls: type, origin: str = "") -> str:
    """``fedgame list``'s line: the name, where it comes from (``built-in``, an entry point, a
    scenario module), then the first sentence wrapped under its column."""
    first = f"  {name:<20} {origin + ' ' if origin else ''}"
    return textwrap.fill(
        summary(cls, short=True) or "-",
        WIDTH,
        initial_indent=first,
        subsequent_indent=" " * len(first),
    )


def check_choice(key: str, value: str, allowed: Sequence[str], what: str) -> None:
    """Refuse ``value`` not in ``allowed``, listing them and suggesting the nearest."""
    if value in allowed:
        return
    close = difflib.get_close_matches(value, allowed, n=1, cutoff=0.5)
    hint = f"; did you mean {close[0]}?" if close else ""
    raise ScenarioError(key, value, f"{what}: {', '.join(allowed)}{hint}")
