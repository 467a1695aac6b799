"""Invariants of per-client accounting, and bad input refused with exit code 2."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from helpers_dp import scenario
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgame.privacy.base import Charge
from fedgame.privacy.ledger import PrivacyLedger

CHARGES = {
    "rdp": lambda z: Charge("gaussian", noise_multiplier=z),
    "zcdp": lambda z: Charge("gaussian", noise_multiplier=z),
    "basic": lambda z: Charge("laplace", epsilon=1.0 / z, noise_multiplier=1.0 / z),
}


@settings(max_examples=25, deadline=None)
@given(
    kind=st.sampled_from(sorted(CHARGES)),
    zs=st.lists(st.floats(0.5, 20.0), min_size=1, max_size=6),
    bump=st.floats(1.05, 3.0),
)
def test_epsilon_spent_non_decreasing_in_rounds_and_decreasing_in_sigma(kind, zs, bump):
    less, more = PrivacyLedger(kind, [1e-5]), PrivacyLedger(kind, [1e-5])
    prev = 0.0
    for z in zs:
        less.charge(0, CHARGES[kind](z))
        more.charge(0, CHARGES[kind](z * bump))
        now = less.epsilon(0)
        assert now >= prev - 1e-12
        prev = now
        assert more.epsilon(0) < now  # more noise, less epsilon spent


MECHANISMS = [
    {"kind": "gaussian_local"},
    {"kind": "gaussian_local", "calibration": "classic"},
    {"kind": "gaussian_local", "calibration": "dpfl_bcs", "c2": 3.0},
    {"kind": "laplace_local"},
    {"kind": "central_gaussian"},
    {"kind": "central_gaussian", "noise_multiplier": 0.8},
]


@pytest.mark.filterwarnings("ignore:classic Gaussian")
@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    mech=st.sampled_from(MECHANISMS),
    low=st.floats(0.2, 3.0),
    span=st.floats(0.0, 5.0),
    rounds=st.integers(2, 4),
    planned=st.integers(1, 2),
    seed=st.integers(0, 1000),
)
def test_no_client_ever_exceeds_its_budget(tiny, mech, low, span, rounds, planned, seed):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    data = copy.deepcopy(tiny)  # the fixture is shared by examples: never mutate it
    data.update(seed=seed, rounds=rounds, privacy={**mech, "participations": planned})
    data["population"]["clients"] = 8
    data["population"]["budget"]["epsilon"] = {"dist": "uniform", "low": low, "high": low + span}
    data["selection"] = {"kind": "uniform", "k": 6}
    clients = simulate(validate(data)).clients
    assert (clients["epsilon_spent"] <= clients["epsilon_total"] * (1 + 1e-9)).all()
    # once a client declines for budget it never trains again
    for _, rows in clients.groupby("client_id"):
        broke = np.flatnonzero(rows["decline_reason"].to_numpy() == "budget")
        if broke.size:
            assert not rows["uploaded"].to_numpy()[broke[0] :].any()


BAD = [
    ({"population": {"clients": 12, "budget": {"epsilon": 0.0}}}, "population.budget.epsilon"),
    (
        {"population": {"clients": 12, "budget": {"epsilon": 1.0, "delta": 1.0}}},
        "population.budget.delta",
    ),
    ({"privacy": {"kind": "gaussian_local", "clip": 0.0}}, "privacy.clip"),
    ({"privacy": {"kind": "laplace_local", "clip": -1.0}}, "privacy.clip"),
    ({"privacy": {"kind": "laplace_local", "accountant": "rdp"}}, "privacy.accountant"),
    ({"privacy": {"kind": "dpsgd_local", "accountant": "basic"}}, "privacy.accountant"),
    ({"privacy": {"kind": "gaussian_local", "level": "sample"}}, "privacy.level"),
    ({"aggregation": {"kind": "secure", "inner": {"kind": "median"}}}, "aggregation.inner.kind"),
    (
        {"aggregation": {"kind": "median"}, "privacy": {"kind": "central_gaussian"}},
        "aggregation.kind",
    ),
    ({"aggregation": {"kind": "secure", "bits": 4}}, "aggregation.bits"),
]


@pytest.mark.parametrize(("override", "key"), BAD, ids=[k for _, k in BAD])
def test_bad_input_exits_2_naming_the_key(tiny, write_scenario, capsys, override, key):
    from fedgame.cli import main

    path = write_scenario(scenario(tiny, **override))
    assert main(["validate", str(path)]) == 2
    assert f"'{key}'" in capsys.readouterr().err
