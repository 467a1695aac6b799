"""A finished run does not stay alive in the process (Mesa's agent-id counters release it)."""

from __future__ import annotations

import gc

import mesa

from fedgame.model import FedGameModel
from fedgame.run.single import simulate
from fedgame.scenario.load import validate

SCENARIO = {
    "name": "release",
    "seed": 0,
    "rounds": 1,
    "population": {"clients": 4},
    "selection": {"kind": "all"},
    "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "iid"}},
    "model": {"kind": "logreg"},
    "training": {"local_steps": 1, "batch_size": 8, "device": "cpu"},
}


def alive_models() -> int:
    gc.collect()
    return sum(isinstance(o, FedGameModel) for o in gc.get_objects())


def counted_models() -> int:
    """Models in Mesa's agent-id counters (other tests' models may be there too)."""
    return sum(isinstance(key, FedGameModel) for key in mesa.Agent.__dict__["_ids"])


def test_runs_in_one_process_do_not_accumulate_models():
    before, counted = alive_models(), counted_models()
    for seed in range(3):
        simulate(validate({**SCENARIO, "seed": seed}))
    assert alive_models() == before
    assert counted_models() == counted


def test_agent_ids_of_a_later_run_are_unchanged():
    first = simulate(validate(SCENARIO)).clients
    again = simulate(validate(SCENARIO)).clients
    assert first.equals(again)
