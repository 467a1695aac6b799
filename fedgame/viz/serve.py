"""Serve the dashboard page (:mod:`fedgame.viz.app`) with Solara's Starlette app on uvicorn.

The port is bound here first, so a port in use is one ``ScenarioError`` (exit code 2 from the
CLI) before anything starts, and port 0 picks a free one. Solara's usage reporting is off and
its assets come from the ``solara-assets`` package (no CDN), so the page works offline.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sys
import warnings
from typing import Any

from fedgame.errors import ScenarioError

#: environment variable holding what the dashboard shows (JSON; read by :mod:`fedgame.viz.app`)
CONFIG_ENV = "FEDGAME_DASHBOARD"
#: Solara settings: no usage reporting, no warnings about Mesa's own components' hooks
SOLARA_ENV = {"SOLARA_TELEMETRY_MIXPANEL_ENABLE": "false", "SOLARA_CHECK_HOOKS": "off"}


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
    os.environ[CONFIG_ENV] = json.dumps(config)
    os.environ["SOLARA_APP"] = "fedgame.viz.app:Page"
    os.environ["SERVER_NAME"], os.environ["SERVER_PORT"] = host, str(actual)
    try:
        import uvicorn

        import fedgame.viz.app  # noqa: F401  (solara and Mesa's SolaraViz, before serving)
    except ImportError as exc:
        sock.close()
        raise ScenarioError(
            "dashboard", ..., f"needs the viz extra: pip install 'fedgame[viz]' ({exc})"
        ) from None

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
