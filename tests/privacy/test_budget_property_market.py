"""One ledger per client across servers (fedgame.market): no client ever passes its (ε, δ), and
what it gives one server is gone for the others."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fedgame.run.single import simulate
from fedgame.scenario.load import validate


def market(tiny, *, servers, **extra):
    data = dict(tiny)
    data.update(
        incentive={"kind": "qi_dpfl", "lam": 0.01, "budgets": "exclude"},
        privacy={"kind": "zcdp_gaussian", "clip": 1.0},
        selection={"kind": "all"},
        servers=[{"name": f"S{j}"} for j in range(servers)],
    )
    data["population"] = {**data["population"], "clients": 8}
    data["training"] = {**data["training"], "local_steps": 1, "batch_size": 8}
    data.update(extra)
    return data


def zcdp_epsilon(rho: np.ndarray, delta: float) -> np.ndarray:
    """ε of ρ-zCDP at δ: ρ + 2·sqrt(ρ·ln(1/δ)) (Bun & Steinke 2016, Prop. 1.3)."""
    return rho + 2.0 * np.sqrt(rho * math.log(1.0 / delta))


def check_ledger(clients: pd.DataFrame, servers: list[str], delta: float) -> None:
    """ε spent is the zCDP ε of the ρ the client delivered to *all* servers so far, and stays
    within its budget."""
    assert (clients["epsilon_spent"] <= clients["epsilon_total"] * (1 + 1e-9)).all()
    wide = clients.pivot(index="round", columns="client_id", values="epsilon_spent")
    assert (wide.diff().fillna(0.0).to_numpy() >= -1e-12).all()
    rho = clients[[f"rho_{s}" for s in servers]].sum(axis=1)
    total = rho.groupby(clients["client_id"]).cumsum()
    np.testing.assert_allclose(
        clients["epsilon_spent"], zcdp_epsilon(total.to_numpy(), delta), rtol=1e-9, atol=1e-12
    )


@settings(max_examples=8, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    servers=st.integers(1, 3),
    low=st.floats(0.3, 6.0),
    span=st.floats(0.0, 6.0),
    competition=st.sampled_from(["independent", "best_response"]),
    fixed=st.booleans(),
    seed=st.integers(0, 10_000),
)
def test_no_client_passes_its_budget_across_servers(
    tiny, servers, low, span, competition, fixed, seed
):
    data = market(tiny, servers=servers, seed=seed, market={"competition": competition})
    data["population"]["budget"] = {
        "epsilon": {"dist": "uniform", "low": low, "high": low + span},
        "delta": 1e-5,
    }
    if fixed:  # one rival with a fixed reward rule
        data["servers"][0]["incentive"] = {"kind": "fixed", "reward": 3.0}
    result = simulate(validate(data))
    assert result.manifest["status"] == "completed"
    check_ledger(result.clients, [f"S{j}" for j in range(servers)], 1e-5)
    assert set(result.rounds["server"]) <= {f"S{j}" for j in range(servers)}


def test_a_tight_budget_binds_across_both_servers(tiny):
    """ε_total = 2: each client could give either server alone more than it has (the uncapped
    answers pass it), so the budget binds, both servers are served in round 1, and the ledger
    holds what both took."""
    data = market(tiny, servers=2)
    data["population"]["budget"] = {"epsilon": 2.0, "delta": 1e-5}
    data["population"]["straggle_prob"] = 0.0
    data["network"] = {"faults": {"kind": "none"}}
    result = simulate(validate(data))
    clients = result.clients
    check_ledger(clients, ["S0", "S1"], 1e-5)
    first = clients[clients["round"] == 1]
    assert (first["servers_served"] == 2).any()
    spent = clients.groupby("client_id")["epsilon_spent"].max()
    assert np.isclose(spent, 2.0, rtol=1e-6).any()  # someone's budget ran out exactly
