"""A phase's result with the round metrics it measured: the one convention of every family.

A plug-in's phase method (``select``, ``privatise``, ``aggregate``, ``finalise``) returns its
result, or ``(result, metrics)``: the round metrics it measured, for the ``round_columns`` it
declares. The model writes them into the round's row; the plug-in keeps nothing of the round.
"""

from __future__ import annotations

from typing import Any

__all__ = ["split_metrics"]


def split_metrics(out: Any) -> tuple[Any, dict[str, float]]:
    """A phase's ``(result, metrics)``, or a bare result with no metrics; each metric as a
    float (a 0-d tensor is read here, once the phase is over).

    >>> split_metrics((3, {"k": 1}))
    (3, {'k': 1.0})
    >>> split_metrics(3)
    (3, {})
    """
    if isinstance(out, tuple):
        result, metrics = out
        return result, {name: float(value) for name, value in metrics.items()}
    return out, {}
