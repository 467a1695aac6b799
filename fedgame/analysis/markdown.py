"""Markdown pieces of a report: tables with honest numbers, the mechanisms, the grid.

Numbers print to 4 significant digits; a value below 1e-12 of its column's scale (the larger
of 1 and the column's largest magnitude) is floating-point noise and prints as 0, so a Nash
gap of 2e-18 does not pass for data. Intervals print as ``mean [lo, hi]``, clipped to the range
the quantity can take (:mod:`fedgame.analysis.quantities`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fedgame.analysis.encoding import format_value
from fedgame.analysis.quantities import format_number, quantity

#: the plug-in families a report names, as (label, path in the resolved scenario)
FAMILIES = (
    ("incentive", ("incentive",)),
    ("policy", ("policy",)),
    ("selection", ("selection",)),
    ("privacy", ("privacy",)),
    ("aggregation", ("aggregation",)),
    ("topology", ("network", "topology")),
    ("faults", ("network", "faults")),
)


def _scale(values: pd.Series) -> float:
    numbers = pd.to_numeric(values, errors="coerce").to_numpy(float)
    finite = numbers[np.isfinite(numbers)]
    return float(np.abs(finite).max()) if finite.size else 1.0


def denoise(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """A copy of ``frame`` with floating-point noise in ``columns`` set to 0 (same rule as the
    tables), so that derived numbers (slopes, elasticities) are not computed from noise."""
    out = frame.copy()
    for c in columns:
        if c in out and out[c].dtype.kind == "f":
            tol = 1e-12 * max(1.0, _scale(out[c]))
            out[c] = out[c].mask(out[c].abs() < tol, 0.0)
    return out


def md_table(frame: pd.DataFrame, *, digits: int = 4) -> str:
    """A GitHub-flavoured Markdown table of ``frame`` (floats to ``digits`` significant,
    noise printed as 0, NaN as a dash)."""
    scales = {c: _scale(frame[c]) if frame[c].dtype.kind == "f" else 1.0 for c in frame}

    def cell(column: str, v: object) -> str:
        if isinstance(v, float | np.floating):
            return format_number(float(v), scale=scales[column], digits=digits)
        return str(v).replace("|", "\\|")

    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = [
        "| " + " | ".join(cell(c, v) for c, v in zip(frame.columns, row)) + " |"
        for row in frame.itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])


def with_ci(table: pd.DataFrame, keys: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Keys, ``n`` and each metric as ``mean [lo, hi]`` text (interval clipped to its range).

    Where fewer runs than the row's ``n`` stand behind a value (``<metric>_n``, e.g. runs
    that never reached the target or never converged), the count follows it: ``17 [1, 20]
    (2 of 4 reached)`` for ``rounds_to_target``, ``0.61 [0.5, 0.7] (3 of 4 runs)`` otherwise;
    a value no run has prints as ``– (0 of 4 reached)``.
    """
    out = readable_keys(table[[*keys, "n"]], keys)
    for m in metrics:
        q = quantity(m)
        scale = max(_scale(table[m]), _scale(table[f"{m}_lo"]), _scale(table[f"{m}_hi"]))
        lo, hi = q.clip(table[f"{m}_lo"].to_numpy()), q.clip(table[f"{m}_hi"].to_numpy())
        counts = table[f"{m}_n"] if f"{m}_n" in table else table["n"]
        cells = []
        for v, a, b, k, n in zip(table[m], lo, hi, counts, table["n"]):
            text = "–" if math.isnan(v) else format_number(v, scale=scale)
            if not (math.isnan(v) or math.isnan(a)):
                text += (
                    f" [{format_number(a, scale=scale, digits=3)}, "
                    f"{format_number(b, scale=scale, digits=3)}]"
                )
            cells.append(text + count_note(m, int(k), int(n)))
        out[m] = cells
    return out


def count_note(metric: str, k: int, n: int) -> str:
    """`` (k of n reached)`` / `` (k of n runs)`` when a value rests on fewer runs than its
    row (empty when all n stand behind it).

    >>> count_note("rounds_to_target", 2, 4), count_note("sum_rho", 3, 4), count_note("x", 4, 4)
    (' (2 of 4 reached)', ' (3 of 4 runs)', '')
    """
    if k >= n:
        return ""
    return f" ({k} of {n} reached)" if metric == "rounds_to_target" else f" ({k} of {n} runs)"


def readable_keys(frame: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """A copy of ``frame`` whose text key columns (JSON of swept sections) read compactly."""
    out = frame.copy()
    for key in keys:
        if key in out and not pd.api.types.is_numeric_dtype(out[key]):
            out[key] = out[key].map(lambda v: format_value(v, limit=None))
    return out


def column_notes(columns: Sequence[str]) -> str:
    """One line naming what each listed column measures, with its unit."""
    return "; ".join(f"`{c}`: {quantity(c).label}" for c in columns)


def _section(scenario: Mapping[str, Any], path: Sequence[str]) -> Mapping[str, Any]:
    node: Any = scenario
    for part in path:
        node = node.get(part, {}) if isinstance(node, Mapping) else {}
    return node if isinstance(node, Mapping) else {}


def _knobs(section: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """The scalar, non-null settings of a plug-in section (its ``kind`` aside); a nested
    setting (e.g. ``incentive.belief``) as dotted keys (``belief.prior.median``)."""
    out: dict[str, Any] = {}
    for k, v in section.items():
        if k == "kind" and not prefix:
            continue
        if isinstance(v, Mapping):
            out.update(_knobs(v, f"{prefix}{k}."))
        elif v is not None and isinstance(v, bool | int | float | str):
            out[f"{prefix}{k}"] = v
    return out


def _sorted(values: list[Any]) -> list[Any]:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=str)


def _merged(sections: Sequence[dict[str, Any]]) -> str:
    """``k=5`` for a knob all runs share, ``k ∈ {5, 10}`` for one that varies."""
    values: dict[str, list[Any]] = {}
    for knobs in sections:
        for k, v in knobs.items():
            if v not in values.setdefault(k, []):
                values[k].append(v)
    return ", ".join(
        f"{k}={format_value(vs[0])}"
        if len(vs) == 1
        else f"{k} ∈ {{{', '.join(format_value(v) for v in _sorted(vs))}}}"
        for k, vs in values.items()
    )


def mechanism_table(scenarios: Sequence[Mapping[str, Any]]) -> pd.DataFrame:
    """family, kind and scalar settings of each plug-in the runs use.

    A family whose kind differs between runs (it is swept) has one row per kind, in order of
    first appearance; a setting that differs is listed with all its values. A population with
    ``behaviours`` lists them (family ``behaviour``, with their shares) instead of ``policy``.
    """
    rows: dict[tuple[str, str], list[dict[str, Any]]] = {}  # (family, kind) -> knobs
    for family, path in FAMILIES:
        for scenario in scenarios:
            behaviours = _section(scenario, ("population",)).get("behaviours")
            if family == "policy" and behaviours:  # the population's behaviours replace it
                for behaviour in behaviours:
                    key = ("behaviour", _behaviour_label(behaviour))
                    knobs = _knobs({k: v for k, v in behaviour.items() if k != "name"})
                    rows.setdefault(key, []).append(knobs)
                continue
            section = _section(scenario, path)
            if "kind" in section:
                rows.setdefault((family, str(section["kind"])), []).append(_knobs(section))
    table = [
        {"family": family, "kind": kind, "settings": _merged(sections) or "–"}
        for (family, kind), sections in rows.items()
    ]
    return pd.DataFrame(table, columns=["family", "kind", "settings"])


def _behaviour_label(behaviour: Mapping[str, Any]) -> str:
    """``best_response``, or ``loyal (always)`` for a named behaviour."""
    kind, name = str(behaviour.get("kind")), behaviour.get("name")
    return f"{name} ({kind})" if name else kind


def incentive_kinds(scenarios: Sequence[Mapping[str, Any]]) -> set[str]:
    """The incentive kinds used by the runs (``none`` when a scenario names none)."""
    return {str(_section(s, ("incentive",)).get("kind", "none")) for s in scenarios}


def grid_text(grid: Mapping[str, Sequence[Any]]) -> str:
    """``population.clients ∈ {20, 40} × selection.k ∈ {5, 10}``."""
    parts = [
        f"`{k}` ∈ {{{', '.join(format_value(v, limit=None) for v in vs)}}}"
        for k, vs in grid.items()
    ]
    return " × ".join(parts) or "no swept key"
