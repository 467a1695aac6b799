"""A scenario with ``servers:`` builds the market: its keys, errors, tables and dispatch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from fedgame.api import load_scenario, run
from fedgame.errors import ScenarioError
from fedgame.market.model import MarketModel


def duopoly(tiny, **servers_extra):
    data = dict(tiny)
    data.update(
        rounds=2,
        incentive={"kind": "qi_dpfl", "lam": 0.01},
        privacy={"kind": "zcdp_gaussian", "clip": 1.0},
        selection={"kind": "all"},
        servers=[{"name": "A"}, {"name": "B", **servers_extra}],
    )
    data["population"] = {**data["population"], "clients": 8}
    data["population"]["budget"] = {"epsilon": 50.0, "delta": 1e-5}
    data["training"] = {**data["training"], "local_steps": 1, "batch_size": 8}
    return data


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"name": "A"}, "servers.1.name"),  # a repeated name
        ({"name": "B", "incentive": "none"}, "servers.1.incentive"),  # no contest
        ({"name": "B", "incentive": {"gamma": 2.0}}, "servers.1.incentive.gamma"),
        ({"name": "B", "privacy": {"accountant": "rdp"}}, "servers.1.privacy"),
        ({"name": "B", "population": {}}, "servers.1.population"),  # a market key
        ({"name": "1B"}, "servers.1.name"),
    ],
)
def test_a_bad_server_entry_names_its_key(tiny, entry, key):
    data = duopoly(tiny)
    data["servers"][1] = entry
    with pytest.raises(ScenarioError) as err:
        load_scenario(data)
    assert err.value.key == key


def test_a_server_component_without_kind_changes_the_markets_parameters(tiny):
    from fedgame.market.spec import server_scenarios

    data = duopoly(tiny, incentive={"gamma": 0.8})
    a, b = server_scenarios(load_scenario(data))
    assert a.incentive.kind == b.incentive.kind == "qi_dpfl"
    assert (a.incentive.params["gamma"], b.incentive.params["gamma"]) == (0.5, 0.8)
    assert b.incentive.params["lam"] == 0.01


def test_one_row_per_server_and_round_with_shares_and_hhi(tiny):
    result = run(duopoly(tiny, incentive={"gamma": 0.8}))
    rounds, clients = result.rounds, result.clients
    assert result.manifest["rounds_completed"] == 2
    assert list(zip(rounds["round"], rounds["server"])) == [(1, "A"), (1, "B"), (2, "A"), (2, "B")]
    for _, part in rounds.groupby("round"):
        assert part["market_share"].sum() == pytest.approx(1.0)
        assert part["hhi"].iloc[0] == pytest.approx((part["market_share"] ** 2).sum())
        # the market share is the ρ the clients delivered to the server
        t = int(part["round"].iloc[0])
        won = clients.loc[clients["round"] == t, ["rho_A", "rho_B"]].sum()
        np.testing.assert_allclose(part["sum_rho"], won.to_numpy(), rtol=1e-12)
    # the larger gamma weighs accuracy more: its leader offers more and wins more ρ
    first = rounds[rounds["round"] == 1].set_index("server")
    assert first.loc["B", "reward"] > first.loc["A", "reward"]
    assert first.loc["B", "market_share"] > 0.5
    # clients rows say whom the client served
    served = clients["served"].str.split(",")
    delivered_a = clients["rho_A"] > 0
    assert (served.apply(lambda s: "A" in s) == delivered_a).all()
    assert (clients["servers_served"] == (clients[["rho_A", "rho_B"]] > 0).sum(axis=1)).all()
    assert clients["payment"].groupby(clients["round"]).sum().to_numpy() == pytest.approx(
        rounds.groupby("round")["payments_total"].sum().to_numpy()
    )


def test_the_same_seed_gives_the_same_tables(tiny):
    one, two = run(duopoly(tiny)), run(duopoly(tiny))
    timing = ["wall_time_s"]
    pd.testing.assert_frame_equal(one.rounds.drop(columns=timing), two.rounds.drop(columns=timing))
    pd.testing.assert_frame_equal(one.clients, two.clients)


def test_servers_are_mesa_agents_and_clients_shared(tiny):
    model = MarketModel(load_scenario(duopoly(tiny)))
    model.step()
    assert [s.name for s in model.servers] == ["A", "B"]
    assert len(model.agents) == 2 + 8
    # one ledger: both servers' tables show the same ε spent as the market's budget
    for srv in model.servers:
        np.testing.assert_array_equal(srv.table.epsilon_spent, model.budget.spent)
    assert all(isinstance(c.served, tuple) for c in model.clients)


def test_the_command_line_refuses_a_bad_entry_with_exit_2(tiny, write_scenario):
    data = duopoly(tiny)
    data["servers"][1]["incentive"] = "none"
    path = write_scenario(data)
    done = subprocess.run(
        [sys.executable, "-m", "fedgame", "validate", str(path)], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "servers.1.incentive" in done.stderr and "contest incentive" in done.stderr


def test_report_of_a_market_run_has_per_server_rows_and_the_figure(tiny, tmp_path):
    from fedgame.analysis.report import write_report

    result = run(duopoly(tiny), out=tmp_path)
    page = write_report(result.run_dir)
    text = page.read_text()
    assert "| A |" in text and "| B |" in text
    assert (page.parent / "market.png").stat().st_size > 10_000
    summary = text.split("## Servers")[1]
    deliveries = result.rounds.groupby("server")["uploaded"].sum()
    assert f"| {deliveries['A']} |" in summary.splitlines()[4]  # row A: its deliveries


def test_the_one_server_model_refuses_a_market(tiny):
    from fedgame.model import FedGameModel

    with pytest.raises(ScenarioError) as err:
        FedGameModel(load_scenario(duopoly(tiny)))
    assert err.value.key == "servers" and "MarketModel" in str(err.value)
