"""Serve the dashboard page (:mod:`fedgame.viz.app`) with Solara's Starlette app on uvicorn.

The port is bound here first, so a port in use is one ``ScenarioError`` (exit code 2 from the
CLI) before anything starts, and port 0 picks a free one. Solara's usage reporting is off and
its assets come from the ``solara-assets`` package (no CDN), so the page works offline, also
from a virtual environment that uses the system's packages (:func:`base_prefix_env`).

Start-up order: the server answers as soon as Solara is imported (its app is the light
:mod:`fedgame.viz.page`); Mesa's SolaraViz, torch and the first model load in a thread
meanwhile (:func:`fedgame.viz.page.prepare`). On a loopback address the page's scripts are
sent uncompressed: Solara compresses each file once per process at gzip level 9, about 2 s of
server CPU on the first page, for no gain on a local connection.
"""

from __future__ import annotations

import errno
import importlib.util
import ipaddress
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
#: top-level modules of the ``viz`` extra that load after the server has started (checked first)
VIZ_MODULES = ("solara", "uvicorn", "altair", "matplotlib")
#: Solara settings: no usage reporting, no warnings about Mesa's own components' hooks, no
#: "This website runs on Solara" badge (pinned to the window's corner, it covered a chart title)
SOLARA_ENV = {
    "SOLARA_TELEMETRY_MIXPANEL_ENABLE": "false",
    "SOLARA_CHECK_HOOKS": "off",
    "SOLARA_THEME_SHOW_BANNER": "false",
}


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


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (``localhost``, ``127.0.0.1``, ``::1``)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a host name
        return False


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
    if is_loopback(host):  # no compression for a local browser (see above)
        os.environ.setdefault("SOLARA_SERVER_HTTP_GZIP", "false")
    os.environ.update(base_prefix_env())  # before Solara reads its settings on import
    os.environ[CONFIG_ENV] = json.dumps(config)
    os.environ["SOLARA_APP"] = "fedgame.viz.page:Page"
    os.environ["SERVER_NAME"], os.environ["SERVER_PORT"] = host, str(actual)
    missing = [name for name in VIZ_MODULES if importlib.util.find_spec(name) is None]
    try:
        if missing:
            raise ImportError(f"no module {missing[0]!r}")
        # Solara's renders look pandas up in sys.modules (reacton.utils.import_item): it must
        # never be seen half-imported by the loading thread
        import pandas  # noqa: F401
        import solara.server.starlette  # noqa: F401  (Solara's server, before serving)
        import uvicorn
        from solara.server.app import ensure_apps_initialized

        from fedgame.viz.page import prepare
    except ImportError as exc:
        sock.close()
        raise ScenarioError(
            "dashboard", ..., f"needs the viz extra: pip install 'fedgame[viz]' ({exc})"
        ) from None

    # Solara's start-up (run once; its server's start then skips it) before the loading thread:
    # it imports the light page and patches matplotlib if it finds it in sys.modules, which
    # must not happen while the thread imports it
    ensure_apps_initialized()
    prepare(config)  # SolaraViz, torch and the first tab's model, while the server starts
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
