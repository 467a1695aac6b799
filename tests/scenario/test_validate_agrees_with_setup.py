"""``validate`` and the model's setup agree: what validation accepts builds and plays, and
what it refuses it refuses with a scenario key, never an internal variable.

A corpus of game, belief, behaviour and cartel settings at the edges of the float range (the
ones that used to pass ``validate`` and die in round 1 with an ``OverflowError``, a
``ZeroDivisionError`` or "key 'nu' has value array([0., 0.])"), then a property test over
knob magnitudes from 1e-320 to 1e320: every scenario either fails validation with one
``ScenarioError`` on a key of the scenario, or builds a ``FedGameModel`` and plays two rounds
without an exception.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.run.single import simulate
from fedgame.scenario.load import apply_overrides, validate
from fedgame.scenario.preflight import preflight

BASE: dict[str, Any] = {
    "name": "agree",
    "seed": 2,
    "rounds": 2,
    "population": {"clients": 6, "privacy_value": {"dist": "uniform", "low": 0.5, "high": 1.5}},
    "training": {"local_steps": 1, "batch_size": 8, "device": "cpu"},
    "incentive": {"kind": "qi_dpfl"},
    "policy": {"kind": "best_response"},
    "privacy": {"kind": "zcdp_gaussian"},
    "selection": {"kind": "all"},
}
#: keys a refusal may name (the scenario's own, never a variable of the maths)
SCENARIO_KEYS = ("incentive", "population", "policy", "game", "privacy", "rounds")

OPTIMAL = {"incentive.active_set": "optimal"}
MIX = {
    "policy": None,
    "population.behaviours": [
        {"kind": "best_response", "share": 0.5},
        {"kind": "learning", "share": 0.5},
    ],
}
CARTEL = {"population.colluders": 3, "game.cartel": True}
DISCRETE_EDGES = {"kind": "discrete", "values": [1e-300, 1e300], "weights": [0.5, 0.5]}
WIDE_LOGNORMAL = {"dist": "lognormal", "mean": 0.0, "sigma": 100.0}
LEARNING_INIT_HUGE = [
    {"kind": "best_response", "share": 0.5},
    {"kind": "learning", "share": 0.5, "init": 1e300},
]
#: (id, overrides): each a setting whose derived quantities sit at an edge
CORPUS: list[tuple[str, dict[str, Any]]] = [
    ("plain", {}),
    ("prior_median_tiny", {"incentive.belief": {"prior": {"median": 1e-300}}}),
    ("prior_median_huge", {"incentive.belief": {"prior": {"median": 1e300}}}),
    ("prior_sd_huge", {"incentive.belief": {"prior": {"sd": 1e200}}}),
    ("prior_sd_tiny", {"incentive.belief": {"prior": {"sd": 1e-300}}}),
    ("prior_discrete_edges", {"incentive.belief": {"prior": DISCRETE_EDGES}}),
    ("obs_sd_tiny", {"incentive.belief": {"obs_sd": 1e-300}}),
    ("obs_sd_huge", {"incentive.belief": {"obs_sd": 1e300}}),
    ("explore_huge", {**OPTIMAL, "incentive.belief": {"explore": 1e300}}),
    ("explore_large", {**OPTIMAL, "incentive.belief": {"explore": 600.0}}),
    ("explore_sd", {**OPTIMAL, "incentive.belief": {"explore": 100.0, "prior": {"sd": 7.0}}}),
    ("phi_huge", {"incentive.phi": 1e308}),
    ("phi_large", {"incentive.phi": 1e300}),
    ("phi_tiny", {"incentive.phi": 1e-300}),
    ("lam_tiny", {"incentive.lam": 1e-300}),
    ("beta_huge", {"incentive.beta": 1e300}),
    ("clip_huge", {"incentive.clip": 1e300}),
    ("discount_tiny", {"incentive.discount": 1e-300}),
    ("gamma_tiny", {"incentive.gamma": 1e-300}),
    ("dim_huge", {"incentive.dim": 10**12}),
    ("fixed_reward_huge", {"incentive": {"kind": "fixed", "reward": 1e300}}),
    ("max_high_huge", {"incentive": {"kind": "max", "high": 1e300}}),
    ("reward_cap_tiny", {"incentive.reward_cap": 1e-300}),
    ("nu_huge", {"population.privacy_value": 1e300}),
    ("nu_tiny", {"population.privacy_value": 1e-300}),
    ("nu_lognormal_wide", {"population.privacy_value": WIDE_LOGNORMAL}),
    ("mix_phi_huge", {**MIX, "incentive.phi": 1e308}),
    ("mix_prior_sd", {**MIX, "incentive.belief": {"prior": {"sd": 1e200}}}),
    ("mix_learning_init_huge", {**MIX, "population.behaviours": LEARNING_INIT_HUGE}),
    ("cartel_phi_huge", {**CARTEL, "incentive.phi": 1e300}),
    ("cartel_prior_tiny", {**CARTEL, "incentive.belief": {"prior": {"median": 1e-300}}}),
    ("cartel_plain", CARTEL),
]


def _scenario(overrides: dict[str, Any]) -> dict[str, Any]:
    data = apply_overrides(BASE, [(k, v) for k, v in overrides.items() if v is not None])
    for key in (k for k, v in overrides.items() if v is None):
        data.pop(key)
    return data


def _validated(data: dict[str, Any]) -> Any:
    """The scenario, or the ``ScenarioError`` that ``fedgame validate`` would print."""
    try:
        scenario = validate(data)
        preflight(scenario)
    except ScenarioError as err:
        return err
    return scenario


def _agrees(data: dict[str, Any]) -> None:
    found = _validated(data)
    if isinstance(found, ScenarioError):
        assert found.key.split(".")[0] in SCENARIO_KEYS, str(found)
        return
    with warnings.catch_warnings():  # an overflow or 0/0 on the way is a failure too
        warnings.simplefilter("error", RuntimeWarning)
        result = simulate(found)  # builds the model and plays every round
    # a run whose training diverges stops as documented (exit code 3), which is a correct run
    assert result.manifest["status"] in ("completed", "diverged", "degenerate")


@pytest.mark.parametrize(("case", "overrides"), CORPUS, ids=[c for c, _ in CORPUS])
def test_validate_and_setup_agree_on_the_corpus(case, overrides):
    _agrees(_scenario(overrides))


def test_the_corpus_holds_refusals_and_runs():
    """Both outcomes occur, so the corpus tests the agreement, not only one side of it."""
    outcomes = [isinstance(_validated(_scenario(o)), ScenarioError) for _, o in CORPUS]
    assert sum(outcomes) >= 15 and len(outcomes) - sum(outcomes) >= 6


magnitudes = st.sampled_from([1e-320, 1e-300, 1e-200, 1e-100, 1e-8, 1.0, 1e8, 1e100, 1e200,
                              1e300, 1e308])  # fmt: skip
KNOBS = ("phi", "beta", "lam", "clip", "gamma", "discount", "median", "sd", "obs_sd", "explore")


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(st.dictionaries(st.sampled_from(KNOBS), magnitudes, min_size=1, max_size=3))
def test_validate_and_setup_agree_on_random_magnitudes(knobs):
    incentive: dict[str, Any] = {"kind": "qi_dpfl", "active_set": "optimal"}
    belief: dict[str, Any] = {"prior": {}}
    for knob, value in knobs.items():
        if knob in ("median", "sd"):
            belief["prior"][knob] = value
        elif knob in ("obs_sd", "explore"):
            belief[knob] = value
        elif knob in ("gamma", "discount"):
            incentive[knob] = min(value, 0.99)
        else:
            incentive[knob] = value
    if any(k in knobs for k in ("median", "sd", "obs_sd", "explore")):
        incentive["belief"] = belief
    data = {**BASE, "incentive": incentive}
    assert not any(math.isnan(v) for v in knobs.values())
    _agrees(data)
