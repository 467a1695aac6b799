"""Folders and files below a results folder: real ones only, never through a link.

The folder the user names (``--out``, ``output.dir``, ``report --out``) may be or pass through a
symbolic link; below it fedgame creates and writes only real folders and regular files, so no
write can land outside. These checks import nothing heavy: ``fedgame validate`` makes them.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from fedgame.errors import ResultsError, os_problem


def make_folders(root: str | Path, *parts: str) -> Path:
    """``root/parts...``, each part created when missing; ``root`` (named by the user, and its
    parents) may be or pass through a link, a part may not.

    Raises:
        ResultsError: a part is a symbolic link or not a folder, or cannot be created.
    """
    path = Path(root)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ResultsError(path, f"cannot be created as a folder ({os_problem(exc)})") from None
    for part in parts:
        path = path / part
        try:
            os.mkdir(path)
        except FileExistsError:
            pass
        except OSError as exc:
            raise ResultsError(path, f"cannot be created ({os_problem(exc)})") from None
        problem = not_a_real_folder(path)
        if problem:
            raise ResultsError(path, problem)
    return path


def not_a_real_folder(path: Path) -> str | None:
    """Why ``path`` (which exists) is not a folder fedgame writes into, or None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return f"cannot be read ({os_problem(exc)})"
    if stat.S_ISLNK(mode):
        return (
            "is a symbolic link; fedgame writes only into real folders below the results "
            "folder, never through a link (remove the link)"
        )
    if not stat.S_ISDIR(mode):
        return "is not a folder (a file is where fedgame keeps a folder; remove or move it)"
    return None


def not_a_plain_file(path: Path) -> str | None:
    """Why ``path`` (which exists) is not a file fedgame may replace, or None."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return f"cannot be read ({os_problem(exc)})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        what = "a folder"
    elif stat.S_ISLNK(mode):
        what = "a symbolic link"
    else:
        what = "not a regular file"
    return f"is {what}, where fedgame writes a file (remove or move it)"
