"""Confidence intervals over seeds and the verdict rules of the reproduction tables.

A headline cell is the mean of one metric over independent seeds; its uncertainty is the
two-sided Student-t interval ``mean ± t_{1-α/2, n-1} · s / sqrt(n)`` (``s`` the sample standard
deviation). Two arms run on the same seeds share their data partition, budgets and noise
streams (common random numbers), so a comparison uses the *paired* interval of the per-seed
differences, which is narrower than comparing two separate intervals.

A verdict compares an interval with a paper's claim:

* ``above(diff, margin)``: the claim "A exceeds B by more than ``margin``" is ``yes`` when the
  whole interval of A - B lies above ``margin``, ``no`` when it lies below (or A - B equals
  ``margin`` on every seed), else ``inconclusive``;
* ``within(diff, tolerance)``: "A ≈ B" is ``yes`` when the interval of A - B lies inside
  ``[-tolerance, tolerance]``, ``no`` when it lies wholly outside, else ``inconclusive``;
* ``magnitude(diff, target)``: "A beats B by about ``target``" is ``yes`` when A - B is
  significantly positive and its interval reaches ``target``, ``partly`` when it is
  significantly positive but wholly below ``target`` (right sign, smaller gain), ``no`` when
  it is significantly negative, else ``inconclusive``.

With fewer than two seeds there is no interval and every verdict is ``inconclusive``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np
from scipy import stats

Verdict = Literal["yes", "partly", "no", "inconclusive"]


@dataclass(frozen=True)
class Interval:
    """Mean and two-sided t-interval of ``n`` values (``half_width`` is nan when n < 2)."""

    mean: float
    half_width: float
    n: int
    confidence: float = 0.95

    @property
    def low(self) -> float:
        """Lower end of the interval."""
        return self.mean - self.half_width

    @property
    def high(self) -> float:
        """Upper end of the interval."""
        return self.mean + self.half_width

    @property
    def defined(self) -> bool:
        """Whether the interval exists (at least two finite values)."""
        return self.n >= 2 and math.isfinite(self.half_width)

    def scaled(self, factor: float) -> Interval:
        """The same interval in other units (e.g. ``100`` for percentage points)."""
        return Interval(self.mean * factor, self.half_width * abs(factor), self.n, self.confidence)

    def format(self, digits: int = 1, *, seeds: bool = False) -> str:
        """``"36.0 ± 2.1"`` (``"36.0 ± n/a"`` with one value); ``seeds`` appends ``(n=5)``."""
        if not math.isfinite(self.mean):
            text = "n/a"
        elif self.defined:
            text = f"{self.mean:.{digits}f} ± {self.half_width:.{digits}f}"
        else:
            text = f"{self.mean:.{digits}f} ± n/a"
        return f"{text} (n={self.n})" if seeds else text


def t_interval(values: Iterable[float], confidence: float = 0.95) -> Interval:
    """Mean and Student-t interval of the finite ``values``.

    Args:
        values: one number per seed (non-finite entries are dropped).
        confidence: two-sided coverage, in (0, 1).

    Returns:
        ``Interval`` with ``half_width = t_{(1+confidence)/2, n-1} · s/sqrt(n)``; nan when
        fewer than two finite values remain, and 0 when they are all equal.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence}")
    x = np.asarray(list(values), dtype=float)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return Interval(math.nan, math.nan, 0, confidence)
    mean = float(x.mean())
    if n < 2:
        return Interval(mean, math.nan, n, confidence)
    sd = float(x.std(ddof=1))
    t = float(stats.t.ppf(0.5 + confidence / 2.0, df=n - 1))
    return Interval(mean, t * sd / math.sqrt(n), n, confidence)


def paired_difference(a: Sequence[float], b: Sequence[float], confidence: float = 0.95) -> Interval:
    """t-interval of the per-seed differences ``a[i] - b[i]`` (same seeds, same order).

    A seed whose difference is missing (NaN: a refused total) is not dropped: the whole
    interval is then undefined (mean and half-width NaN, ``n`` every seed), so every verdict
    on it is ``inconclusive``.
    """
    if len(a) != len(b):
        raise ValueError(f"paired arms need equal lengths, got {len(a)} and {len(b)}")
    diff = np.asarray(a, dtype=float) - np.asarray(b, dtype=float)
    if not np.all(np.isfinite(diff)):
        return Interval(math.nan, math.nan, int(diff.size), confidence)
    return t_interval(diff, confidence)


def above(diff: Interval, margin: float = 0.0) -> Verdict:
    """Verdict on "the difference exceeds ``margin``" from its interval."""
    if not diff.defined:
        return "inconclusive"
    if diff.low > margin:
        return "yes"
    if diff.high < margin or (diff.half_width == 0.0 and diff.mean == margin):
        return "no"  # below, or exactly at the margin on every seed (no gain at all)
    return "inconclusive"


def within(diff: Interval, tolerance: float) -> Verdict:
    """Verdict on "the difference is within ±``tolerance``" (equivalence) from its interval."""
    if tolerance < 0:
        raise ValueError(f"tolerance must be >= 0, got {tolerance}")
    if not diff.defined:
        return "inconclusive"
    if -tolerance <= diff.low and diff.high <= tolerance:
        return "yes"
    if diff.low > tolerance or diff.high < -tolerance:
        return "no"
    return "inconclusive"


def magnitude(diff: Interval, target: float) -> Verdict:
    """Verdict on "the gain is about ``target`` (> 0)": sign first, then size."""
    if target <= 0:
        raise ValueError(f"target must be > 0, got {target}")
    sign = above(diff, 0.0)
    if sign != "yes":
        return sign
    return "yes" if diff.high >= target else "partly"


def all_of(verdicts: Iterable[Verdict]) -> Verdict:
    """``no`` if any verdict is no, ``yes`` if all are yes, ``partly`` if all are yes or
    partly, else ``inconclusive``."""
    seen = list(verdicts)
    if any(v == "no" for v in seen):
        return "no"
    if seen and all(v == "yes" for v in seen):
        return "yes"
    if seen and all(v in ("yes", "partly") for v in seen):
        return "partly"
    return "inconclusive"


@dataclass(frozen=True)
class Rule:
    """A claim's verdict rule as data: its kind, threshold and the sentences the docs print.

    ``kind`` is ``above`` (threshold: the margin), ``within`` (the tolerance), ``magnitude``
    (the paper's gain) or a script's own rule (``custom`` then says all of it); ``unit`` is
    the unit of the threshold. ``scope`` says over which settings of one claim the verdicts
    combine (:func:`all_of`, :meth:`every`) and ``guards`` add conditions (:meth:`also`).
    :meth:`verdict` applies the three built-in kinds to an interval; :attr:`text` is the whole
    rule in words and :attr:`short` the compact form a table row prints (margin included).
    """

    kind: str
    threshold: float | None = None
    unit: str = "pts"
    custom: str = ""
    scope: str = ""
    guards: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in ("above", "within", "magnitude") and not self.custom:
            raise ValueError(f"a rule of kind {self.kind!r} needs its text (custom)")
        if self.kind in ("above", "within", "magnitude") and self.threshold is None:
            raise ValueError(f"a rule of kind {self.kind!r} needs its threshold")

    def _parts(self, base: str) -> str:
        scope = (
            f"; at every {self.scope}: yes if all are yes, no if any is no" if self.scope else ""
        )
        return base + scope + "".join(f"; {g}" for g in self.guards)

    @property
    def text(self) -> str:
        """The rule in words."""
        t, u = self.threshold, f" {self.unit}" if self.unit else ""
        ci = "the 95% paired t-interval of A − B over seeds"
        if self.kind == "above":
            base = (
                f"yes when {ci} lies wholly above {t:g}{u}, no when wholly below it (or A − B "
                f"= {t:g} on every seed), else inconclusive"
            )
        elif self.kind == "within":
            base = (
                f"yes when {ci} lies inside ±{t:g}{u}, no when wholly outside it, else inconclusive"
            )
        elif self.kind == "magnitude":
            base = (
                f"yes when {ci} lies wholly above 0 and reaches the paper's {t:g}{u}, partly "
                "when above 0 but wholly below it, no when wholly below 0, else inconclusive"
            )
        else:
            base = self.custom
        return self._parts(base)

    @property
    def short(self) -> str:
        """The compact form: ``A − B > 0 pts (95% CI)``, ``|A − B| < 1 pts (95% CI)``, ..."""
        t, u = self.threshold, f" {self.unit}" if self.unit else ""
        if self.kind == "above":
            base = f"A − B > {t:g}{u} (95% CI wholly above)"
        elif self.kind == "within":
            base = f"A − B within ±{t:g}{u} (95% CI wholly inside)"
        elif self.kind == "magnitude":
            base = f"A − B > 0 (95% CI) and reaching {t:g}{u}, else partly"
        else:
            base = self.custom
        return self._parts(base)

    def verdict(self, diff: Interval) -> Verdict:
        """The verdict of a built-in rule on the interval of A − B."""
        assert self.threshold is not None, self.kind
        if self.kind == "above":
            return above(diff, self.threshold)
        if self.kind == "within":
            return within(diff, self.threshold)
        if self.kind == "magnitude":
            return magnitude(diff, self.threshold)
        raise ValueError(f"rule {self.kind!r} has no built-in verdict")

    def every(self, over: str) -> Rule:
        """The same rule applied at every ``over`` (e.g. "ε"), combined by :func:`all_of`."""
        return replace(self, scope=over)

    def also(self, sentence: str) -> Rule:
        """The rule with one more condition (a guard, e.g. an arm at chance level)."""
        return replace(self, guards=(*self.guards, sentence))

    def as_dict(self) -> dict[str, object]:
        """JSON form (claims.json): kind, threshold, unit, the text and the short form."""
        return {
            "kind": self.kind,
            "threshold": self.threshold,
            "unit": self.unit,
            "text": self.text,
            "short": self.short,
        }
