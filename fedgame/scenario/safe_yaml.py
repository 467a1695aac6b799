"""A bounded, strict YAML reader for scenario files and ``--set`` values.

``yaml.safe_load`` constructs only plain data, but it still trusts the document's shape: an
alias bomb (``a: &a [x, x]``, ``b: &b [*a, *a]``, ...) expands to billions of nodes in whatever
walks the result, deep nesting overflows the recursive composer, and a repeated key silently
wins. This reader streams the document's events once (libyaml's C parser when present) and
stops at the first violation of

* :data:`MAX_DOCUMENT_BYTES` bytes of UTF-8 text;
* :data:`MAX_DEPTH` levels of nested mappings and lists;
* :data:`MAX_NODES` nodes with every alias expanded (an alias counts the size of its target;
  an alias inside the collection it names is refused);

then composes the node graph, rejects a key repeated within one mapping (naming its dotted
path and both lines) and constructs the data with the safe constructor. Every problem is a
``ScenarioError`` on key ``""`` (the file) or on the repeated key.

The limits are fedgame's, whatever the parser does: libyaml (PyYAML >= 6.0.3) refuses nesting
past its own depth of 1000 while scanning ahead, before an event reaches this reader; such a
refusal, or any parser error raised where the text is already nested deeper than
:data:`MAX_DEPTH`, is reported as fedgame's nesting limit, not as a syntax error.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from typing import Any

import yaml

from fedgame.errors import ScenarioError

#: largest scenario document, in bytes (a scenario is a page of settings, not data)
MAX_DOCUMENT_BYTES = 1 << 20
#: deepest nesting of mappings and lists (a scenario needs about six)
MAX_DEPTH = 32
#: most nodes a document may hold once every alias is expanded
MAX_NODES = 100_000

_BASE: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Loader(_BASE):  # type: ignore[misc,valid-type]
    """The safe loader (C parser when available); construction stays the safe constructor."""


def decode(data: bytes) -> str:
    """UTF-8 text of ``data`` (a leading byte-order mark is dropped); ScenarioError if not."""
    if len(data) > MAX_DOCUMENT_BYTES:
        raise ScenarioError(
            "", f"{len(data)} bytes", f"scenario files are at most {MAX_DOCUMENT_BYTES} bytes"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        bad = data[exc.start : exc.start + 1].hex()
        raise ScenarioError(
            "", ..., f"is not UTF-8 text (byte 0x{bad} at offset {exc.start}); save it as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")


def load_yaml(text: str) -> Any:
    """Parse one YAML document within the limits above; raises ``ScenarioError``."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_DOCUMENT_BYTES:
        raise ScenarioError("", ..., f"scenario text is at most {MAX_DOCUMENT_BYTES} bytes")
    try:
        check_shape(text)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None
            check_duplicate_keys(node, loader)
            return loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        if _refused_for_depth(text, exc):
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            raise ScenarioError(
                "", ..., f"refused{where}: nesting deeper than {MAX_DEPTH} levels"
            ) from None
        raise ScenarioError("", ..., f"YAML syntax error{_where(exc)}: {_problem(exc)}") from None


def check_shape(text: str) -> None:
    """Stream the events of ``text`` and enforce depth, expanded size and alias sanity."""
    open_counts: list[int] = []  # expanded size so far of each open collection
    open_anchors: list[str | None] = []
    sizes: dict[str, int] = {}
    total = 0
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(open_counts) >= MAX_DEPTH:
                raise _limit(event, f"nesting deeper than {MAX_DEPTH} levels")
            open_counts.append(1)
            open_anchors.append(event.anchor)
            added = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            size = open_counts.pop()
            anchor = open_anchors.pop()
            if anchor is not None:
                sizes[anchor] = size
            if open_counts:
                open_counts[-1] += size
            continue
        elif isinstance(event, yaml.ScalarEvent):
            if event.anchor is not None:
                sizes[event.anchor] = 1
            added = 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise _limit(event, f"alias *{event.anchor} inside the collection it names")
            added = sizes.get(event.anchor, 1)
        else:
            continue
        total += added
        if total > MAX_NODES:
            raise _limit(event, f"more than {MAX_NODES} values once aliases are expanded")
        if open_counts and not isinstance(event, yaml.CollectionStartEvent):
            open_counts[-1] += added


def check_duplicate_keys(root: yaml.Node, loader: Any) -> None:
    """Refuse a key that appears twice in one mapping, naming its dotted path and lines."""
    seen_nodes: set[int] = set()
    todo: list[tuple[yaml.Node, str]] = [(root, "")]
    while todo:
        node, path = todo.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            todo += [(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
            continue
        if not isinstance(node, yaml.MappingNode):
            continue
        lines: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                todo.append((value_node, path))
                continue
            key = loader.construct_object(key_node)
            dotted = f"{path}.{key}" if path else str(key)
            line = key_node.start_mark.line + 1
            if not isinstance(key, Hashable):  # e.g. a list as key; the schema refuses it
                todo.append((value_node, dotted))
                continue
            if key in lines:
                raise ScenarioError(
                    dotted, ..., f"appears twice in one mapping (lines {lines[key]} and {line})"
                )
            lines[key] = line
            todo.append((value_node, dotted))


def _refused_for_depth(text: str, exc: yaml.YAMLError) -> bool:
    """Whether a parser error is a nesting refusal: the parser says so, or the flow brackets
    open before the error's position already nest deeper than :data:`MAX_DEPTH`."""
    if re.search(r"nesting|depth", _problem(exc), re.IGNORECASE):
        return True
    mark = getattr(exc, "problem_mark", None)
    return mark is not None and _flow_depth(text[: mark.index + 1]) > MAX_DEPTH


def _flow_depth(text: str) -> int:
    """Deepest nesting of ``[``/``{`` outside quotes and comments (a lexical upper estimate)."""
    depth = deepest = 0
    for token in _FLOW_TOKENS.finditer(text):
        bracket = token.group()
        if bracket in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif bracket in "]}":
            depth = max(depth - 1, 0)
    return deepest


#: quoted scalars and comments (skipped) or a single flow bracket
_FLOW_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"\\]|\\.)*\"|#[^\n]*|[\[\]{}]")


def _limit(event: yaml.Event, what: str) -> ScenarioError:
    mark = event.start_mark
    where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
    return ScenarioError("", ..., f"refused{where}: {what}")


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""


def _problem(exc: yaml.YAMLError) -> str:
    return " ".join(str(getattr(exc, "problem", None) or exc).split())
