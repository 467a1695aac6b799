"""Scenario keys that change nothing under the chosen plug-ins: validation names them.

Some keys matter only when a plug-in reads them: the client-client graph only when a fault
model fails graph edges or regional outages, or a privacy mechanism masks along edges; the
privacy values ν only when an incentive or a policy prices privacy; ``game.cartel`` only
when the game's leader or followers solve the contest. Each plug-in declares the keys outside
its own section that it reads (``register(family, name, reads=...)``, a fixed collection or
a function of its config and the scenario). A key of :data:`OPTIONAL` that is set to another
value than its default while no chosen plug-in reads it is *idle*: ``fedgame validate``,
``run``, ``sweep`` and ``dashboard`` print one warning line per idle key, the Python API
warns, and the run's manifest lists them under ``idle_keys``.

Under such a key the play is the same whatever its value: the same decisions, noise,
training and charges, table for table, except a column that only reports the key (the
clients' static columns, and ``utility`` = payment − ν·ε for ``privacy_value``;
``Conditional.shown_in``). ``tests/scenario/test_effects.py`` runs both values and compares.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

import fedgame.registry as registry
from fedgame.scenario.schema import COMPONENT_FAMILIES, Scenario


@dataclass(frozen=True)
class Conditional:
    """A key whose effect depends on the chosen plug-ins: who reads it, and what the tables
    still show of it when nobody does (the run's play is the same whatever its value)."""

    read_by: str
    shown_in: str = ""


#: keys whose effect depends on the chosen plug-ins
OPTIONAL: dict[str, Conditional] = {
    "network.topology": Conditional(
        "faults with edge_failure > 0 or correlated outages (radius >= 1), privacy lightdp"
    ),
    "population.privacy_value": Conditional(
        "the contest incentives (qi_dpfl, stackelberg, max, random, fixed), policies "
        "best_response, budget_aware, learning",
        "the clients' utility column (payment - nu * epsilon spent)",
    ),
    "population.straggle_prob": Conditional(
        "faults independent and correlated (use_straggle_prob), the contest incentives and policies"
    ),
    "population.colluders": Conditional("privacy ldp, smpc_dp, ideal_smpc, lightdp; game.cartel"),
    "population.budget.epsilon": Conditional(
        "every privacy mechanism but none; contest incentives, policies, selections and "
        "aggregations that weigh budgets"
    ),
    "population.budget.delta": Conditional(
        "every privacy mechanism but none; contest incentives, policies, selections and "
        "aggregations that weigh budgets"
    ),
    "game.complete_information": Conditional(
        "the contest incentives and policies best_response, budget_aware"
    ),
    "game.cartel": Conditional("the contest incentives and policies best_response, budget_aware"),
}


@dataclass(frozen=True)
class IdleKey:
    """A key set in the scenario that no chosen plug-in reads."""

    key: str
    value: str

    @property
    def message(self) -> str:
        known = OPTIONAL[self.key]
        shown = f"; only {known.shown_in} shows it" if known.shown_in else ""
        return (
            f"{self.key} is set ({self.value}) but has no effect on this run: no chosen "
            f"plug-in reads it (read by: {known.read_by}){shown}"
        )


def chosen_plugins(scenario: Scenario) -> Iterator[tuple[str, registry.Entry, Any]]:
    """``(scenario path, entry, validated config)`` of every plug-in the run builds."""
    behaviours = scenario.behaviours()
    for path, family in COMPONENT_FAMILIES.items():
        if path == "policy" and behaviours:
            continue
        yield path, registry.entry(family, scenario.component(path).kind), scenario.config(path)
    for i, spec in enumerate(behaviours):
        yield f"population.behaviours.{i}", registry.entry("policy", spec.kind), spec.config


def keys_read(scenario: Scenario) -> frozenset[str]:
    """Every scenario key the chosen plug-ins declare they read."""
    read: set[str] = set()
    for _, entry, config in chosen_plugins(scenario):
        read |= entry.keys_read(config, scenario)
    return frozenset(read)


def unread_keys(scenario: Scenario) -> list[str]:
    """The keys of :data:`OPTIONAL` that no chosen plug-in reads (set or not)."""
    read = keys_read(scenario)
    return [key for key in OPTIONAL if key not in read]


def idle_keys(scenario: Scenario) -> list[IdleKey]:
    """The unread keys of :data:`OPTIONAL` that the scenario sets to a non-default value."""
    out = []
    for key in unread_keys(scenario):
        value = set_value(scenario, key)
        if value is not None:
            out.append(IdleKey(key, value))
    return out


def set_value(scenario: Scenario, key: str) -> str | None:
    """``key``'s value in words when the scenario set it to other than its default, else None."""
    *parents, last = key.split(".")
    node: BaseModel = scenario
    for part in parents:
        node = getattr(node, part)
    if last not in node.model_fields_set:
        return None
    field = type(node).model_fields[last]
    value = getattr(node, last)
    default = field.get_default(call_default_factory=True)
    if value == default:
        return None
    return describe(value)


def describe(value: Any) -> str:
    """A value as the warning shows it (a plug-in by its kind, a distribution by its form)."""
    kind = getattr(value, "kind", None)
    if isinstance(kind, str):
        return kind
    if isinstance(value, BaseModel):
        return ", ".join(f"{k}: {v}" for k, v in value.model_dump(exclude_defaults=True).items())
    return repr(value)


def optional_key_of(key: str) -> str | None:
    """The key of :data:`OPTIONAL` that a (grid) key sets: itself or a parent of it."""
    return next((o for o in OPTIONAL if key == o or key.startswith(f"{o}.")), None)


def idle_in_sweep(grid_keys: list[str], scenarios: list[Scenario]) -> list[str]:
    """A sweep's warnings: each grid key that sets a key no run reads (its values give the
    same runs), then each other key set idle in every run."""
    if not scenarios:
        return []
    unread = [set(unread_keys(s)) for s in scenarios]
    lines = []
    swept = set()
    for key in grid_keys:
        optional = optional_key_of(key)
        if optional is None:
            continue
        swept.add(optional)
        if all(optional in u for u in unread):
            lines.append(
                f"sweep.grid {key} has no effect: no chosen plug-in reads {optional} in any "
                f"run, so its values give the same play (read by: {OPTIONAL[optional].read_by})"
            )
    idle = [{k.key: k for k in idle_keys(s)} for s in scenarios]
    for key, found in idle[0].items():
        if key not in swept and all(key in i for i in idle[1:]):
            lines.append(found.message)
    return lines
