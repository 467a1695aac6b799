"""The dashboard's knobs: the main scenario keys as SolaraViz inputs, and what moving them means.

Each knob is a dotted scenario key shown as a slider or a choice, starting at the scenario's
own value. A knob whose key the scenario's plug-ins do not have (``selection.k`` for a rule
without ``k``, ``link_failure`` for a fault model without it) is not offered. The knobs follow
the reward kind chosen on the page: the γ knob shows while that kind has γ (not under
``incentive: none``); it starts at the scenario's γ, or at 0.5 when the scenario's incentive
has none (the default of every shipped reward kind), and keeps its value while hidden. The
kind and γ come last, so that γ comes and goes without moving the others. A knob left at its
starting value changes nothing, so a scenario that draws a key from a distribution (e.g.
``straggle_prob: {dist: uniform, ...}``) keeps it until the knob is moved (the slider starts
at the middle of its range); a moved knob sets that key to a constant for every client.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import fedgame.registry as registry
from fedgame.agents.population import Constant
from fedgame.scenario.schema import Scenario

INCENTIVE_KIND = "incentive.kind"
GAMMA = "incentive.gamma"
#: where a hidden γ knob stands (an incentive without γ), and γ of a kind without a default
GAMMA_FALLBACK = 0.5


@dataclass(frozen=True)
class Knob:
    """One input: a dotted scenario ``key``, its label and range, and its starting value."""

    key: str
    label: str
    value: Any
    low: float = 0.0
    high: float = 1.0
    step: float = 1.0
    choices: tuple[str, ...] = ()
    #: whether the page offers it (γ under an incentive without γ is not shown)
    shown: bool = True

    @property
    def keyword(self) -> str:
        """The key as a model keyword (``population.clients`` -> ``population__clients``)."""
        return self.key.replace(".", "__")

    def param(self) -> dict[str, Any]:
        """The SolaraViz ``model_params`` entry of this knob."""
        if self.choices:
            return {"type": "Select", "label": self.label, "value": self.value,
                    "values": list(self.choices)}  # fmt: skip
        kind = "SliderInt" if isinstance(self.value, int) else "SliderFloat"
        return {"type": kind, "label": self.label, "value": self.value,
                "min": self.low, "max": self.high, "step": self.step}  # fmt: skip


def _typical(dist: Any, low: float, high: float) -> float:
    """A distribution's constant, or the middle of its support clipped to [low, high]."""
    if isinstance(dist, Constant):
        return float(dist.value)
    lo, hi = dist.support()
    return float(min(max((max(lo, low) + min(hi, high)) / 2, low), high))


def _has(scenario: Scenario, path: str, field: str) -> bool:
    """Whether the plug-in at ``path`` declares ``field`` in its ``Config``."""
    return field in type(scenario.config(path)).model_fields


def gamma_start(scenario: Scenario, kind: str) -> float | None:
    """The γ that leaves ``kind`` as configured (a γ knob at another value is applied): the
    scenario's γ when its incentive has one, else ``kind``'s default; ``None`` when ``kind``
    has no γ."""
    field = registry.entry("incentive", kind).config.model_fields.get("gamma")
    if field is None:
        return None
    if _has(scenario, "incentive", "gamma"):
        return float(scenario.config("incentive").gamma)
    return float(field.default) if isinstance(field.default, (int, float)) else GAMMA_FALLBACK


def knobs(scenario: Scenario, kind: str | None = None) -> list[Knob]:
    """The knobs this scenario offers, each starting at the scenario's value, with the reward
    ``kind`` chosen on the page (default: the scenario's own)."""
    pop = scenario.population
    n, rounds = pop.clients, scenario.rounds
    out = [
        Knob("population.clients", "clients N", n, 2, max(200, n), 1),
        Knob("rounds", "rounds T", rounds, 1, max(100, rounds), 1),
    ]
    if _has(scenario, "selection", "k"):
        k = int(scenario.config("selection").k)
        out.append(Knob("selection.k", "selected per round k", k, 1, max(50, k), 1))
    out.append(
        Knob("population.straggle_prob", "straggle probability",
             round(_typical(pop.straggle_prob, 0.0, 0.9), 3), 0.0, 0.9, 0.01)
    )  # fmt: skip
    if _has(scenario, "network.faults", "link_failure"):
        fail = float(scenario.config("network.faults").link_failure)
        out.append(Knob("network.faults.link_failure", "link failure", fail, 0.0, 0.9, 0.01))
    eps = round(_typical(pop.budget.epsilon, 0.5, 200.0), 2)
    out.append(Knob("population.budget.epsilon", "ε budget per client", eps, 0.5, 200.0, 0.5))
    out.append(Knob("seed", "seed", scenario.seed, 0, max(100, scenario.seed), 1))
    # last, so that the knobs of the chosen kind come and go without moving the others
    kinds = tuple(registry.names("incentive"))
    out.append(Knob(INCENTIVE_KIND, "reward (incentive)", scenario.incentive.kind, choices=kinds))
    gamma = gamma_start(scenario, kind or scenario.incentive.kind)
    shown = gamma is not None
    gamma = gamma if gamma is not None else gamma_start_hidden(scenario)
    out.append(Knob(GAMMA, "γ (incentive)", gamma, 0.05, 0.95, 0.05, shown=shown))
    return out


def gamma_start_hidden(scenario: Scenario) -> float:
    """Where a hidden γ knob stands: the scenario's γ if it has one, else the fallback."""
    if _has(scenario, "incentive", "gamma"):
        return float(scenario.config("incentive").gamma)
    return GAMMA_FALLBACK


def model_params(scenario: Scenario, kind: str | None = None) -> dict[str, Any]:
    """SolaraViz ``model_params``: the scenario (fixed) and one input per knob shown under the
    reward ``kind`` chosen on the page (default: the scenario's own)."""
    shown = [k for k in knobs(scenario, kind) if k.shown]
    return {"scenario": scenario, **{k.keyword: k.param() for k in shown}}


def overrides(scenario: Scenario, values: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The scenario keys (keyword form) that the knob ``values`` change, and notes.

    ``values`` maps knob keywords to what the inputs show; a value equal to the knob's start
    changes nothing (γ's start is the one under the chosen kind, :func:`gamma_start`).
    Choosing another reward kind replaces the ``incentive`` section by that kind with the
    settings it shares with the old one (and γ when it has one); γ alone is applied only to
    an incentive that has it (else a note says so).
    """
    chosen = values.get(INCENTIVE_KIND.replace(".", "__"), scenario.incentive.kind)
    if chosen not in registry.names("incentive"):
        chosen = scenario.incentive.kind  # an unknown kind is refused below, by validation
    changed = {
        knob.key: values[knob.keyword]
        for knob in knobs(scenario, str(chosen))
        if knob.keyword in values and values[knob.keyword] != knob.value
    }
    notes: list[str] = []
    keys = {k.replace(".", "__"): v for k, v in changed.items() if k not in (INCENTIVE_KIND, GAMMA)}
    if INCENTIVE_KIND in changed or GAMMA in changed:
        kind = str(changed.get(INCENTIVE_KIND, scenario.incentive.kind))
        fields = registry.entry("incentive", kind).config.model_fields
        section = {"kind": kind}
        if kind == scenario.incentive.kind or INCENTIVE_KIND not in changed:
            section.update(scenario.incentive.params)
        else:
            section.update({k: v for k, v in scenario.incentive.params.items() if k in fields})
        if GAMMA in changed:
            if "gamma" in fields:
                section["gamma"] = changed[GAMMA]
            else:
                notes.append(f"γ not applied: incentive {kind!r} has no γ")
        keys["incentive"] = section
    return keys, notes
