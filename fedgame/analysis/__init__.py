"""Pure pandas analysis of fedgame results."""

from __future__ import annotations

from fedgame.analysis.equilibria import compare_incentives, equilibria
from fedgame.analysis.load import Run, find_runs, load_run
from fedgame.analysis.sweep import Sweep, load_sweep

__all__ = [
    "Run",
    "Sweep",
    "compare_incentives",
    "equilibria",
    "find_runs",
    "load_run",
    "load_sweep",
]
