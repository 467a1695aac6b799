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
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

if TYPE_CHECKING:
    import pyarrow as pa


def current_umask() -> int:
    """The process umask (read from ``/proc`` where possible, which changes nothing)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # no read-only way elsewhere: set, then restore at once
    os.umask(mask)
    return mask


def _file_mode() -> int:
    """Mode of a new result file: what ``open()`` would give, 0o666 less the umask.

    ``tempfile.mkstemp`` creates its files 0o600 whatever the umask; the temporary file is
    set to this mode before it is renamed into place.
    """
    return 0o666 & ~current_umask()


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_parquet(path: Path, frame: pd.DataFrame | pa.Table) -> None:
    """Write a DataFrame (or an Arrow table, e.g. one carrying its column dictionary:
    :func:`fedgame.columns.arrow_table`) as Parquet atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        if isinstance(frame, pd.DataFrame):
            frame.to_parquet(tmp, index=False)
        else:
            import pyarrow.parquet as pq

            pq.write_table(frame, tmp)
        os.chmod(tmp, _file_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def new_run_id(seed: int, replicate: int = 0) -> str:
    """``YYYYmmdd-HHMMSS.ffffff-s<seed>[-r<replicate>]-<4 hex>``: sortable and unique."""
    now = dt.datetime.now(dt.UTC).strftime("%Y%m%d-%H%M%S.%f")
    rep = f"-r{replicate}" if replicate else ""
    return f"{now}-s{seed}{rep}-{os.urandom(2).hex()}"


def git_dirty() -> bool | None:
    """Whether the fedgame checkout has uncommitted changes (None outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            cwd=Path(__file__).resolve().parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return bool(out.stdout.strip()) if out.returncode == 0 else None


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


#: the distributions whose versions a manifest records (every declared dependency)
RECORDED_PACKAGES = (
    "torch",
    "mesa",
    "numpy",
    "scipy",
    "pandas",
    "pyarrow",
    "networkx",
    "pydantic",
    "PyYAML",
    "scikit-learn",
    "dp-accounting",
    "matplotlib",
    "tqdm",
    "threadpoolctl",
)


def versions() -> dict[str, str]:
    """Versions of fedgame, Python and every dependency that can shape results.

    Read from the installed distributions' metadata (``importlib.metadata``), so nothing is
    imported; a package that is not installed is recorded as ``"not installed"``.
    """
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("fedgame", *RECORDED_PACKAGES):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    atomic_write_text(run_dir / "manifest.json", json.dumps(manifest, indent=2, default=str))


def read_manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((Path(run_dir) / "manifest.json").read_text(encoding="utf-8"))


#: what a finished run folder holds
RUN_FILES = ("rounds.parquet", "clients.parquet", "scenario.resolved.yaml", "manifest.json")


def run_folder_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` is not an intact finished run folder, or None when it is.

    Intact: a manifest that is a JSON object, every file of :data:`RUN_FILES`, and Parquet
    tables whose footers read and whose ``rounds.parquet`` holds ``rounds_completed`` rows.
    Reads only the Parquet footers, not the data.
    """
    import pyarrow.parquet as pq

    try:
        manifest = read_manifest(run_dir)
    except FileNotFoundError:
        return "no manifest.json"
    except (OSError, ValueError) as exc:
        return f"manifest.json unreadable ({exc})"
    if not isinstance(manifest, dict):
        return "manifest.json is not a JSON object"
    missing = [f for f in RUN_FILES if not (Path(run_dir) / f).is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    try:
        resolved = yaml.safe_load((Path(run_dir) / "scenario.resolved.yaml").read_text("utf-8"))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return f"scenario.resolved.yaml unreadable ({type(exc).__name__})"
    if not isinstance(resolved, dict):
        return "scenario.resolved.yaml is not a mapping"
    rows = {}
    for table in ("rounds", "clients"):
        try:
            rows[table] = pq.read_metadata(Path(run_dir) / f"{table}.parquet").num_rows
        except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
            return f"{table}.parquet unreadable ({' '.join(str(exc).split())})"
    if rows["rounds"] != manifest.get("rounds_completed"):
        return (
            f"rounds.parquet has {rows['rounds']} rows, the manifest says "
            f"{manifest.get('rounds_completed')} rounds"
        )
    return None


def result_dir_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a readable run or sweep folder for a report, or None.

    A run folder (or the newest run under ``path``) must pass :func:`run_folder_problem`; a
    sweep folder needs a ``sweep.json`` object listing its runs, a readable ``sweep.parquet``
    when there is one, and intact folders for its finished runs. A folder holding neither
    gives None too (the report itself says it found nothing).
    """
    import pyarrow.parquet as pq

    from fedgame.analysis.load import find_runs
    from fedgame.analysis.sweep import FINISHED, find_sweep
    from fedgame.errors import FedGameError

    root = Path(path)
    if not root.is_dir():
        return "not a folder"
    if not (root / "manifest.json").is_file():
        try:
            sweep_dir = find_sweep(root)
        except (FedGameError, OSError):
            sweep_dir = None
        if sweep_dir is not None:
            return _sweep_problem(sweep_dir, pq, FINISHED)
    runs = find_runs(root)
    if not runs:
        return None  # nothing to check: the report says it found neither a run nor a sweep
    problem = run_folder_problem(runs[-1])
    return f"{runs[-1]}: {problem}" if problem else None


def _sweep_problem(sweep_dir: Path, pq: Any, finished: tuple[str, ...]) -> str | None:
    try:
        info = json.loads((sweep_dir / "sweep.json").read_text(encoding="utf-8"))
        runs = info["runs"]
        ids = [str(r["run_id"]) for r in runs]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"{sweep_dir / 'sweep.json'} unreadable ({type(exc).__name__}: {exc})"
    if (sweep_dir / "sweep.parquet").is_file():
        try:
            pq.read_metadata(sweep_dir / "sweep.parquet")
        except (OSError, ValueError) as exc:
            return f"{sweep_dir / 'sweep.parquet'} unreadable ({' '.join(str(exc).split())})"
    for run_id in ids:
        run_dir = sweep_dir / "runs" / run_id
        try:
            manifest = read_manifest(run_dir)
        except (OSError, ValueError):
            continue  # not finished: the report lists it as missing
        if not isinstance(manifest, dict):
            return f"run {run_id}: manifest.json is not a JSON object"
        problem = run_folder_problem(run_dir) if manifest.get("status") in finished else None
        if problem:
            return f"run {run_id} is damaged ({problem}); rerun the sweep to repair it"
    return None
