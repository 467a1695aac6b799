"""``output.clients``: all, active or no client rows; agents created only when asked for."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest

from fedgame.model import FedGameModel
from fedgame.run.single import simulate
from fedgame.scenario.load import validate
from fedgame.scenario.output import AUTO_ALL_ROWS, clients_table_mode


def with_clients(tiny, mode):
    data = copy.deepcopy(tiny)
    data["output"] = {"clients": mode}
    return data


def test_active_keeps_exactly_the_rows_that_differ_from_a_fresh_round(tiny):
    full = simulate(validate(with_clients(tiny, "all")))
    active = simulate(validate(with_clients(tiny, "active")))
    pd.testing.assert_frame_equal(
        full.rounds.drop(columns="wall_time_s"), active.rounds.drop(columns="wall_time_s")
    )
    keyed = full.clients.set_index(["round", "client_id"])
    sub = active.clients.set_index(["round", "client_id"])
    # every active row is the full table's row for that client and round
    pd.testing.assert_frame_equal(sub, keyed.loc[sub.index])
    # and every selected, charged or paid client of a round is in it
    must = full.clients[
        full.clients["selected"]
        | (full.clients["epsilon_charged"] != 0)
        | (full.clients["reward"] != 0)
    ]
    assert set(zip(must["round"], must["client_id"])) <= set(sub.index)
    assert len(sub) < len(keyed)
    assert active.manifest["clients_table"] == "active"


def test_none_writes_an_empty_clients_table_with_the_columns(tiny):
    result = simulate(validate(with_clients(tiny, "none")))
    assert len(result.clients) == 0
    full = simulate(validate(tiny))
    assert list(result.clients.columns) == list(full.clients.columns)
    assert len(result.rounds) == tiny["rounds"]


def test_auto_is_all_up_to_the_documented_size(tiny):
    small = validate(tiny)
    assert clients_table_mode(small) == "all"
    big = copy.deepcopy(tiny)
    big["rounds"] = AUTO_ALL_ROWS // tiny["population"]["clients"] + 1
    assert clients_table_mode(validate(big)) == "active"
    result = simulate(small)
    assert result.manifest["clients_table"] == "all"
    assert "auto" in result.manifest["clients_table_rule"]


def test_batched_population_creates_its_agents_only_when_asked(tiny):
    model = FedGameModel(tiny, seed=1)
    assert not model.clients.created
    model.step()
    assert not model.clients.created
    first = model.clients[0]
    assert model.clients.created
    assert first.client_id == 0
    assert len(model.agents_by_type[type(first)]) == len(model.clients)
    frame = model.datacollector.get_agent_vars_dataframe()
    ids = frame.index.get_level_values("AgentID").unique()
    assert set(ids) == {c.unique_id for c in model.clients}


def test_touched_rows_reset_to_their_defaults_next_round(tiny):
    model = FedGameModel(with_clients(tiny, "active"), seed=2)
    model.step()
    selected = np.flatnonzero(model.table.selected)
    assert selected.size
    model.table.reset_round()
    assert not model.table.selected.any()
    assert (model.table.columns["reward"] == 0).all()


@pytest.mark.parametrize("mode", ["all", "active", "none"])
def test_modes_are_reproducible(tiny, mode):
    a = simulate(validate(with_clients(tiny, mode)))
    b = simulate(validate(with_clients(tiny, mode)))
    pd.testing.assert_frame_equal(a.clients, b.clients)


def _scenario_file(name: str, **sets: object) -> dict:
    """``scenarios/<name>.yaml`` on the digits, small, with dotted ``sets`` applied."""
    from pathlib import Path

    import yaml

    from fedgame.scenario.load import apply_overrides

    root = Path(__file__).resolve().parents[1]
    data = yaml.safe_load((root / "scenarios" / f"{name}.yaml").read_text())
    data.pop("sweep", None)
    base = {"data.dataset": {"kind": "digits"}, "population.clients": 60, "rounds": 4}
    base |= {"output.clients": "active", "training.device": "cpu", "selection.k": 4}
    return apply_overrides(data, [*base.items(), *sets.items()])


@pytest.mark.parametrize(
    ("name", "sets", "column"),
    [
        ("dpfl_bcs", {"selection.t0": 2}, "bcs_planned"),  # bcs: T_n of every client
        ("privacy_aware", {}, "selection_prob"),  # presampled selection (and dpsgd_local)
        ("heterogeneous_dp", {}, "epsilon_closed_form"),  # gaussian_local's closed-form ε
        ("quickstart", {"network.faults": {"kind": "deadline", "deadline": 0.2}}, "finish_time"),
    ],
)
def test_active_rows_stay_within_the_memory_estimate(name, sets, column):
    """Plug-ins that report a column for every client do not make every client active: the
    rows an ``active`` round keeps stay within what the memory estimate counts (4k), and
    ``all`` still has the column for every client."""
    from fedgame.scenario.footprint import _client_rows, trained_per_round

    scenario = validate(_scenario_file(name, **sets))
    estimate = _client_rows(scenario, trained_per_round(scenario))
    assert estimate == 16
    active = simulate(scenario)
    assert active.clients.groupby("round").size().max() <= estimate
    full = simulate(validate({**_scenario_file(name, **sets), "output": {"clients": "all"}}))
    sub = active.clients.set_index(["round", "client_id"])
    keyed = full.clients.set_index(["round", "client_id"])
    pd.testing.assert_frame_equal(sub, keyed.loc[sub.index])
    assert full.clients.loc[full.clients["round"] > 0, column].notna().all()
