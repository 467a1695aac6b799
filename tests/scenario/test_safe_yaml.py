"""The bounded YAML reader and the raw-data checks: limits, repeated keys, non-finite numbers."""

from __future__ import annotations

import math
import time

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from fedgame.errors import ScenarioError, short_repr
from fedgame.scenario.load import parse_override
from fedgame.scenario.raw import check_finite, check_no_bool_numbers, check_raw
from fedgame.scenario.safe_yaml import MAX_DEPTH, MAX_NODES, decode, load_yaml

names = st.text(alphabet="abcdefghij_", min_size=1, max_size=6)
leaves = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.booleans(),
    st.text(max_size=8),
    st.none(),
)
trees = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(names, inner, max_size=4),
    max_leaves=30,
)


@given(st.dictionaries(names, trees, max_size=5))
def test_plain_documents_read_as_safe_load_reads_them(data):
    text = yaml.safe_dump(data)
    assert load_yaml(text) == yaml.safe_load(text)


def test_anchors_and_merge_keys_within_the_limits_work():
    text = "base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  x: 3\nlist: &l [1, 2]\nagain: *l\n"
    assert load_yaml(text) == {
        "base": {"x": 1, "y": 2},
        "other": {"x": 3, "y": 2},
        "list": [1, 2],
        "again": [1, 2],
    }


def _refused(text: str) -> str:
    started = time.perf_counter()
    with pytest.raises(ScenarioError) as err:
        load_yaml(text)
    assert time.perf_counter() - started < 2.0
    return str(err.value)


def test_an_alias_bomb_is_refused_without_expanding_it():
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    assert f"more than {MAX_NODES} values" in _refused("\n".join(lines))


def test_the_expanded_size_limit_is_exact():
    ok = "a: [" + ", ".join(["1"] * (MAX_NODES - 3)) + "]"  # root, key, list, items
    assert len(load_yaml(ok)["a"]) == MAX_NODES - 3
    assert "values" in _refused("a: [" + ", ".join(["1"] * (MAX_NODES - 2)) + "]")


@pytest.mark.parametrize("opener", ["[", "{a: "])
def test_nesting_is_limited(opener):
    closer = "]" if opener == "[" else "}"
    inner = "1" if opener != "[" else ""

    def nested(depth: int) -> str:
        return "a: " + opener * depth + inner + closer * depth

    assert load_yaml(nested(MAX_DEPTH - 1))  # the root mapping is one level
    assert f"nesting deeper than {MAX_DEPTH}" in _refused(nested(MAX_DEPTH))
    assert f"nesting deeper than {MAX_DEPTH}" in _refused(nested(100_000))


_PARSERS = {"c": getattr(yaml, "CSafeLoader", yaml.SafeLoader), "python": yaml.SafeLoader}


@pytest.mark.parametrize("parser", sorted(_PARSERS))
@pytest.mark.parametrize(
    "text",
    [
        # past libyaml's own limit of 1000 levels (PyYAML >= 6.0.3 refuses there first)
        "a: " + "[" * 1500 + "]" * 1500,
        "a: " + "{b: " * 1500 + "1" + "}" * 1500,
        "a: " + "[" * 1500,  # never closed: a syntax error deep inside the limit's excess
        "- " * 1500 + "x",
    ],
    ids=["flow_lists", "flow_maps", "unclosed", "block_lists"],
)
def test_deep_nesting_gets_fedgames_message_from_any_parser(monkeypatch, parser, text):
    """libyaml refuses nesting past 1000 levels before fedgame sees an event; the user still
    gets fedgame's limit, never the library's wording or a syntax error."""
    import fedgame.scenario.safe_yaml as safe_yaml

    monkeypatch.setattr(safe_yaml, "_Loader", type("Loader", (_PARSERS[parser],), {}))
    message = _refused(text)
    assert f"nesting deeper than {MAX_DEPTH} levels" in message
    assert "syntax" not in message


@pytest.mark.parametrize(
    "problem", ["exceeded maximum nesting depth", "too deep: depth limit 1000", "unexpected end"]
)
def test_a_parser_refusal_of_depth_is_fedgames_limit_whatever_its_wording(monkeypatch, problem):
    import fedgame.scenario.safe_yaml as safe_yaml

    def refusing_parse(text, Loader):
        mark = yaml.Mark("<text>", len(text) - 1, 0, len(text) - 1, text, len(text) - 1)
        raise yaml.MarkedYAMLError(problem=problem, problem_mark=mark)

    monkeypatch.setattr(safe_yaml.yaml, "parse", refusing_parse)
    deep = _refused("a: " + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    shallow = _refused("a: [[1]]")
    assert f"nesting deeper than {MAX_DEPTH}" in deep
    if "depth" in problem:
        assert f"nesting deeper than {MAX_DEPTH}" in shallow
    else:  # an ordinary syntax error in a shallow document stays a syntax error
        assert "YAML syntax error" in shallow and problem in shallow


def test_brackets_in_quotes_and_comments_do_not_count_as_nesting(monkeypatch):
    import fedgame.scenario.safe_yaml as safe_yaml

    quoted = "a: '" + "[" * 100 + "'\nb: \"" + "{" * 100 + '" # ' + "[" * 100 + "\nc: [1"
    assert safe_yaml._flow_depth(quoted) == 1
    assert "YAML syntax error" in _refused(quoted)


def test_an_alias_inside_its_own_collection_is_refused():
    assert "inside the collection it names" in _refused("a: &a [1, *a]\n")


@pytest.mark.parametrize(
    ("text", "key", "lines"),
    [
        ("a: 1\nb: 2\na: 3\n", "a", "lines 1 and 3"),
        ("p:\n  q:\n    r: 1\n    r: 2\n", "p.q.r", "lines 3 and 4"),
        ("l:\n- {x: 1, x: 2}\n", "l[0].x", "lines 2 and 2"),
        ("1: a\n0x1: b\n", "1", "lines 1 and 2"),
    ],
)
def test_a_repeated_key_is_named_with_its_path_and_lines(text, key, lines):
    with pytest.raises(ScenarioError) as err:
        load_yaml(text)
    assert err.value.key == key and lines in err.value.allowed


def test_bytes_must_be_utf8_and_small():
    assert decode("\ufeffa: 1".encode()) == "a: 1"
    with pytest.raises(ScenarioError, match="byte 0xff at offset 3"):
        decode(b"a: \xff")
    with pytest.raises(ScenarioError, match="at most"):
        decode(b" " * (2 << 20))


def test_override_values_use_the_bounded_reader():
    assert parse_override("a.b=[1, 2]") == ("a.b", [1, 2])
    assert parse_override("a=x: y: z") == ("a", "x: y: z")  # not YAML: kept as text
    with pytest.raises(ScenarioError, match="nesting"):
        parse_override("a=" + "[" * 1000 + "]" * 1000)
    for bad in ("a..b=1", ".a=1", "a b=1", "a." * 100 + "b=1"):
        with pytest.raises(ScenarioError) as err:
            parse_override(bad)
        assert err.value.key == "--set"


def test_error_values_render_short_even_when_huge_or_recursive():
    loop: list = [1]
    loop.append(loop)
    nested: list = []
    for _ in range(10_000):
        nested = [nested]
    for value in (list(range(10**6)), "x" * 10**6, {i: i for i in range(10**5)}, loop, nested):
        started = time.perf_counter()
        text = str(ScenarioError("k", value, "allowed"))
        assert time.perf_counter() - started < 0.1
        assert len(text) < 200 and "\n" not in text
    assert short_repr("a\nb") == repr("a\nb")


# -- raw data ---------------------------------------------------------------------------------


def _put(tree: dict, path: list[str], value: object) -> dict:
    node = tree
    for part in path[:-1]:
        node = node.setdefault(part, {})
    node[path[-1]] = value
    return tree


@given(st.lists(names, min_size=1, max_size=6), st.sampled_from([math.nan, math.inf, -math.inf]))
def test_a_non_finite_number_anywhere_is_refused_with_its_path(path, bad):
    if path[-1] in ("low", "high"):
        path = [*path[:-1], "value"]
    with pytest.raises(ScenarioError) as err:
        check_raw(_put({}, path, bad))
    assert err.value.key == ".".join(path)
    with pytest.raises(ScenarioError):
        check_finite(_put({}, path, bad))


def test_infinity_is_allowed_only_as_a_clip_bound():
    clipped = {"population": {"privacy_value": {"dist": "normal", "mean": 1, "high": math.inf}}}
    check_raw(clipped)
    check_finite(clipped)
    uniform = {"population": {"privacy_value": {"dist": "uniform", "low": 0, "high": math.inf}}}
    with pytest.raises(ScenarioError, match="finite"):
        check_raw(uniform)
    with pytest.raises(ScenarioError, match="NaN"):
        check_raw({"population": {"privacy_value": {"dist": "normal", "high": math.nan}}})


def test_keys_must_be_text_and_size_is_bounded():
    with pytest.raises(ScenarioError, match="keys are names"):
        check_raw({"a": {1: 2}})
    with pytest.raises(ScenarioError, match=f"at most {MAX_NODES}"):
        check_raw({"a": [0] * MAX_NODES})
    deep: dict = {}
    node = deep
    for _ in range(MAX_DEPTH + 1):
        node["a"] = {}
        node = node["a"]
    with pytest.raises(ScenarioError, match="nests deeper"):
        check_raw(deep)


def test_bools_are_refused_where_numbers_are_validated():
    check_no_bool_numbers({"a": True, "b": [True]}, {"a": True, "b": [False]})
    with pytest.raises(ScenarioError) as err:
        check_no_bool_numbers({"p": {"n": True}}, {"p": {"n": 1}})
    assert err.value.key == "p.n"
    with pytest.raises(ScenarioError) as err:
        check_no_bool_numbers({"h": [8, False]}, {"h": [8, 0]})
    assert err.value.key == "h[1]"
