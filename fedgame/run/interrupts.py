"""Stopping on SIGINT (Ctrl-C) and SIGTERM without losing what was done.

:class:`StopOnSignal` is a context manager. While it is *armed*, the first SIGINT or SIGTERM
raises :class:`~fedgame.errors.Interrupted` (a ``KeyboardInterrupt`` carrying the signal) in
the main thread, so a run stops between two bytecodes of whatever it was computing. Raising
disarms it: from then on, and after :meth:`StopOnSignal.disarm`, signals are only recorded in
``pending``, so the code that saves the finished rounds is never cut in half by a second
Ctrl-C. Leaving the block restores the previous handlers.

A signal whose handler is ``SIG_IGN`` stays ignored (sweep workers ignore SIGINT, so a Ctrl-C
in the terminal reaches only the sweep driver, which stops them). Outside the main thread
Python cannot install handlers; there the block does nothing.
"""

from __future__ import annotations

import signal
import threading
from types import FrameType, TracebackType
from typing import Any

from fedgame.errors import Interrupted

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopOnSignal:
    """Turn SIGINT/SIGTERM into ``Interrupted`` while armed; record them once disarmed."""

    def __init__(self) -> None:
        self.armed = True
        self.pending: int | None = None
        self._saved: dict[int, Any] = {}

    def __enter__(self) -> StopOnSignal:
        if threading.current_thread() is not threading.main_thread():
            return self
        for sig in SIGNALS:
            current = signal.getsignal(sig)
            if current is signal.SIG_IGN:
                continue
            self._saved[sig] = signal.SIG_DFL if current is None else current
            signal.signal(sig, self._handle)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        for sig, handler in self._saved.items():
            signal.signal(sig, handler)
        self._saved.clear()

    def disarm(self) -> None:
        """From now on record signals instead of raising them."""
        self.armed = False

    def raise_pending(self, result: Any = None) -> None:
        """Raise ``Interrupted`` for a signal recorded while disarmed (if any)."""
        if self.pending is not None:
            raise Interrupted(self.pending, result)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.armed:
            self.armed = False
            raise Interrupted(signum)
        if self.pending is None:
            self.pending = signum


def signal_of(exc: KeyboardInterrupt) -> int:
    """The signal behind a ``KeyboardInterrupt`` (SIGINT unless it is an ``Interrupted``)."""
    return exc.signum if isinstance(exc, Interrupted) else int(signal.SIGINT)
