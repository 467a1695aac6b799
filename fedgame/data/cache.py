"""A local cache of parsed datasets, keyed by a hash of the files they were parsed from.

Parsing Fashion-MNIST (gunzip 30 MB, scale 55 million pixels to ``[0, 1]``) takes about a
second; loading the parsed arrays back from ``.npy`` files takes about 60 ms. So the first run
on a machine parses the files once and stores the arrays under
``$FEDGAME_CACHE`` (default ``~/.cache/fedgame``) in a folder named after the SHA-256 of the
source files' bytes, the parser's version and its settings; every later run, and every sweep
worker, loads them from there. A changed source file has another hash, so a stale entry is
never read. ``FEDGAME_CACHE=off`` turns the cache off.

The cache is an optimisation only: an entry is written to a temporary folder and renamed into
place (concurrent workers cannot see half an entry), an unreadable entry is parsed again and
replaced, and a cache folder that cannot be written is skipped silently.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import numpy as np

CACHE_ENV = "FEDGAME_CACHE"
#: values of ``FEDGAME_CACHE`` that turn the cache off
OFF = ("off", "0", "none", "no", "false")
#: sources larger than this (bytes, all files together) are parsed without the cache
MAX_SOURCE_BYTES = 4 << 30


def cache_root() -> Path | None:
    """The cache folder (``$FEDGAME_CACHE`` or ``~/.cache/fedgame``), or None when off."""
    value = os.environ.get(CACHE_ENV, "").strip()
    if value.lower() in OFF:
        return None
    return Path(value).expanduser() if value else Path.home() / ".cache" / "fedgame"


def files_digest(paths: Iterable[str | Path], *, salt: str = "") -> str:
    """SHA-256 over ``salt`` and each file's name and bytes, in the order given (hex)."""
    digest = hashlib.sha256(salt.encode())
    for path in paths:
        path = Path(path)
        digest.update(path.name.encode() + b"\0")
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                digest.update(chunk)
    return digest.hexdigest()


def cached_arrays(
    kind: str,
    sources: Iterable[str | Path],
    parse: Callable[[], Mapping[str, np.ndarray]],
    *,
    version: str,
) -> dict[str, np.ndarray]:
    """The arrays ``parse()`` returns for these source files, from the cache when present.

    Args:
        kind: a short name for the entry (``fashion_mnist``), part of its folder name.
        sources: the files ``parse`` reads; their bytes key the entry.
        parse: builds the arrays (called only on a miss).
        version: the parser's version and settings; bump it when ``parse`` changes.
    """
    root = cache_root()
    files = [Path(p) for p in sources]
    if root is None or sum(f.stat().st_size for f in files) > MAX_SOURCE_BYTES:
        return dict(parse())
    entry = root / f"{kind}-{files_digest(files, salt=version)[:32]}"
    found = _read(entry)
    if found is not None:
        return found
    arrays = dict(parse())
    _write(entry, arrays)
    return arrays


def _read(entry: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a complete entry, or None (missing or unreadable: parse again)."""
    try:
        names = (entry / "arrays.txt").read_text().split()
        return {name: np.load(entry / f"{name}.npy", allow_pickle=False) for name in names}
    except (OSError, ValueError, EOFError):
        return None


def _write(entry: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Store ``arrays`` as ``entry`` (atomically; nothing happens when it cannot be written)."""
    tmp: str | None = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}.")
        for name, array in arrays.items():
            np.save(Path(tmp) / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        (Path(tmp) / "arrays.txt").write_text("\n".join(arrays))  # last: marks it complete
        if entry.exists():  # an unreadable entry from before (a complete one was read)
            shutil.rmtree(entry, ignore_errors=True)
        os.rename(tmp, entry)
        tmp = None
    except OSError:
        pass  # another worker stored it first, or the cache cannot be written
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
