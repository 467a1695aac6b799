"""Whether this process may import the plug-in modules a scenario names: they are code.

A scenario's ``plugins: [my_plugins]`` makes fedgame import ``my_plugins``, which runs that
module with the rights of whoever runs fedgame: it can read and write files, patch fedgame
(its privacy accounting included) or end the process. So fedgame imports them only when told
to trust them:

* ``--trust-plugins`` on ``fedgame run``, ``validate``, ``sweep``, ``list`` and ``dashboard``;
* ``FEDGAME_TRUST_PLUGINS=1`` in the environment (the Python API, notebooks, scripts); ``0``
  or unset refuses, any other value is an error naming the variable.

Without trust a scenario that lists modules is refused (exit code 2) before any is imported.
Trust travels to the processes that run a sweep's runs (local workers inherit the
environment and are also handed it explicitly, as Ray tasks are). Entry points of installed
packages (group ``fedgame.plugins``) need no opt-in: installing a package already trusted it.

This module imports nothing heavy, so the command line can set trust before it loads any
plug-in.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from fedgame.errors import ScenarioError

#: the environment variable that trusts a scenario's plug-in modules (``1``) or not (``0``)
TRUST_ENV = "FEDGAME_TRUST_PLUGINS"
#: how a refusal tells the user to opt in
HOW = f"pass --trust-plugins (Python: set {TRUST_ENV}=1) once you have read them"


def trusted() -> bool:
    """Whether scenario plug-in modules may be imported here (``FEDGAME_TRUST_PLUGINS``)."""
    value = os.environ.get(TRUST_ENV, "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ScenarioError(
        TRUST_ENV, value, "1 (import the modules scenarios list under plugins) or 0/unset (refuse)"
    )


@contextmanager
def trusting(enabled: bool = True) -> Iterator[None]:
    """Trust scenario plug-in modules inside the block (``enabled``; else change nothing).

    Sets ``FEDGAME_TRUST_PLUGINS=1`` for the block, so processes started inside it (sweep
    workers, a local Ray) inherit the trust, and restores the variable afterwards.
    """
    if not enabled:
        yield
        return
    saved = os.environ.get(TRUST_ENV)
    os.environ[TRUST_ENV] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(TRUST_ENV, None)
        else:
            os.environ[TRUST_ENV] = saved


def require_trust(names: Sequence[str]) -> None:
    """Refuse (``ScenarioError`` on key ``plugins``) to import ``names`` without trust."""
    if names and not trusted():
        raise ScenarioError(
            "plugins",
            list(names),
            "modules a scenario lists are code that fedgame would import and run with your "
            f"rights; fedgame imports them only when trusted: {HOW}",
        )
