"""Mixed populations: which behaviour (policy plug-in, Mesa agent type) each client follows.

``population.behaviours`` lists behaviours with shares summing to 1, or with
``population.assign`` giving each client's behaviour index; without it every client follows
the scenario's ``policy``. Shares become counts by largest remainders (Hamilton's method), and
the counts are dealt to clients by a permutation drawn from the run's ``population/behaviour``
stream, so the same scenario and seed give the same assignment.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import fedgame.registry as registry
from fedgame.errors import ScenarioError
from fedgame.game.rules import check_rules

SHARE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class BehaviourSpec:
    """A resolved behaviour: its label, policy kind and validated policy config."""

    label: str
    kind: str
    config: Any


def resolve(scenario: Any) -> tuple[BehaviourSpec, ...]:
    """Validate ``population.behaviours``/``assign`` against ``policy`` and the plug-ins.

    Also checks the ``game:`` rules against the population (a cartel needs colluders).

    Raises:
        ScenarioError: shares that do not sum to 1, an unknown behaviour, an ``assign`` list
            of the wrong length or with an unknown index, both ``policy`` and behaviours.
    """
    check_rules(scenario)
    pop = scenario.population
    entries = pop.behaviours
    if not entries:
        if pop.assign is not None:
            raise ScenarioError("population.assign", "list", "needs population.behaviours")
        kind = scenario.component("policy").kind
        return (BehaviourSpec(kind, kind, scenario.config("policy")),)
    if "policy" in scenario.model_fields_set:
        raise ScenarioError(
            "policy",
            scenario.component("policy").kind,
            "give either policy (everyone) or population.behaviours (a mix), not both",
        )
    specs = []
    kinds = [b.kind for b in entries]
    for i, entry in enumerate(entries):
        key = f"population.behaviours.{i}"
        config = registry.validate("policy", {"kind": entry.kind, **entry.params}, key=key)
        label = entry.name or (entry.kind if kinds.count(entry.kind) == 1 else f"{entry.kind}_{i}")
        specs.append(BehaviourSpec(label, entry.kind, config))
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise ScenarioError("population.behaviours", labels, "names must be distinct")
    _check_assignment(pop, len(entries))
    return tuple(specs)


def _check_assignment(pop: Any, count: int) -> None:
    shares = [b.share for b in pop.behaviours]
    if pop.assign is not None:
        if any(s is not None for s in shares):
            raise ScenarioError(
                "population.assign", "list", "give shares or an assign list, not both"
            )
        if len(pop.assign) != pop.clients:
            raise ScenarioError(
                "population.assign",
                f"list of {len(pop.assign)}",
                f"one behaviour index per client ({pop.clients})",
            )
        bad = [a for a in pop.assign if not 0 <= a < count]
        if bad:
            raise ScenarioError(
                "population.assign", bad[0], f"behaviour indices are 0..{count - 1}"
            )
        return
    if any(s is None for s in shares):
        missing = shares.index(None)
        raise ScenarioError(
            f"population.behaviours.{missing}.share",
            None,
            "every behaviour needs a share (or use population.assign)",
        )
    total = float(sum(shares))  # type: ignore[arg-type]
    if abs(total - 1.0) > SHARE_TOLERANCE:
        raise ScenarioError("population.behaviours", shares, f"shares must sum to 1, not {total:g}")


def counts(shares: list[float], n: int) -> np.ndarray:
    """Clients per behaviour: ``floor(share·n)`` plus one for the largest remainders.

    >>> counts([0.6, 0.3, 0.1], 7).tolist()
    [4, 2, 1]
    """
    exact = np.asarray(shares, dtype=float) * n
    base = np.floor(exact).astype(np.int64)
    left = n - int(base.sum())
    order = np.argsort(-(exact - base), kind="stable")
    base[order[:left]] += 1
    return base


def assignment(scenario: Any, *, rng: np.random.Generator) -> np.ndarray:
    """Each client's behaviour index (``[n]``)."""
    pop = scenario.population
    n = pop.clients
    if not pop.behaviours:
        return np.zeros(n, dtype=np.int64)
    if pop.assign is not None:
        return np.asarray(pop.assign, dtype=np.int64)
    labels = np.repeat(np.arange(len(pop.behaviours)), counts([b.share for b in pop.behaviours], n))
    return labels[rng.permutation(n)]
