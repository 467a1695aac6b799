"""The scenario files shipped with fedgame: ``fedgame scenarios`` lists, prints and copies them.

They live in the package (``fedgame/scenarios/*.yaml``, package data of the wheel; in a source
checkout that folder is a link to the repository's ``scenarios/``), so an installed fedgame
can start from the quickstart or a paper's reproduction without the repository. A copy is
byte for byte the shipped file; nothing is overwritten unless asked.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from fedgame.errors import ScenarioError

#: where the shipped scenarios are
FOLDER = Path(__file__).resolve().parents[1] / "scenarios"


@dataclass(frozen=True)
class Bundled:
    """One shipped scenario: its name (the file's stem), file and one-line description (its
    ``description``, else its first comment line)."""

    name: str
    path: Path
    description: str


def bundled() -> list[Bundled]:
    """Every shipped scenario, by name."""
    from fedgame.scenario.load import read_raw

    out = []
    for path in sorted(FOLDER.glob("*.yaml")):
        try:
            text = str(read_raw(path).get("description", ""))
        except ScenarioError:
            text = ""
        out.append(Bundled(path.stem, path, " ".join(text.split()) or _first_comment(path)))
    return out


def _first_comment(path: Path) -> str:
    """The file's first comment line (a scenario without ``description``), or ""."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return ""


def find(names: Sequence[str]) -> list[Bundled]:
    """The shipped scenarios ``names`` (a name or a file name), in that order; an unknown
    name is a ``ScenarioError`` listing the names."""
    from fedgame.plugin_help import check_choice

    by_name = {b.name: b for b in bundled()}
    out = []
    for name in names:
        stem = name.removesuffix(".yaml")
        check_choice("NAME", stem, list(by_name), "shipped scenarios")
        out.append(by_name[stem])
    return out


def copy(scenarios: Sequence[Bundled], dest: str | Path, *, force: bool = False) -> list[Path]:
    """Copy ``scenarios`` into the folder ``dest`` (created if missing); returns the new files.

    Every target is checked before anything is copied: an existing file is refused (unless
    ``force``), so a refused copy writes nothing.
    """
    folder = Path(dest)
    if folder.exists() and not folder.is_dir():
        raise ScenarioError("--copy", str(dest), "a folder to copy the scenarios into")
    targets = [folder / s.path.name for s in scenarios]
    existing = [str(t) for t in targets if t.exists()]
    if existing and not force:
        raise ScenarioError(
            "--copy", str(dest), f"a folder without {', '.join(existing)} (or add --force)"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for scenario, target in zip(scenarios, targets):
        shutil.copyfile(scenario.path, target)
    return targets
