"""fedgame.analysis.equilibria on a tiny QI-DPFL run."""

from __future__ import annotations

import pytest

from fedgame.analysis import compare_incentives, equilibria
from fedgame.errors import FedGameError
from fedgame.run.single import simulate
from fedgame.scenario.load import validate


def test_equilibria_table_and_comparison(tiny):
    tiny["privacy"] = {"kind": "zcdp_gaussian"}
    tiny["incentive"] = {"kind": "qi_dpfl", "dim": 650}
    tiny["policy"] = {"kind": "best_response"}
    tiny["population"]["privacy_value"] = 1.0
    run = simulate(validate(tiny))
    table = equilibria(run)
    assert list(table["round"]) == [1, 2, 3]
    for col in ("reward", "sum_rho", "server_cost", "welfare", "nash_gap_max"):
        assert col in table
    assert table["cumulative_server_cost"].iloc[-1] == pytest.approx(table["server_cost"].sum())
    cmp = compare_incentives({"qi": [run, run]})
    assert cmp.loc[0, "replicates"] == 2 and cmp.loc[0, "accuracy_sd"] == 0.0
    assert cmp.loc[0, "server_cost_mean"] == pytest.approx(run.rounds["server_cost"].sum())
    assert compare_incentives([run]).loc[0, "label"] == "qi_dpfl"
    tiny["incentive"] = {"kind": "none"}
    tiny["policy"] = {"kind": "always"}
    with pytest.raises(FedGameError, match="reward"):
        equilibria(simulate(validate(tiny)))
