"""The page Solara serves: a light module, so the server answers before the dashboard is loaded.

Solara imports its app before it accepts a connection, and the dashboard's own module
(:mod:`fedgame.viz.app`: Mesa's SolaraViz, which brings Altair and matplotlib) and the first
model (torch, the data, the layout) take most of the start-up. This module imports only Solara:
:func:`prepare` loads the rest in a thread while the server starts and the browser fetches the
page's scripts (a separate process, so that work runs on another core), and :func:`Page` waits
for it on its first render.
"""

from __future__ import annotations

import gc
import threading
from concurrent.futures import Future
from types import ModuleType
from typing import Any

import solara

#: :mod:`fedgame.viz.app`, once :func:`prepare` has imported it (an exception if that failed)
_LOADED: Future[ModuleType] = Future()
_STARTED = threading.Event()


def prepare(config: dict[str, Any]) -> None:
    """In a thread: :mod:`fedgame.viz.app` (SolaraViz), the process's thread pools
    (``config["threads"]``, before torch loads), then the first tab's model
    (:func:`fedgame.viz.app.prebuild`)."""

    def work() -> None:
        try:
            # first, while few modules are loaded: Mesa's loggers scan every loaded module
            # for each frame of the import stack (inspect.stack), about 0.2 s more CPU when
            # torch's modules are already there
            import fedgame.viz.app as app

            # as Solara does after loading an app: what is loaded now stays for the process,
            # so the collector need not scan it again (Solara's own start-up came earlier)
            gc.collect()
            gc.freeze()
            threads = config.get("threads")
            if threads:
                from fedgame.run.threads import set_process_threads

                # before torch loads; every thread the server starts later (Solara steps
                # the model in its own) begins with these
                set_process_threads(int(threads))
            app.prebuild(config)
            _LOADED.set_result(app)
        except BaseException as exc:  # handed to the page, which raises it
            _LOADED.set_exception(exc)

    _STARTED.set()
    threading.Thread(target=work, name="fedgame-load", daemon=True).start()


def loaded() -> ModuleType:
    """:mod:`fedgame.viz.app`, waiting for :func:`prepare` (imported here without it)."""
    if not _STARTED.is_set():
        import fedgame.viz.app as app

        return app
    return _LOADED.result()


@solara.component
def Page() -> None:
    """The dashboard (:func:`fedgame.viz.app.Page`), once loaded."""
    loaded().Page()
