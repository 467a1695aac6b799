"""Run folders: Parquet tables, resolved scenario and manifest, each written atomically.

Layout: ``<out>/<scenario name>/<run-id>/`` with ``rounds.parquet``, ``clients.parquet``,
``scenario.resolved.yaml`` and ``manifest.json``. Each file is written to a temporary name in
the same folder and renamed into place, so a reader never sees a half-written file; the
manifest is written last and its ``status`` says whether the run completed.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_parquet(path: Path, frame: pd.DataFrame) -> None:
    """Write a DataFrame as Parquet atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def new_run_id(seed: int, replicate: int = 0) -> str:
    """``YYYYmmdd-HHMMSS.ffffff-s<seed>[-r<replicate>]-<4 hex>``: sortable and unique."""
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S.%f")
    rep = f"-r{replicate}" if replicate else ""
    return f"{now}-s{seed}{rep}-{os.urandom(2).hex()}"


def git_sha() -> str | None:
    """The git commit of the fedgame source tree, when it is a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def versions() -> dict[str, str]:
    """Versions of the libraries that shape results."""
    import mesa
    import numpy
    import pyarrow
    import torch

    import fedgame

    return {
        "fedgame": fedgame.__version__,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "mesa": mesa.__version__,
        "numpy": numpy.__version__,
        "pandas": pd.__version__,
        "pyarrow": pyarrow.__version__,
    }


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    atomic_write_text(run_dir / "manifest.json", json.dumps(manifest, indent=2, default=str))


def read_manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))
