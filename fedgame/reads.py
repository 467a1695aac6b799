"""What the built-in plug-ins read outside their own section (``register(..., reads=...)``).

The keys are dotted scenario paths; :mod:`fedgame.scenario.effects` warns about a key a
scenario sets that no chosen plug-in reads. A function here takes the plug-in's validated
config and the scenario, and gives the keys it reads with that config.
"""

from __future__ import annotations

from typing import Any

GRAPH = "network.topology"
PRIVACY_VALUE = "population.privacy_value"
STRAGGLE_PROB = "population.straggle_prob"
COLLUDERS = "population.colluders"
BUDGET_EPSILON = "population.budget.epsilon"
BUDGET = (BUDGET_EPSILON, "population.budget.delta")
COMPLETE_INFORMATION = "game.complete_information"
CARTEL = "game.cartel"

#: a privacy mechanism that charges: the budget decides who can still release
CHARGES = BUDGET
#: a distributed mechanism: the colluders' noise is known to the server
DISTRIBUTED = (*BUDGET, COLLUDERS)


def edges(config: Any, scenario: Any) -> tuple[str, ...]:
    """A fault model reads the graph when client-client edges fail (``failed_edges``)."""
    return (GRAPH,) if config.edge_failure > 0 else ()


def independent_faults(config: Any, scenario: Any) -> tuple[str, ...]:
    """Each client's straggle coin, and the graph when edges fail."""
    return (STRAGGLE_PROB, *edges(config, scenario))


def outages(config: Any, scenario: Any) -> tuple[str, ...]:
    """Regional outages read the graph (``radius`` hops); the coins read straggle_prob."""
    read = list(edges(config, scenario))
    if config.outage_prob > 0 and config.radius >= 1 and GRAPH not in read:
        read.append(GRAPH)
    if config.use_straggle_prob:
        read.append(STRAGGLE_PROB)
    return tuple(read)


def contest(config: Any, scenario: Any) -> tuple[str, ...]:
    """The contest of QI-DPFL as the leader or a follower solves it: ν, the remaining
    budgets, delivery (a straggle probability of 1 is no player), the game rules, and the
    colluders when they form a cartel."""
    read = [PRIVACY_VALUE, *BUDGET, STRAGGLE_PROB, COMPLETE_INFORMATION, CARTEL]
    if scenario.game.cartel:
        read.append(COLLUDERS)
    return tuple(read)
