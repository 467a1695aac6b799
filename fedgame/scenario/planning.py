"""Planning facts a validated scenario implies before anything is built (used by checks)."""

from __future__ import annotations

import math
from typing import Any

import fedgame.registry as registry


def planned_participations(scenario: Any) -> int:
    """Participations a client plans for: rounds × the selection's expected fraction, ≥ 1.

    The same count ``build_world`` hands to the privacy mechanism's ``epsilon_per_round``.
    """
    selection = registry.create(
        "selection", scenario.component("selection").kind, scenario.config("selection")
    )
    fraction = selection.expected_fraction(scenario.population.clients)
    return max(1, math.ceil(scenario.rounds * fraction))


def max_round_epsilon(scenario: Any, participations: int | None) -> float:
    """Largest default per-round ε any client can get: max ε_total / T."""
    t = participations or planned_participations(scenario)
    return float(scenario.population.budget.epsilon.support()[1]) / t
