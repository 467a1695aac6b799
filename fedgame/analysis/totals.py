"""Totals and means over rounds of a per-round quantity, with its missing rounds explicit.

A rounds-table column is NaN in a round where it is undefined: the server cost of paper 003's
Eq. 15 has an accuracy term Σ_i 1/(ρ_i|D_i|²) that does not exist when no client delivered
(Σρ = 0), e.g. once every selected client has spent its ε budget. pandas' ``sum`` and ``mean``
skip NaN, so a plain ``rounds[col].sum()`` silently covers fewer rounds than the run had, and
two arms compared that way are compared over different rounds.

Here a missing round is never skipped. Either it is counted with a value the caller states
(``fill``: e.g. payments 0 in a round where nobody was paid), or the total is refused: the
value is NaN and ``missing`` says how many rounds lacked one. ``total = Σ_t x_t`` and
``mean = total / rounds``, over every round t of the run.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RoundTotal:
    """A total (or mean) over ``rounds`` rounds; ``missing`` of them had no value.

    ``value`` is NaN when a round was missing and no ``fill`` was given (refused); with a
    ``fill``, the missing rounds are counted at that value and ``value`` is finite.
    """

    value: float
    rounds: int
    missing: int
    fill: float | None = None

    @property
    def refused(self) -> bool:
        """Whether the total was refused (a round was missing and nothing filled it)."""
        return self.missing > 0 and self.fill is None


def _values(values: Iterable[float]) -> np.ndarray:
    return np.asarray(values if hasattr(values, "__array__") else list(values), dtype=float)


def round_total(values: Iterable[float], *, fill: float | None = None) -> RoundTotal:
    """Σ_t x_t over every round: a missing (non-finite) x_t is ``fill``, else refused (NaN).

    Args:
        values: one value per round (a rounds-table column).
        fill: the value a missing round counts as (the caller states why, e.g. 0 payments
            when nobody was paid); ``None`` refuses the total instead.
    """
    x = _values(values)
    missing = int((~np.isfinite(x)).sum())
    if missing and fill is None:
        return RoundTotal(math.nan, int(x.size), missing)
    if missing:
        x = np.where(np.isfinite(x), x, float(fill))  # type: ignore[arg-type]
    return RoundTotal(float(x.sum()), int(x.size), missing, fill)


def round_mean(values: Iterable[float], *, fill: float | None = None) -> RoundTotal:
    """(1/T) Σ_t x_t over every round, with :func:`round_total`'s missing-round rule."""
    total = round_total(values, fill=fill)
    if total.rounds == 0:
        return RoundTotal(math.nan, 0, 0, fill)
    return RoundTotal(total.value / total.rounds, total.rounds, total.missing, fill)


def first_missing_round(values: Iterable[float]) -> int | None:
    """The 1-based position of the first missing (non-finite) value, ``None`` if none."""
    x = _values(values)
    bad = np.flatnonzero(~np.isfinite(x))
    return int(bad[0]) + 1 if bad.size else None
