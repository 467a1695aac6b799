"""Exceptions raised by fedgame.

``ScenarioError`` is the one users see for bad input: it names the file, the dotted key,
the bad value and what is allowed. The CLI turns it into one line on stderr and exit code 2.
The value is rendered short (at most :data:`MAX_VALUE_CHARS` characters, nested containers
abbreviated without being expanded), so a huge or self-similar value cannot make the
message itself expensive. ``Interrupted`` is how a run learns it was asked to stop.
"""

from __future__ import annotations

import reprlib
import signal
from typing import Any

#: longest rendering of a bad value in an error message (longer ones end in "...")
MAX_VALUE_CHARS = 120

_SHORT = reprlib.Repr()
_SHORT.maxlevel = 3
_SHORT.maxlist = _SHORT.maxtuple = _SHORT.maxset = _SHORT.maxdict = 6
_SHORT.maxstring = _SHORT.maxother = MAX_VALUE_CHARS
_SHORT.maxlong = 40


def short_repr(value: Any, *, limit: int = MAX_VALUE_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters, without building the full repr.

    Containers are abbreviated by :mod:`reprlib` (a few items per level, three levels), so a
    value with millions of items, or one that refers to itself, renders in constant time.
    Newlines are escaped so the message stays on one line.
    """
    text = _SHORT.repr(value).replace("\n", "\\n").replace("\r", "\\r")
    return text if len(text) <= limit else text[: limit - 3] + "..."


class FedGameError(Exception):
    """Base class for every error fedgame raises on purpose."""


class ScenarioError(FedGameError, ValueError):
    """Invalid scenario input.

    Args:
        key: dotted path of the offending key (``"privacy.clip"``), or ``""`` for the file.
        value: the value found (``...`` when there is none, e.g. a missing key).
        allowed: what would have been accepted, in words.
        file: the scenario file, when known.
    """

    def __init__(
        self, key: str, value: Any = ..., allowed: str = "", *, file: str | None = None
    ) -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        self.file = file
        super().__init__(self.render())

    def with_file(self, file: str) -> ScenarioError:
        """Return a copy that names ``file`` (an error that already names one keeps it)."""
        return ScenarioError(self.key, self.value, self.allowed, file=self.file or file)

    def with_prefix(self, prefix: str) -> ScenarioError:
        """Return a copy whose key is nested under ``prefix``."""
        key = f"{prefix}.{self.key}" if self.key else prefix
        return ScenarioError(key, self.value, self.allowed, file=self.file)

    def render(self) -> str:
        where = f"{self.file}: " if self.file else ""
        key = f"key '{self.key}'" if self.key else "file"
        got = "" if self.value is ... else f" has value {short_repr(self.value)};"
        allowed = f" {self.allowed}" if self.allowed else ""
        return " ".join(f"{where}{key}{got}{allowed}".rstrip(";").splitlines())


class DivergenceError(FedGameError):
    """Training produced a non-finite loss or model; the run stops and keeps what it had."""


class BudgetExhausted(FedGameError):
    """A privacy accountant was asked to spend beyond a client's budget."""


class Interrupted(KeyboardInterrupt):
    """A run or sweep was stopped by a signal (Ctrl-C = SIGINT, or SIGTERM).

    A ``KeyboardInterrupt``, so code that already stops cleanly on Ctrl-C stops the same way
    on SIGTERM. ``result`` carries what the run kept (a ``RunResult``), when there is one.
    """

    def __init__(self, signum: int = signal.SIGINT, result: Any = None) -> None:
        self.signum = int(signum)
        self.result = result
        super().__init__(self.describe())

    @property
    def exit_code(self) -> int:
        """The shell's convention for a process ended by a signal: 128 + its number."""
        return 128 + self.signum

    def describe(self) -> str:
        name = signal.Signals(self.signum).name
        return "stopped by Ctrl-C (SIGINT)" if name == "SIGINT" else f"stopped by {name}"


class ResultsError(FedGameError):
    """A results folder fedgame cannot read or write (an OS error, a link, a file in the way).

    The message names the path and the problem in one line; the CLI exits with code 2.
    """

    def __init__(self, path: Any, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(" ".join(f"{self.path}: {problem}".split()))


def os_problem(exc: OSError) -> str:
    """An ``OSError`` in words, without its errno number (``Is a directory``)."""
    return str(exc.strerror or exc)
