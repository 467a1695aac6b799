"""A behaviour's batched answers (``respond_all``) equal its agents' own (``respond``).

The model asks a built-in behaviour once per round over the table's columns; asking each of
its agents in turn (the path a user's ``ClientAgent`` subclass takes) must give the same
responses and so the same rounds and clients tables, round after round.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fedgame.agents.client import answers_in_batch
from fedgame.agents.schema import STATIC_COLUMNS
from fedgame.agents.table import ClientTable
from fedgame.model import FedGameModel
from fedgame.scenario.load import validate
from fedgame.views import Response, Responses

#: one scenario per built-in policy (with the incentive and privacy its answers need)
POLICIES: dict[str, dict[str, Any]] = {
    "always": {"policy": {"kind": "always"}},
    "fixed": {"policy": {"kind": "fixed", "rho": 0.4}, "privacy": {"kind": "zcdp_gaussian"}},
    "best_response": {
        "policy": {"kind": "best_response"},
        "incentive": {"kind": "qi_dpfl"},
        "privacy": {"kind": "zcdp_gaussian"},
    },
    "budget_aware": {
        "policy": {"kind": "budget_aware"},
        "incentive": {"kind": "qi_dpfl"},
        "privacy": {"kind": "zcdp_gaussian"},
    },
    "learning": {
        "policy": {"kind": "learning"},
        "incentive": {"kind": "qi_dpfl"},
        "privacy": {"kind": "zcdp_gaussian"},
    },
    "learning_hedge": {
        "policy": {"kind": "learning", "rule": "hedge", "grid": 8},
        "incentive": {"kind": "qi_dpfl"},
        "privacy": {"kind": "zcdp_gaussian"},
    },
    "mixed": {
        "population": {
            "behaviours": [
                {"kind": "best_response", "share": 0.6},
                {"kind": "learning", "share": 0.3},
                {"kind": "fixed", "share": 0.1, "rho": 0.05},
            ]
        },
        "incentive": {"kind": "qi_dpfl"},
        "privacy": {"kind": "zcdp_gaussian"},
    },
}


def scenario(tiny: dict[str, Any], name: str) -> Any:
    """``tiny`` with the policy setting of ``name``: 30 clients, 6 rounds, tight budgets."""
    data = dict(tiny)
    for key, value in POLICIES[name].items():
        data[key] = {**data.get(key, {}), **value} if key == "population" else value
    data["rounds"] = 6
    data["population"]["clients"] = 30
    data["population"]["budget"] = {"epsilon": {"dist": "uniform", "low": 2.0, "high": 12.0}}
    data["selection"] = {"kind": "uniform", "k": 8}
    return validate(data)


def per_agent(model: FedGameModel) -> FedGameModel:
    """The same model with every behaviour asked agent by agent (``ClientAgent.respond``)."""
    model.groups = tuple(dataclasses.replace(g, batched=False) for g in model.groups)
    model.clients.materialise()
    return model


def tables(model: FedGameModel) -> tuple[pd.DataFrame, pd.DataFrame, list[Responses]]:
    """The rounds table (less wall times), the clients table and every round's answers."""
    answers = []
    while model.running:
        model.step()
        answers.append(model.table.responses())
    rounds = model.datacollector.round_frame().drop(columns=["wall_time_s"])
    return rounds, model.datacollector.client_frame(), answers


@pytest.mark.parametrize("name", list(POLICIES))
def test_batched_answers_equal_each_agents_answer(tiny, name):
    batched = FedGameModel(scenario(tiny, name))
    assert all(g.batched and answers_in_batch(g.agent_type) for g in batched.groups)
    asked_one_by_one = per_agent(FedGameModel(scenario(tiny, name)))
    rounds_a, clients_a, answers_a = tables(batched)
    rounds_b, clients_b, answers_b = tables(asked_one_by_one)
    pd.testing.assert_frame_equal(rounds_a, rounds_b)
    pd.testing.assert_frame_equal(clients_a, clients_b)
    for a, b in zip(answers_a, answers_b, strict=True):
        for column in ("ids", "participate", "epsilon", "rho"):
            np.testing.assert_array_equal(getattr(a, column), getattr(b, column))
        assert a.reason.tolist() == b.reason.tolist()
    assert clients_a["participating"].any()  # the clients did take part
    if name != "always":  # zCDP answers: the budgets played are recorded
        assert any(np.isfinite(a.rho).any() for a in answers_a)


def test_every_round_some_clients_decline_in_the_budget_case(tiny):
    """The tight budgets make some clients decline (the ``why`` reasons are exercised)."""
    _, clients, _ = tables(FedGameModel(scenario(tiny, "always")))
    assert "budget" in set(clients["decline_reason"])


masks = st.lists(st.booleans(), min_size=0, max_size=40)


def same(one: Responses, other: Responses) -> bool:
    """Equal answers, one by one (NaN budgets compare equal)."""
    return [repr(r) for r in one] == [repr(r) for r in other]


@given(masks)
def test_a_reason_for_the_decliners_reads_as_every_clients_reason(mask):
    ok = np.asarray(mask, dtype=bool)
    ids = np.arange(len(ok), dtype=np.int64) * 3
    eps = np.where(ok, 0.5, np.nan)
    full = Responses(ids, ok, eps, reason=np.where(ok, "", "budget").astype(object))
    lazy = Responses(ids, ok, eps, why="budget")
    assert same(lazy, full)
    assert lazy.reason.tolist() == full.reason.tolist()
    half = ok.copy()
    half[::2] = True
    lazy = Responses(ids, ok, eps, why="budget")
    assert same(lazy[half], full[half])
    assert same(lazy[1:], full[1:])
    for answers in (full, Responses(ids, ok, eps, why="budget")):
        positions, reasons = answers.stated_reasons()
        np.testing.assert_array_equal(positions, np.flatnonzero(~ok))
        assert np.all(np.asarray(reasons, dtype=object) == "budget")


def test_reason_and_why_together_are_refused():
    with pytest.raises(ValueError, match="not both"):
        Responses(np.arange(2), np.ones(2, bool), reason="x", why="budget")


@given(st.lists(st.booleans(), min_size=1, max_size=40), st.sampled_from(["", "budget", "x"]))
def test_recording_fresh_rows_writes_what_recording_every_row_writes(mask, why):
    ok = np.asarray(mask, dtype=bool)
    n = len(ok)
    population: dict[str, Any] = {
        name: np.full(n, "" if dtype is object else 1, dtype=dtype)
        for name, dtype in STATIC_COLUMNS.items()
    }
    population["label_counts"] = np.ones((n, 2))
    answers = Responses(np.arange(n), ok, np.where(ok, 1.0, np.nan), why=why or None)
    answers_list = Responses.of(list(answers))
    one, other = ClientTable(population), ClientTable(population)
    one.record_responses(answers, fresh=True)
    other.record_responses(answers_list)
    for name in ("participating", "decline_reason", "response_epsilon", "response_rho"):
        np.testing.assert_array_equal(one.columns[name], other.columns[name])
    assert (
        other.responses().reason.tolist()
        == [r.reason for r in answers_list]
        == [Response(i, bool(p), reason="" if p else why).reason for i, p in enumerate(ok)]
    )
