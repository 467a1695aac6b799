"""Golden digests of every shipped scenario's tables: refactors must not move a number.

``digest(frame)`` reduces each column to a few order-sensitive figures (NaN count, sum, sum of
absolute values, row-weighted sum; a hash for text columns), so a changed value, a reordered
row or a removed column shows, while a column a later change adds does not. The smoke test
(``tests/test_scenarios_smoke.py``) runs each scenario for 3 rounds and compares its digests
with ``tables.json`` (relative tolerance :data:`RTOL`); a change that moves results on purpose
rewrites the file with ``FEDGAME_UPDATE_GOLDEN=1 pytest tests/test_scenarios_smoke.py`` and
says in its commit which scenarios moved and why.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

GOLDEN = Path(__file__).with_name("tables.json")
#: relative tolerance: summation order may differ at the last bits, results may not
RTOL = 1e-9
#: columns that measure time, not results
TIMING_SUFFIXES = ("_s",)


def _is_timing(name: str) -> bool:
    return name.endswith(TIMING_SUFFIXES)


def digest(frame: pd.DataFrame) -> dict[str, Any]:
    """Per column: [NaN count, sum, sum |x|, sum of row-weighted x] or a text hash."""
    out: dict[str, Any] = {"__rows__": len(frame)}
    weights = np.arange(1, len(frame) + 1, dtype=float)
    for name in sorted(map(str, frame.columns)):
        if _is_timing(name):
            continue
        column = frame[name]
        if pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column):
            values = column.to_numpy(dtype=float, na_value=np.nan)
            ok = np.isfinite(values)
            out[name] = [
                int((~ok).sum()),
                float(values[ok].sum()),
                float(np.abs(values[ok]).sum()),
                float((values * weights)[ok].sum()),
            ]
        else:
            text = "\x1f".join(map(str, column.tolist()))
            out[name] = hashlib.sha256(text.encode()).hexdigest()[:16]
    return out


def differences(want: dict[str, Any], have: dict[str, Any]) -> list[str]:
    """What differs between two digests (columns of ``want`` only; ``have`` may add some)."""
    out = []
    for name, expected in want.items():
        if name not in have:
            out.append(f"{name}: missing")
            continue
        got = have[name]
        if isinstance(expected, list):
            close = len(got) == len(expected) and all(
                math.isclose(a, b, rel_tol=RTOL, abs_tol=1e-12) for a, b in zip(expected, got)
            )
            if not close:
                out.append(f"{name}: {expected} -> {got}")
        elif expected != got:
            out.append(f"{name}: {expected} -> {got}")
    return out


def load() -> dict[str, Any]:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


def updating() -> bool:
    return os.environ.get("FEDGAME_UPDATE_GOLDEN") == "1"


def record(key: str, value: dict[str, Any]) -> None:
    """Write one scenario's digests into ``tables.json`` (one writer at a time: run the smoke
    test without xdist when updating)."""
    data = load()
    data[key] = value
    GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
