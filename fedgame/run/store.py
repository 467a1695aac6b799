"""Run folders: Parquet tables, resolved scenario and manifest, each written atomically.

Layout: ``<out>/<scenario name>/<run-id>/`` with ``rounds.parquet``, ``clients.parquet``,
``scenario.resolved.yaml`` and ``manifest.json``. Each file is written to a temporary name in
the same folder and renamed into place, so a reader never sees a half-written file; the
manifest is written last, its ``status`` says whether the run completed and its ``files``
give each other file's size and SHA-256, so a table that is not the one the run wrote (copied
from another run, edited) is recognised.

Below the results folder the user named (``--out``/``output.dir``) fedgame writes only into
real folders it finds or creates (:func:`make_folders`): a symbolic link or a file where a
folder belongs is refused, and a renamed-into-place file replaces a link rather than writing
through it, so no write lands outside. Every ``OSError`` while writing is a
:class:`~fedgame.errors.ResultsError` naming the path (the CLI: one line, exit code 2).
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import os
import platform
import stat
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import yaml

from fedgame.errors import ResultsError, os_problem
from fedgame.run.paths import make_folders as make_folders  # re-exported
from fedgame.run.paths import not_a_plain_file as not_a_plain_file
from fedgame.run.paths import not_a_real_folder as not_a_real_folder

#: largest manifest.json read (a manifest is a few KiB; a traceback or warnings add some)
MAX_MANIFEST_BYTES = 16 << 20

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


def _sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def atomic_write_bytes(path: Path, data: bytes) -> dict[str, Any]:
    """Write ``data`` to ``path`` via a temporary file and ``os.replace``; returns its
    ``{"bytes", "sha256"}``. An ``OSError`` is a ``ResultsError`` naming ``path``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ResultsError(path, f"cannot be written ({os_problem(exc)})") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
            os.fchmod(fh.fileno(), _file_mode())
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ResultsError(path, f"cannot be written ({os_problem(exc)})") from None
        raise
    return {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def atomic_write_text(path: Path, text: str) -> dict[str, Any]:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_parquet(path: Path, frame: pd.DataFrame | pa.Table) -> dict[str, Any]:
    """Write a DataFrame (or an Arrow table, e.g. one carrying its column dictionary:
    :func:`fedgame.columns.arrow_table`) as Parquet atomically; returns the file's
    ``{"bytes", "sha256"}``."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as exc:
        raise ResultsError(path, f"cannot be written ({os_problem(exc)})") from None
    try:
        if isinstance(frame, pd.DataFrame):
            frame.to_parquet(tmp, index=False)
        else:
            import pyarrow.parquet as pq

            pq.write_table(frame, tmp)
        os.chmod(tmp, _file_mode())
        written = {"bytes": os.path.getsize(tmp), "sha256": _sha256_file(tmp)}
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ResultsError(path, f"cannot be written ({os_problem(exc)})") from None
        raise
    return written


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
    imported; a package that is not installed is recorded as ``"not installed"``. Read once
    per process (each distribution's metadata is a file to parse, about 0.2 s for all of them,
    which a serial sweep would otherwise pay every run); each call returns a fresh dict.
    """
    return dict(_versions())


@functools.cache
def _versions() -> dict[str, str]:
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


def write_run_files(
    run_dir: Path,
    *,
    rounds: pd.DataFrame | pa.Table,
    clients: pd.DataFrame | pa.Table,
    scenario: Mapping[str, Any],
    manifest: dict[str, Any],
) -> None:
    """Write a run's tables and resolved scenario into ``run_dir`` (an existing folder), then
    its manifest, which records each file's size and SHA-256 under ``files``."""
    manifest["files"] = {
        "rounds.parquet": atomic_write_parquet(run_dir / "rounds.parquet", rounds),
        "clients.parquet": atomic_write_parquet(run_dir / "clients.parquet", clients),
        "scenario.resolved.yaml": atomic_write_text(
            run_dir / "scenario.resolved.yaml", yaml.safe_dump(dict(scenario), sort_keys=False)
        ),
    }
    write_manifest(run_dir, manifest)


def read_json_file(path: Path, *, limit: int = MAX_MANIFEST_BYTES) -> Any:
    """The JSON in ``path``, a regular file of at most ``limit`` bytes (``OSError`` when it is
    missing or not a regular file, ``ValueError`` when too large or not JSON)."""
    with open(path, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise OSError(f"{path.name} is not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return json.loads(data.decode("utf-8"))


def read_manifest(run_dir: Path) -> dict[str, Any]:
    return read_json_file(Path(run_dir) / "manifest.json")  # type: ignore[no-any-return]


#: what a finished run folder holds
RUN_FILES = ("rounds.parquet", "clients.parquet", "scenario.resolved.yaml", "manifest.json")
#: manifest fields a reader relies on, with the JSON types each may have (None: null)
MANIFEST_TYPES: dict[str, tuple[type | None, ...]] = {
    "status": (str,),
    "rounds_completed": (int,),
    "rounds_planned": (int, None),
    "scenario": (str, None),
    "run_id": (str, None),
    "seed": (int, None),
    "replicate": (int, None),
    "device": (str, None),
    "message": (str, None),
    "final_test_accuracy": (float, int, None),
    "warnings": (dict, None),
    "degenerate_rounds": (int, None),
    "idle_keys": (dict, None),
    "files": (dict,),
}
#: fields a finished run's manifest must have
MANIFEST_REQUIRED = ("status", "rounds_completed")
#: columns a reader (report, dashboard, sweep table) needs, by table, with their kind
TABLE_COLUMNS: dict[str, dict[str, str]] = {
    "rounds": {
        "round": "integer",
        "test_accuracy": "number",
        "participants": "number",
        "uploaded": "number",
        "epsilon_spent_mean": "number",
        "epsilon_spent_max": "number",
    },
    "clients": {"round": "integer", "client_id": "integer", "epsilon_spent": "number"},
}


def manifest_problem(manifest: Any) -> str | None:
    """Why ``manifest`` is not a finished run's manifest a reader can use, or None."""
    if not isinstance(manifest, dict):
        return "manifest.json is not a JSON object"
    for name in MANIFEST_REQUIRED:
        if name not in manifest:
            return f"manifest.json lacks {name!r}"
    for name, kinds in MANIFEST_TYPES.items():
        if name not in manifest:
            continue
        value = manifest[name]
        if not any(_has_type(value, kind) for kind in kinds):
            allowed = " or ".join("null" if k is None else k.__name__ for k in kinds)
            return f"manifest.json field {name!r} is {_short(value)}, not {allowed}"
    if manifest["rounds_completed"] < 0:
        return f"manifest.json field 'rounds_completed' is {manifest['rounds_completed']}, < 0"
    files = manifest.get("files", {})
    for name in RUN_FILES[:-1]:
        entry = files.get(name)
        if name in files and not (
            isinstance(entry, dict)
            and isinstance(entry.get("sha256"), str)
            and isinstance(entry.get("bytes"), int)
        ):
            return f"manifest.json field 'files.{name}' is not {{bytes, sha256}}"
    return None


def _has_type(value: Any, kind: type | None) -> bool:
    """JSON typing: None is null; a bool is not an int."""
    if kind is None:
        return value is None
    return isinstance(value, kind) and not (isinstance(value, bool) and kind is not bool)


def _head_text(path: Path, limit: int = MAX_MANIFEST_BYTES) -> str:
    """A regular file's text, refused (``ValueError``) past ``limit`` bytes."""
    with open(path, "rb") as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"{path.name} is larger than {limit} bytes")
    return data.decode("utf-8")


def _short(value: Any) -> str:
    from fedgame.errors import short_repr

    return short_repr(value, limit=60)


def table_problem(path: Path, table: str) -> str | None:
    """Why the Parquet file ``path`` is not a ``table`` table (:data:`TABLE_COLUMNS`: required
    columns and their kinds), from its schema alone; None when it is."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        schema = pq.read_schema(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        return f"{path.name} unreadable ({' '.join(str(exc).split())})"
    for column, kind in TABLE_COLUMNS[table].items():
        if column not in schema.names:
            return f"{path.name} has no column {column!r} (not a fedgame {table} table)"
        dtype = schema.field(column).type
        fits = pa.types.is_integer(dtype) or (kind == "number" and pa.types.is_floating(dtype))
        if not fits:
            return f"{path.name} column {column!r} holds {dtype}, not {kind}s"
    return None


def file_hash_problem(run_dir: Path, manifest: Mapping[str, Any]) -> str | None:
    """Why a file of ``run_dir`` is not the one its manifest's ``files`` describes (size,
    then SHA-256), or None (also for a manifest written before fedgame recorded them)."""
    for name, entry in (manifest.get("files") or {}).items():
        if name not in RUN_FILES[:-1]:
            continue
        path = Path(run_dir) / name
        try:
            size = os.path.getsize(path)
            same = size == entry["bytes"] and _sha256_file(path) == entry["sha256"]
        except OSError as exc:
            return f"{name} unreadable ({os_problem(exc)})"
        if not same:
            return (
                f"{name} is not the file this run wrote (its size or SHA-256 differs from the "
                "manifest's; copied from another run or edited?)"
            )
    return None


def run_folder_problem(run_dir: Path) -> str | None:
    """Why ``run_dir`` is not an intact finished run folder, or None when it is.

    Intact: a manifest that is a JSON object whose fields have their types
    (:func:`manifest_problem`), every file of :data:`RUN_FILES` a regular file, each the file
    the manifest's ``files`` describes (size and SHA-256, when recorded), and Parquet tables
    whose footers read, whose ``rounds.parquet`` holds ``rounds_completed`` rows and whose
    schemas have the columns readers need (:data:`TABLE_COLUMNS`). The hashes read every
    file once; the Parquet checks read only footers.
    """
    import pyarrow.parquet as pq

    try:
        manifest = read_manifest(run_dir)
    except FileNotFoundError:
        return "no manifest.json"
    except (OSError, ValueError) as exc:
        return f"manifest.json unreadable ({' '.join(str(exc).split())})"
    problem = manifest_problem(manifest)
    if problem:
        return problem
    missing = [f for f in RUN_FILES if not (Path(run_dir) / f).is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    odd = [f for f in RUN_FILES if not_a_plain_file(Path(run_dir) / f)]
    if odd:
        return f"{', '.join(odd)} not a regular file (a link?)"
    try:
        resolved = yaml.safe_load(_head_text(Path(run_dir) / "scenario.resolved.yaml"))
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
    servers = len(resolved.get("servers") or ()) or 1  # a market: one row per server
    if rows["rounds"] != (manifest.get("rounds_completed") or 0) * servers:
        return (
            f"rounds.parquet has {rows['rounds']} rows, the manifest says "
            f"{manifest.get('rounds_completed')} rounds"
        )
    for table in ("rounds", "clients"):
        problem = table_problem(Path(run_dir) / f"{table}.parquet", table)
        if problem:
            return problem
    return file_hash_problem(run_dir, manifest)


def result_dir_problem(path: str | Path) -> str | None:
    """Why ``path`` is not a readable run or sweep folder for a report, or None.

    A run folder (or the newest run under ``path``) must pass :func:`run_folder_problem`; a
    sweep folder needs a ``sweep.json`` describing its plan (:func:`sweep_info_problem`), a
    ``sweep.parquet`` with the columns a report reads when there is one, and intact folders
    for its finished runs. A folder holding neither has that problem too.
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
    try:
        runs = find_runs(root)
    except OSError as exc:
        return f"cannot be listed ({os_problem(exc)})"
    if not runs:
        return "it holds no results: neither a run folder (manifest.json) nor a sweep (sweep.json)"
    problem = run_folder_problem(runs[-1])
    return f"{runs[-1]}: {problem}" if problem else None


#: a run id in a sweep plan: one folder name (no separator, not ``.`` or ``..``)
_RUN_ID_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")


def sweep_info_problem(info: Any) -> str | None:
    """Why ``info`` (sweep.json) is not a sweep plan a reader can use, or None: an object with
    ``runs`` (a list of ``{run_id: folder name, replicate: int, point: object}``) and, when
    present, ``grid`` (an object of lists), ``replicates`` (int) and ``name`` (text)."""
    if not isinstance(info, dict):
        return "is not a JSON object"
    runs = info.get("runs")
    if not isinstance(runs, list):
        return "field 'runs' is not a list of runs"
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            return f"runs[{i}] is not an object"
        run_id = run.get("run_id")
        if (
            not isinstance(run_id, str)
            or not run_id
            or run_id in (".", "..")
            or not set(run_id) <= _RUN_ID_CHARS
        ):
            return f"runs[{i}].run_id is {_short(run_id)}, not a folder name"
        if not isinstance(run.get("replicate"), int) or isinstance(run.get("replicate"), bool):
            return f"runs[{i}].replicate is {_short(run.get('replicate'))}, not an integer"
        if not isinstance(run.get("point", {}), dict):
            return f"runs[{i}].point is {_short(run.get('point'))}, not an object"
    grid = info.get("grid", {})
    if not isinstance(grid, dict) or not all(isinstance(v, list) for v in grid.values()):
        return "field 'grid' is not an object of value lists"
    replicates = info.get("replicates", 1)
    if not isinstance(replicates, int) or isinstance(replicates, bool):
        return f"field 'replicates' is {_short(replicates)}, not an integer"
    if not isinstance(info.get("name", ""), str):
        return f"field 'name' is {_short(info.get('name'))}, not text"
    return None


def _sweep_table_problem(path: Path, keys: list[str], pq: Any) -> str | None:
    """``sweep.parquet``: readable, with the rounds columns, the ids and the swept keys."""
    problem = table_problem(path, "rounds")
    if problem:
        return problem
    names = pq.read_schema(path).names
    missing = [c for c in ("run_id", "replicate", "status", *keys) if c not in names]
    if missing:
        return f"{path.name} has no column {missing[0]!r} (not this sweep's table)"
    return None


def _sweep_problem(sweep_dir: Path, pq: Any, finished: tuple[str, ...]) -> str | None:
    try:
        info = read_json_file(sweep_dir / "sweep.json")
    except (OSError, ValueError) as exc:
        return f"{sweep_dir / 'sweep.json'} unreadable ({' '.join(str(exc).split())})"
    problem = sweep_info_problem(info)
    if problem:
        return f"{sweep_dir / 'sweep.json'} unreadable ({problem})"
    ids = [str(r["run_id"]) for r in info["runs"]]
    table = sweep_dir / "sweep.parquet"
    if os.path.lexists(table):
        odd = not_a_plain_file(table)
        problem = odd or _sweep_table_problem(table, list(info.get("grid", {})), pq)
        if problem:
            return f"{table} unreadable ({problem})"
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
