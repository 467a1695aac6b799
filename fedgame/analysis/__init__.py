"""Pure pandas analysis of fedgame results: load runs and sweeps, summarise them with honest
intervals and counts, find where a game settled.

* :func:`load_run`, :func:`load_sweep`, :func:`find_runs`: result folders as tidy frames;
* :func:`run_metrics`: one row per run (final accuracy, rounds to a target, payments, ε, ...);
* :func:`aggregate`: mean, 95% t-interval and the runs behind each value, per group;
* :func:`summarise`: both at once for a loaded sweep, one row per grid point;
* :func:`equilibrium_table`: the values each grid point's runs settled at (convergence
  detection), with the final accuracy beside;
* :func:`t_interval`: the Student-t interval of one list of numbers (an :class:`Interval`).
"""

from __future__ import annotations

from fedgame.analysis.equilibria import compare_incentives, equilibria
from fedgame.analysis.equilibrium import equilibrium_table
from fedgame.analysis.load import Run, find_runs, load_run
from fedgame.analysis.stats import Interval, t_interval
from fedgame.analysis.summary import aggregate, run_metrics, share_interval, summarise
from fedgame.analysis.sweep import Sweep, load_sweep

__all__ = [
    "Interval",
    "Run",
    "Sweep",
    "aggregate",
    "compare_incentives",
    "equilibria",
    "equilibrium_table",
    "find_runs",
    "load_run",
    "load_sweep",
    "run_metrics",
    "share_interval",
    "summarise",
    "t_interval",
]
