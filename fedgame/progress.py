"""Set-up progress: slow work before round 1 says what it is doing, once it has taken 2 s.

``simulate(progress=True)`` (``fedgame run`` without ``--quiet``) opens a :func:`setup_progress`
scope around the model's construction; code deep in the set-up (noise calibration) calls
:func:`report` with a phase and a count. Outside such a scope (``--quiet``, the Python API's
default, sweep workers) ``report`` does nothing. Within it, nothing is written until ``delay``
seconds have passed since the scope opened; then each report rewrites one stderr line in place
(``calibrating noise: 5 of 12 budgets``), ended by a newline when the phase changes (pricing
the first releases under ``rdp``: ``pricing releases: 40 of 100 noise levels``) and when the
scope closes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TextIO

#: seconds of set-up before anything is shown
DELAY_S = 2.0


class SetupProgress:
    """One in-place stderr line for the set-up phases, shown after ``delay`` seconds."""

    def __init__(self, stream: TextIO, *, delay: float = DELAY_S) -> None:
        self.stream = stream
        self.delay = delay
        self.started = time.perf_counter()
        self.width = 0  # length of the line on screen (0: nothing written)
        self.phase = ""

    def update(self, phase: str, done: int, total: int, unit: str) -> None:
        """Show ``phase: done of total unit`` if the set-up has run ``delay`` seconds."""
        if time.perf_counter() - self.started < self.delay:
            return
        line = f"{phase}: {done} of {total} {unit}"
        if self.width and phase != self.phase:  # a new phase: keep the last one's count
            self.stream.write("\n")
            self.width = 0
        self.phase = phase
        self.stream.write("\r" + line.ljust(self.width))
        self.stream.flush()
        self.width = len(line)

    def close(self) -> None:
        """End the line if one was written."""
        if self.width:
            self.stream.write("\n")
            self.stream.flush()
            self.width = 0


_current: ContextVar[SetupProgress | None] = ContextVar("fedgame_setup_progress", default=None)


@contextmanager
def setup_progress(
    enabled: bool, *, stream: TextIO | None = None, delay: float | None = None
) -> Iterator[SetupProgress | None]:
    """Scope in which :func:`report` shows set-up progress (nothing when not ``enabled``).

    ``delay`` defaults to :data:`DELAY_S`, read when the scope opens.
    """
    if not enabled:
        yield None
        return
    shown = SetupProgress(
        stream if stream is not None else sys.stderr, delay=DELAY_S if delay is None else delay
    )
    token = _current.set(shown)
    try:
        yield shown
    finally:
        _current.reset(token)
        shown.close()


def report(phase: str, done: int, total: int, unit: str = "") -> None:
    """Tell the open set-up scope (if any) that ``done`` of ``total`` items are done."""
    shown = _current.get()
    if shown is not None:
        shown.update(phase, done, total, unit)
