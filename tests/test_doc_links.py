"""Every file the docs and the code's comments point at is in the repository.

Scans README.md, docs/**/*.md and fedgame/**/*.py for relative Markdown links, mentions of
``*.md`` files, repository paths (``fedgame/...``, ``docs/...``, ``tests/...``, ...) and
``../`` paths, and checks that each names a file or folder inside the checkout (relative to
the mentioning file or to the repository root). A reader sent to a file that is not there, or
outside the repository, has nowhere to go.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

#: Markdown links [text](target); targets with a scheme or only an anchor are not files
LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
#: a file name or path ending in .md (``docs/plugins.md``, ``columns.md``, ``../x.md``)
MARKDOWN = re.compile(r"(?<![\w/.<>-])((?:\.\.?/)*\w[\w./-]*\.md)\b")
#: a path inside the repository's top-level folders, with a file extension
REPO_PATH = re.compile(
    r"(?<![\w/.-])((?:fedgame|docs|tests|scenarios|analysis|bench|\.ci)/[\w./-]*"
    r"\.(?:py|md|yaml|png|json|txt|toml))\b"
)
#: a path that climbs out of the mentioning file's folder
UPWARD = re.compile(r"(?<![\w.])(\.\./[\w./-]+)")
#: names of files fedgame writes (not files of the repository): ``fedgame report``'s page
WRITTEN = {"report.md", "report/report.md"}


def _sources() -> list[Path]:
    return [
        REPO / "README.md",
        *sorted((REPO / "docs").rglob("*.md")),
        *sorted((REPO / "fedgame").rglob("*.py")),
    ]


def _exists(target: str, near: Path) -> bool:
    target = target.split("#")[0]
    for candidate in ((near.parent / target).resolve(), (REPO / target).resolve()):
        if candidate.is_relative_to(REPO) and candidate.exists():
            return True
    return False


def dangling(path: Path, text: str | None = None) -> list[str]:
    """The references of file ``path`` (its ``text``, read when None) that name nothing
    inside the repository."""
    text = path.read_text(encoding="utf-8") if text is None else text
    found = []
    patterns = [MARKDOWN, REPO_PATH, UPWARD]
    if path.suffix == ".md":
        patterns.append(LINK)
    for pattern in patterns:
        for match in pattern.finditer(text):
            target = match.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
                continue
            if target in WRITTEN or _exists(target, path):
                continue
            line = text.count("\n", 0, match.start()) + 1
            found.append(f"{path.relative_to(REPO)}:{line}: {target}")
    if "ARCHITECTURE" in text:
        line = text.count("\n", 0, text.index("ARCHITECTURE")) + 1
        found.append(f"{path.relative_to(REPO)}:{line}: ARCHITECTURE (not in the repository)")
    return found


def test_no_reference_dangles():
    found = [ref for path in _sources() for ref in dangling(path)]
    assert not found, "references to files not in the repository:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "text",
    [
        "see ARCHITECTURE.md §4",
        "[the notes](../shared/notes.md)",
        "the reasoning is in `../shared/papers/notes/`",
        "`fedgame/no_such_module.py` holds it",
        "[plugins](no_such_page.md)",
    ],
)
def test_a_reference_to_a_missing_file_is_found(text):
    page = REPO / "docs" / "_probe_links.md"  # a page in docs/: paths resolve as docs' do
    assert dangling(page, text), text


def test_references_that_exist_pass():
    text = (
        "[columns](columns.md), [README](../README.md), `docs/plugins.md`, "
        "`fedgame/kit.py`, [web](https://example.org/x.md), [here](#writing-a-mechanism), "
        "`fedgame report` writes report.md"
    )
    assert dangling(REPO / "docs" / "_probe_links.md", text) == []
