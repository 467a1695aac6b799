"""Exceptions raised by fedgame.

``ScenarioError`` is the one users see for bad input: it names the file, the dotted key,
the bad value and what is allowed. The CLI turns it into one line on stderr and exit code 2.
"""

from __future__ import annotations

from typing import Any


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
        """Return a copy that names ``file``."""
        return ScenarioError(self.key, self.value, self.allowed, file=file)

    def with_prefix(self, prefix: str) -> ScenarioError:
        """Return a copy whose key is nested under ``prefix``."""
        key = f"{prefix}.{self.key}" if self.key else prefix
        return ScenarioError(key, self.value, self.allowed, file=self.file)

    def render(self) -> str:
        where = f"{self.file}: " if self.file else ""
        key = f"key '{self.key}'" if self.key else "file"
        got = "" if self.value is ... else f" has value {self.value!r};"
        allowed = f" {self.allowed}" if self.allowed else ""
        return f"{where}{key}{got}{allowed}".rstrip(";")


class DivergenceError(FedGameError):
    """Training produced a non-finite loss or model; the run stops and keeps what it had."""


class BudgetExhausted(FedGameError):
    """A privacy accountant was asked to spend beyond a client's budget."""
