"""How a sweep's grid points map to lines: colour, panel and line style per swept key.

Every swept key is shown, so no two grid points share a line: the first key sets the colour
(a sequential colour map for three or more numbers, distinct colours otherwise); the next
keys split the figure into panels (one per combination), so that the interval bands of a
panel do not pile up; from four keys on, the second key sets the line style (with markers past
four values) and the rest the panels. Without keys (a single run, or a sweep of replicates
only) there is one line.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from matplotlib import colormaps

from fedgame.analysis.quantities import key_labels

LINESTYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def _compact(value: Any) -> str:
    """A mapping as ``kind(knob=value, ...)``, a list as ``[a, b]``, a float to 4 digits."""
    if isinstance(value, Mapping):
        knobs = ", ".join(f"{k}={_compact(v)}" for k, v in value.items() if k != "kind")
        kind = str(value.get("kind", ""))
        return f"{kind}({knobs})" if kind and knobs else kind or f"({knobs})"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_compact(v) for v in value) + "]"
    if isinstance(value, float | np.floating):
        return f"{float(value):.4g}"
    return str(value)


def format_value(value: Any, *, limit: int | None = 24) -> str:
    """A grid value for a label, cut to ``limit`` characters (None: never).

    Floats print to 4 significant digits; mappings and lists (or their JSON text, as sweep
    tables hold them) print compactly, a plug-in section as ``kind(knob=value, ...)``.

    >>> format_value(0.30000000000000004), format_value(20), format_value('{"kind": "all"}')
    ('0.3', '20', 'all')
    >>> format_value({"kind": "emd_threshold", "quantile": 0.75, "mode": "static"})
    'emd_threshold(quantile=…'
    """
    if isinstance(value, str) and value[:1] in "{[":
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    text = _compact(value)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def _as_tuple(key: Any) -> tuple[Any, ...]:
    return key if isinstance(key, tuple) else (key,)


def describe(keys: Sequence[str], point: Sequence[Any]) -> str:
    """``name=value, ...`` for a grid point (short key names, formatted values)."""
    names = key_labels(list(keys))
    return ", ".join(f"{names[k]}={format_value(v)}" for k, v in zip(keys, point))


def split(frame: pd.DataFrame, keys: Sequence[str]) -> list[tuple[str, pd.DataFrame]]:
    """(title, rows) per combination of ``keys`` in ``frame``; one untitled part without keys."""
    if not keys:
        return [("", frame)]
    return [(describe(keys, _as_tuple(k)), g) for k, g in frame.groupby(list(keys), sort=True)]


@dataclass(frozen=True)
class GridEncoding:
    """Colour, style and panel of each grid point of ``frame`` over the swept ``keys``."""

    keys: tuple[str, ...]
    values: dict[str, list[Any]]

    @classmethod
    def of(cls, frame: pd.DataFrame, keys: Sequence[str]) -> GridEncoding:
        """The encoding of the keys present in ``frame`` (their distinct values, sorted)."""
        present = tuple(k for k in keys if k in frame)
        return cls(present, {k: sorted(frame[k].dropna().unique().tolist()) for k in present})

    @property
    def line_keys(self) -> tuple[str, ...]:
        """The keys drawn within a panel (colour, then style from four keys on)."""
        return self.keys[:2] if len(self.keys) >= 4 else self.keys[:1]

    @property
    def panel_keys(self) -> tuple[str, ...]:
        """The keys that split the figure into panels."""
        return self.keys[len(self.line_keys) :]

    @property
    def names(self) -> dict[str, str]:
        """Short readable names of the keys."""
        return key_labels(list(self.keys))

    def panels(self, frame: pd.DataFrame) -> list[tuple[str, pd.DataFrame]]:
        """(title, rows) per combination of the panel keys; one untitled panel without any."""
        return split(frame, self.panel_keys)

    def lines(self, frame: pd.DataFrame) -> Iterator[tuple[tuple[Any, ...], pd.DataFrame]]:
        """(grid point of the line keys, rows) for each line of a panel."""
        if not self.line_keys:
            yield (), frame
            return
        for key, group in frame.groupby(list(self.line_keys), sort=True):
            yield _as_tuple(key), group

    def label(self, point: Sequence[Any]) -> str:
        """The legend label of a line."""
        return describe(self.line_keys, point) or "all runs"

    def style(self, point: Sequence[Any]) -> dict[str, Any]:
        """Matplotlib keyword arguments (color, linestyle, marker) of a line."""
        out: dict[str, Any] = {"color": "C0", "linestyle": "-"}
        if self.line_keys:
            hue = self.values[self.line_keys[0]]
            out["color"] = _colour(hue, hue.index(point[0]))
        if len(self.line_keys) > 1:
            i = self.values[self.line_keys[1]].index(point[1])
            out["linestyle"] = LINESTYLES[i % len(LINESTYLES)]
            if len(self.values[self.line_keys[1]]) > len(LINESTYLES):
                out["marker"] = MARKERS[i % len(MARKERS)]
                out["markersize"] = 4
        return out


def _colour(values: list[Any], i: int) -> Any:
    numeric = all(isinstance(v, int | float | np.number) for v in values)
    if (numeric and len(values) >= 3) or len(values) > 10:
        return colormaps["viridis"](0.85 * i / max(len(values) - 1, 1))
    return f"C{i}"
