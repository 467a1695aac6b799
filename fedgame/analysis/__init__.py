"""Pure pandas analysis of fedgame results."""

from __future__ import annotations

from fedgame.analysis.load import Run, find_runs, load_run

__all__ = ["Run", "find_runs", "load_run"]
