"""Calibrating many ε targets on one privacy curve with few evaluations of the costly one.

Every client of a run whose releases look alike (same noise family, sampling rate, steps,
releases and δ) lies on one decreasing curve ε(z); only its target ε differs. The accountant's
own curve (``fine``) can cost a second an evaluation (a PLD at a fine loss discretisation),
while a pessimistic PLD at a coarse discretisation (``coarse``) costs milliseconds and follows
the same shape. :func:`solve_on_curve` therefore

1. samples ``ln coarse`` on a geometric grid of z spanning every target (ratio ≤ ``GRID_RATIO``)
   and interpolates it in (ln z, ln ε) with a monotone cubic (PCHIP);
2. takes the targets with the largest and the smallest ε first, then the others; for each it
   solves
   ``interp(ln z) − b(ln z) = ln(ε (1 − ``AIM``))``, where b is the gap ``interp − ln fine``
   measured at every z evaluated so far (linear in ln z, flat beyond), and evaluates ``fine``
   there;
3. accepts z when ``fine(z)`` lies in [ε (1 − ``WINDOW``), ε]: within the target (the upper
   certificate, on the accountant's own curve, which its ledger then reuses), and close to it,
   so that z / (1 + ``WINDOW`` / s) misses ε, s = −d ln ε / d ln z (about 1 or more); otherwise
   the new gap point corrects b and it tries again.

Where the curve is not strictly decreasing on the grid, a target falls outside it, or a target
needs more than ``TRIES`` evaluations, the caller falls back to its target-by-target search:
nothing here is trusted that ``fine`` did not confirm.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

#: largest ratio between neighbouring z of the coarse grid
GRID_RATIO = 1.12
#: relative precision of the searches for the grid's ends
END_RTOL = 5e-2
#: relative ε below the target that each solve aims at
AIM = 2e-4
#: an answer's ε on the accountant's curve must lie in [ε (1 − WINDOW), ε]
WINDOW = 5e-4
#: evaluations of the accountant's curve allowed per target
TRIES = 4


def solve_on_curve(
    targets: Sequence[float],
    *,
    coarse: Callable[[float], float],
    fine: Callable[[float], float],
    progress: Callable[[int], None] | None = None,
) -> list[float] | None:
    """z for each target in ``targets`` (any order), or None to fall back.

    The grid's ends come from searches of the coarse curve to ``END_RTOL`` (``search_noise``); every
    coarse value computed, theirs included, is a knot. ``progress(k)`` is called after the
    k-th target solved.
    """
    from scipy.interpolate import PchipInterpolator
    from scipy.optimize import brentq

    from fedgame.privacy.accountants.base import search_noise

    known: dict[float, float] = {}

    def sampled(z: float) -> float:
        if z not in known:
            known[z] = coarse(z)
        return known[z]

    order = sorted(range(len(targets)), key=lambda i: -targets[i])  # largest ε first
    top, bottom = targets[order[0]], targets[order[-1]]
    order = order[:1] + order[-1:] + order[1:-1] if len(order) > 2 else order  # ends first
    z_top = search_noise(sampled, epsilon=top, rtol=END_RTOL)
    z_bottom = search_noise(sampled, epsilon=bottom, rtol=END_RTOL, start=z_top, factor=1.5)
    # the searches round up, and the accountant's curve lies below the coarse one
    z_lo, z_hi = z_top / (1.0 + END_RTOL) / GRID_RATIO, z_bottom * GRID_RATIO
    n = max(4, math.ceil(math.log(z_hi / z_lo) / math.log(GRID_RATIO)) + 1)
    for z in np.geomspace(z_lo, z_hi, n).tolist():
        if all(abs(math.log(k / z)) >= math.log(GRID_RATIO) / 2 for k in known):
            sampled(z)
    knots = sorted(k for k in known if z_lo / GRID_RATIO <= k <= z_hi * GRID_RATIO)
    x = np.log(knots)
    keep = np.concatenate(([True], np.diff(x) > 1e-9))  # knots distinct in ln z
    x, eps = x[keep], np.array([known[k] for k in knots])[keep]
    if not (np.all(np.isfinite(eps)) and np.all(eps > 0) and np.all(np.diff(eps) < 0)):
        return None
    curve = PchipInterpolator(x, np.log(eps))
    gap_x: list[float] = []
    gap: list[float] = []
    out = [math.nan] * len(targets)
    for done, i in enumerate(order, start=1):
        target = float(targets[i])
        for _ in range(TRIES):
            order_x = np.argsort(gap_x)
            gx, gy = np.asarray(gap_x)[order_x], np.asarray(gap)[order_x]

            def excess(
                t: float, gx: np.ndarray = gx, gy: np.ndarray = gy, aim: float = target
            ) -> float:
                bias = float(np.interp(t, gx, gy)) if len(gx) else 0.0
                return float(curve(t)) - bias - math.log(aim * (1.0 - AIM))

            if excess(x[0]) < 0 or excess(x[-1]) > 0:
                return None
            t = brentq(excess, x[0], x[-1], xtol=1e-9)
            z = math.exp(t)
            e = fine(z)
            if not (math.isfinite(e) and e > 0):
                return None
            gap_x.append(t)
            gap.append(float(curve(t)) - math.log(e))
            if target * (1.0 - WINDOW) <= e <= target:
                out[i] = z
                break
        else:
            return None
        if progress is not None:
            progress(done)
    return out
