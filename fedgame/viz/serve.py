"""Serve the dashboard page (:mod:`fedgame.viz.app`) with Solara's Starlette app on uvicorn.

The port is bound here first, so a port in use is one ``ScenarioError`` (exit code 2 from the
CLI) before anything starts, and port 0 picks a free one. Solara's usage reporting is off and
its assets come from the ``solara-assets`` package (no CDN), so the page works offline, also
from a virtual environment that uses the system's packages (:func:`base_prefix_env`).
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import warnings
from pathlib import Path
from typing import Any

from fedgame.errors import ScenarioError

#: environment variable holding what the dashboard shows (JSON; read by :mod:`fedgame.viz.app`)
CONFIG_ENV = "FEDGAME_DASHBOARD"
#: Solara settings: no usage reporting, no warnings about Mesa's own components' hooks
SOLARA_ENV = {"SOLARA_TELEMETRY_MIXPANEL_ENABLE": "false", "SOLARA_CHECK_HOOKS": "off"}


def base_prefix_env() -> dict[str, str]:
    """Settings that point Solara at the front-end files of packages installed outside this
    virtual environment (one made with ``--system-site-packages``).

    Such packages keep their data files under the base interpreter's prefix, not this
    environment's: Solara's assets (``share/solara/cdn``), the Jupyter widget extensions
    (``share/jupyter``) and their configuration (``etc/jupyter``). Without them Solara fetches
    its scripts from a CDN, which fails offline. Empty outside a virtual environment, and for
    files the environment has itself.
    """
    if sys.prefix == sys.base_prefix:
        return {}
    here, base = Path(sys.prefix), Path(sys.base_prefix)
    env: dict[str, str] = {}
    cdn = "share/solara/cdn"  # Solara creates it empty here on its first start
    if _has_files(base / cdn) and not _has_files(here / cdn):
        env["SOLARA_ASSETS_PROXY_CACHE_DIR"] = str(base / cdn)
    for variable, folder, inside in (
        ("JUPYTER_PATH", "share/jupyter", "nbextensions"),
        ("JUPYTER_CONFIG_PATH", "etc/jupyter", "nbconfig"),
    ):
        if _has_files(base / folder / inside) and not _has_files(here / folder / inside):
            listed = [p for p in os.environ.get(variable, "").split(os.pathsep) if p]
            env[variable] = os.pathsep.join([*listed, str(base / folder)])
    return env


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and any(folder.iterdir())


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; ``ScenarioError`` when it cannot be had."""
    if not 0 <= port <= 65535:
        raise ScenarioError("--port", port, "a port number 0-65535 (0: any free port)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise ScenarioError("--host", host, f"a host name or address ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        why = "is in use" if exc.errno == errno.EADDRINUSE else f"cannot be used ({exc.strerror})"
        raise ScenarioError("--port", port, f"a free port; {host}:{port} {why}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(config: dict[str, Any], *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve the dashboard described by ``config`` until Ctrl-C (see :mod:`fedgame.viz.app`).

    Raises:
        ScenarioError: the port cannot be had, or the ``viz`` extra is not installed.
    """
    sock = bind(host, port)
    actual = sock.getsockname()[1]
    os.environ.update(SOLARA_ENV)
    os.environ.update(base_prefix_env())  # before Solara reads its settings on import
    os.environ[CONFIG_ENV] = json.dumps(config)
    os.environ["SOLARA_APP"] = "fedgame.viz.app:Page"
    os.environ["SERVER_NAME"], os.environ["SERVER_PORT"] = host, str(actual)
    try:
        import uvicorn

        import fedgame.viz.app  # solara and Mesa's SolaraViz, before serving
    except ImportError as exc:
        sock.close()
        raise ScenarioError(
            "dashboard", ..., f"needs the viz extra: pip install 'fedgame[viz]' ({exc})"
        ) from None

    fedgame.viz.app.prebuild(config)  # the first tab's model, while the server starts
    server = uvicorn.Server(
        uvicorn.Config("solara.server.starlette:app", log_level="warning", access_log=False)
    )
    # Solara's note that a local http page falls back to SameSite=Lax cookies (harmless here)
    warnings.filterwarnings("ignore", message="Cookies with samesite=none")
    print(f"fedgame dashboard: http://{host}:{actual}/ (Ctrl-C stops it)", flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    sys.stdout.flush()
