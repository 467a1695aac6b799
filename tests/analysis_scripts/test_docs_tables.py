"""Every measured table in docs/ names the command that produced it, and that command parses."""

from __future__ import annotations

import re

import pytest
from scripts_helpers import REPO, SCRIPTS, load, parse_command

DOCS = REPO / "docs"
PAGES = sorted(DOCS.glob("*.md"))
BLOCK = re.compile(
    r"<!-- BEGIN GENERATED (?P<key>[\w./-]+) -->\n(?P<body>.*?)<!-- END GENERATED (?P=key) -->",
    re.DOTALL,
)


def blocks():
    return [(p.name, m["key"], m["body"]) for p in PAGES for m in BLOCK.finditer(p.read_text())]


def parses(command: str) -> str:
    """Parse ``command`` with its script's own parser; returns the script name."""
    name, argv = parse_command(command)
    assert name in SCRIPTS, command
    load(name).build_parser().parse_args(argv)
    return name


def test_docs_have_generated_blocks_for_every_paper_script():
    keys = {key.split("/")[0] for _, key, _ in blocks()}
    assert keys >= {"dpfl_bcs", "privacy_aware", "queries_replies", "qi_dpfl", "lightdp"}
    assert "reproductions" in keys


@pytest.mark.parametrize("page,key,body", blocks(), ids=[f"{p}:{k}" for p, k, _ in blocks()])
def test_generated_block_names_its_command(page, key, body):
    rows = [line for line in body.splitlines() if line.startswith("| ")]
    assert len(rows) >= 2, f"{page}: block {key} holds no table"
    if key == "reproductions/claims":
        return  # one command per row, checked below
    head = body.splitlines()[0]
    assert head.startswith("Measured with `python analysis/"), (page, key, head)
    assert parses(head.split("`")[1]) == key.split("/")[0]


def reproduction_rows():
    (body,) = [b for _, key, b in blocks() if key == "reproductions/claims"]
    lines = [line for line in body.splitlines() if line.startswith("| ")]
    header = [c.strip() for c in lines[0].strip("|").split(" | ")]
    return header, [[c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines[1:]]


def test_reproductions_table_has_the_columns_and_all_papers():
    header, rows = reproduction_rows()
    assert header == [
        "paper",
        "claim",
        "paper's value",
        "fedgame (mean ± 95% CI over seeds; setting)",
        "reproduced?",
        "why not / caveat",
        "rule",
        "hold-outs",
        "command",
    ]
    papers = {re.match(r"\[(\d{3}) ", row[0]).group(1) for row in rows}
    assert papers == {"000", "001", "002", "003", "004"}


def test_every_reproductions_row_names_a_command_that_parses():
    """Each row: its commands parse (the default's first, then each hold-out's), a verdict
    from the rules, a reason unless yes, a rule, and its hold-outs' verdicts (or "–" for a
    claim not run)."""
    header, rows = reproduction_rows()
    col = header.index("command")
    for row in rows:
        commands = re.findall(r"`([^`]+)`", row[col])
        assert commands, row
        for command in commands:
            parses(command)
        link = re.search(r"\]\(([\w.]+\.md)\)", row[0]).group(1)
        assert (DOCS / link).is_file(), row[0]
        verdict = row[header.index("reproduced?")]
        assert re.match(r"(yes|partly|no|inconclusive|not run)\b", verdict), verdict
        assert ("(preliminary)" in verdict) == ("--quick" in commands[0])
        if not verdict.startswith("yes"):
            assert row[header.index("why not / caveat")] not in ("", "–"), row
        holdouts = row[header.index("hold-outs")]
        if verdict.startswith("not run"):
            assert holdouts == "–" and row[header.index("rule")] == "–"
            continue
        assert len(row[header.index("rule")]) > 15, row
        entries = holdouts.split("<br>")[:-1]  # the last part says whether they agree
        assert len(entries) >= 2, row  # at least two hold-out settings
        assert "hold-out not run" not in holdouts, row
        evaluated = [e for e in entries if "not evaluated" not in e]
        assert all(re.search(r", seeds \d+-\d+: ", e) for e in evaluated), row
        assert len(commands) == 1 + len(evaluated), row  # the default's and each hold-out's


def test_every_paper_has_rows_and_not_run_rows_say_why():
    header, rows = reproduction_rows()
    reasons = [r[header.index("why not / caveat")] for r in rows if r[4].startswith("not run")]
    assert reasons and all(len(r) > 20 for r in reasons)


def test_measured_tables_live_in_generated_blocks():
    """A table row with a 'mean ± half-width' cell must come from a script (with its command)."""
    for page in PAGES:
        text = page.read_text()
        outside = BLOCK.sub("", text)
        for line in outside.splitlines():
            if line.startswith("| "):
                assert not re.search(r"\d ± \d", line), f"{page.name}: {line}"
