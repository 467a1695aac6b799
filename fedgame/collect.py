"""What one round writes: the rounds-table row and the plug-ins' extra columns.

``round_summary`` computes the round's row in one pass over the clients (phase 10);
``round_reporters`` exposes it to Mesa's DataCollector; plug-ins add columns by declaring
``round_columns``/``client_columns`` and returning values from ``round_metrics``/
``client_metrics``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from fedgame.model import FedGameModel

ROUND_COLUMNS = (
    "test_accuracy",
    "test_loss",
    "train_loss",
    "participants",
    "selected",
    "uploaded",
    "stragglers",
    "failed_links",
    "active_clients",
    "epsilon_spent_min",
    "epsilon_spent_mean",
    "epsilon_spent_max",
    "reward_total",
    "aggregation_failed",
    "lr",
    "wall_time_s",
)


def declared_columns(components: Iterable[object]) -> tuple[list[str], list[str]]:
    """Extra columns plug-ins declare (``round_columns`` / ``client_columns`` attributes)."""
    rounds: list[str] = []
    clients: list[str] = []
    for comp in components:
        rounds += [c for c in getattr(comp, "round_columns", ()) if c not in rounds]
        clients += [c for c in getattr(comp, "client_columns", ()) if c not in clients]
    return rounds, clients


def extra_reporter(column: str) -> Callable[[Any], float]:
    return lambda obj: obj.extra.get(column, math.nan)


def round_summary(m: FedGameModel) -> dict[str, Any]:
    """The round's row, computed in one pass over the clients."""
    eps = np.fromiter((c.epsilon_spent for c in m.clients), float, len(m.clients))
    selected = [m.clients[i] for i in m.state.selection.client_ids]
    losses = [c.train_loss for c in selected if math.isfinite(c.train_loss)]
    return {
        "test_accuracy": m.test_accuracy,
        "test_loss": m.test_loss,
        "train_loss": float(np.mean(losses)) if losses else math.nan,
        "participants": sum(c.participating for c in m.clients),
        "selected": len(selected),
        "uploaded": int(m.state.uploaded.sum()),
        "stragglers": sum(c.straggled for c in selected),
        "failed_links": m.state.failed_links,
        "active_clients": sum(
            c.epsilon_after_next <= c.epsilon_total * (1 + 1e-9) for c in m.clients
        ),
        "epsilon_spent_min": float(eps.min()),
        "epsilon_spent_mean": float(eps.mean()),
        "epsilon_spent_max": float(eps.max()),
        "reward_total": float(sum(m.clients[i].reward for i in m._touched)),
        "aggregation_failed": m.state.aggregation_failed,
        "lr": m.scenario.training.lr_at(m.state.info.round - 1),
    }


def round_reporters() -> dict:
    """DataCollector model reporters: the round summary's columns, then the wall time."""
    reporters: dict[str, Any] = {
        name: (lambda m, name=name: m.summary[name]) for name in ROUND_COLUMNS[:-1]
    }
    reporters["wall_time_s"] = "round_wall_time"
    return reporters
