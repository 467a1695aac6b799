"""End the command-line process without the interpreter's teardown.

After a command, CPython's shutdown frees every module and object one by one. With torch,
pandas, Mesa and fedgame loaded that took 1.07-1.31 s (median 1.24 s, six processes) on the
2-core machine, against 0.07 s for the exit handlers and ``os._exit``; a one-round quickstart
run is about 5 s in all. :func:`end_process` does what a normal exit does that a user can
see (the ``atexit`` handlers: logging's flush, multiprocessing's clean-up, the
``weakref.finalize`` objects such as temporary folders, Ray's shutdown; then a flush of
stdout and stderr) and ends the process with ``os._exit``, skipping the teardown. It takes
the normal exit instead while another non-daemon thread runs (a normal exit waits for it),
under ``FEDGAME_FULL_EXIT=1`` (for tools that work at teardown, e.g. leak checkers), and on
an interpreter without ``atexit._run_exitfuncs`` (CPython's undocumented step that runs the
handlers).

Only the ``fedgame`` console script and ``python -m fedgame`` end this way
(:func:`fedgame.cli.script`); :func:`fedgame.cli.main` returns its exit code as before.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn

#: set to 1 for the interpreter's full shutdown
FULL_EXIT_ENV = "FEDGAME_FULL_EXIT"


def end_process(code: int) -> NoReturn:
    """Exit with ``code`` after the exit handlers and a flush, without the teardown (module
    doc); the normal ``sys.exit`` when another thread still runs or ``FEDGAME_FULL_EXIT``."""
    others = [t for t in threading.enumerate() if t is not threading.main_thread()]
    # CPython's own step of its shutdown: the registered handlers, last registered first
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    busy = any(t.is_alive() and not t.daemon for t in others)
    if os.environ.get(FULL_EXIT_ENV) == "1" or busy or run_handlers is None:
        sys.exit(code)
    run_handlers()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed pipe (`list | head`)
            stream.flush()
    os._exit(code)
