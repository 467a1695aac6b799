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
