"""The struct-of-arrays client state, its lazy views and the batched plug-in paths."""

from __future__ import annotations

import dataclasses
import math

import mesa
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.agents.client import ClientAgent
from fedgame.mechanisms.policy.always import AlwaysParticipate
from fedgame.model import FedGameModel
from fedgame.privacy.accountants import make_accountant
from fedgame.privacy.base import Charge, Charges
from fedgame.run.single import tables
from fedgame.scenario.load import validate
from fedgame.views import (
    MarketView,
    Offer,
    Response,
    Responses,
    RoundInfo,
    UniformProbabilities,
    as_column,
    column_of,
    ids_of,
)


def _fields(response: Response) -> tuple:
    """A response's fields with NaN made comparable."""
    return tuple(
        "nan" if isinstance(v, float) and math.isnan(v) else v
        for v in dataclasses.astuple(response)
    )


def test_agents_read_and_write_their_table_row(tiny):
    model = FedGameModel(validate(tiny))
    agent = model.clients[2]
    assert agent.dataset_size == int(model.table.dataset_size[2])
    agent.privacy_value = 7.5
    assert model.table.privacy_value[2] == 7.5
    assert agent.view().privacy_value == 7.5  # the cached view was dropped
    model.step()
    assert agent.epsilon_spent == model.table.epsilon_spent[2]
    assert isinstance(agent.selected, bool) and isinstance(agent.epsilon_spent, float)
    assert agent in model.agents_by_type[type(agent)] and isinstance(agent, ClientAgent)


def test_views_follow_the_table_after_each_round(tiny):
    model = FedGameModel(validate(tiny))
    for _ in range(3):
        model.step()
        views = model.table.views()
        assert [v.epsilon_spent for v in views] == model.table.epsilon_spent.tolist()
        assert [v.participations for v in views] == model.table.participations.tolist()
        np.testing.assert_array_equal(views.column("epsilon_spent"), model.table.epsilon_spent)
        np.testing.assert_array_equal(ids_of(views), np.arange(len(views)))
        sub = views[np.array([3, 1])]
        assert [v.client_id for v in sub] == [3, 1]
        assert sub[1] == views[1] == model.clients[1].view()  # built from the row, no cache


def test_datacollector_gives_mesa_frame_and_tidy_table(tiny):
    model = FedGameModel(validate(tiny))
    for _ in range(2):
        model.step()
    frame = model.datacollector.get_agenttype_vars_dataframe(ClientAgent)
    assert frame.index.names == ["Step", "AgentID"]
    assert len(frame) == 3 * len(model.clients)  # step 0 (as built) and two rounds
    assert frame.equals(model.datacollector.get_agent_vars_dataframe())
    frame = frame.drop(index=0, level="Step")
    ids = frame.xs(1, level="Step").index.to_numpy()
    np.testing.assert_array_equal(ids, [c.unique_id for c in model.clients])
    rounds, clients = tables(model)
    assert len(rounds) == 2
    assert list(clients["round"].unique()) == [1, 2]
    pd.testing.assert_series_equal(
        clients["epsilon_spent"].reset_index(drop=True),
        frame["epsilon_spent"].reset_index(drop=True),
    )


def test_batched_respond_all_gives_the_same_run_as_asking_each_agent(tiny):
    batched = FedGameModel(validate(tiny))
    looped = FedGameModel(validate(tiny))
    assert all(g.batched for g in batched.groups)
    looped.groups = tuple(dataclasses.replace(g, batched=False) for g in looped.groups)
    for model in (batched, looped):
        model.run_model()
    pd.testing.assert_frame_equal(tables(batched)[1], tables(looped)[1])


def test_respond_all_matches_respond_for_each_client(tiny):
    model = FedGameModel(validate(tiny))
    for _ in range(4):
        model.step()
    views = model.table.views()
    market = MarketView(views, RoundInfo(5, 10, len(views)))
    policy = AlwaysParticipate(None)
    batch = policy.respond_all(Offer(), clients=views, market=market)
    want = [policy.respond(Offer(), me=v, market=market) for v in views]
    assert [_fields(r) for r in batch] == [_fields(r) for r in want]
    assert not all(r.participate for r in want) and any(r.participate for r in want)


@given(
    zs=st.lists(st.floats(0.01, 10.0), min_size=1, max_size=12),
    free=st.lists(st.booleans(), min_size=12, max_size=12),
)
def test_charges_round_trip(zs, free):
    objs = [Charge() if f else Charge("gaussian", z, 1.0, 2, 1e-6) for z, f in zip(zs, free)]
    cols = Charges.of(objs)
    assert list(cols) == objs
    np.testing.assert_array_equal(cols.free, [c.free for c in objs])
    assert list(cols[np.arange(len(objs))]) == objs


_ACCOUNTING_STEPS = st.lists(
    st.tuples(st.integers(0, 5), st.floats(0.05, 2.0), st.booleans()), min_size=1, max_size=6
)


@pytest.mark.parametrize("kind", ["basic", "rdp", "zcdp"])
@given(steps=_ACCOUNTING_STEPS)
def test_batched_accounting_matches_one_release_at_a_time(kind, steps):
    _check_batched_equals_single(kind, steps)


# a PLD composition costs about a second, so this accountant searches fewer examples
@settings(max_examples=15)
@given(steps=_ACCOUNTING_STEPS)
def test_batched_pld_accounting_matches_one_release_at_a_time(steps):
    _check_batched_equals_single("pld", steps)


def _check_batched_equals_single(kind, steps):
    batched, single = make_accountant(kind), make_accountant(kind)
    for acc in (batched, single):
        acc.start(np.full(6, 1e-5))
    for cid, eps, free in steps:
        charge = Charge() if free else Charge("gaussian", 1.0 / eps, delta=1e-7)
        ids = np.array([cid, (cid + 1) % 6, cid])  # cid releases twice
        everyone = np.arange(6)
        after = batched.epsilon_if(everyone, Charges.of([charge] * 6))
        batched.charge(ids, Charges.of([charge] * 3))
        for i in ids.tolist():
            single.charge(np.array([i]), Charges.of([charge]))
        np.testing.assert_allclose(batched.epsilon(), single.epsilon(), rtol=1e-9)
        assert np.all(after >= 0)


def test_responses_columns_and_objects_agree():
    objs = [Response(4, True, epsilon=0.5), Response(1, False, reason="budget")]
    cols = Responses.of(objs)
    assert [_fields(r) for r in cols] == [_fields(r) for r in objs]
    np.testing.assert_array_equal(ids_of(cols), [4, 1])
    assert column_of(cols, "participate", bool).tolist() == [True, False]
    assert math.isnan(cols[np.array([False, True])][0].epsilon)


def test_as_column_fills_scalars_and_keeps_arrays():
    values = np.arange(4.0)
    assert as_column(values, 4, float) is values  # no copy
    filled = as_column(None, 3, float, math.nan)
    assert filled.shape == (3,) and np.isnan(filled).all()
    filled[0] = 1.0  # a writable column, not a broadcast view
    assert as_column(np.array([7]), 3, np.int64).tolist() == [7, 7, 7]
    assert as_column("x", 2, object).tolist() == ["x", "x"]
    with pytest.raises(ValueError, match="expected 3 values or one"):
        as_column(np.arange(2.0), 3, float)
    charges = Charges("gaussian", noise_multiplier=np.array([0.1, 0.2]), delta=1e-6)
    assert len(charges) == 2 and charges.delta.tolist() == [1e-6, 1e-6]
    assert len(Charges(np.array(["none", "gaussian", "none"], dtype=object))) == 3
    assert len(Charges("gaussian", noise_multiplier=0.3)) == 1


def test_every_client_views_give_column_copies(tiny):
    model = FedGameModel(validate(tiny))
    model.step()
    everyone, listed = model.table.views(), model.table.views(np.arange(len(model.table)))
    for name in ("epsilon_spent", "privacy_value", "reachable"):
        np.testing.assert_array_equal(everyone.column(name), listed.column(name))
    column = everyone.column("epsilon_spent")
    column += 100.0
    assert model.table.epsilon_spent.max() < 100.0  # the table is untouched
    np.testing.assert_array_equal(everyone[np.array([2, 0])].ids, [2, 0])


def test_uniform_probabilities_map_unsorted_ids():
    probs = UniformProbabilities(np.array([9, 2, 5]), 0.25)
    assert list(probs) == [2, 5, 9] and len(probs) == 3
    assert probs[5] == 0.25 and dict(probs) == {2: 0.25, 5: 0.25, 9: 0.25}
    with pytest.raises(KeyError):
        probs[3]


def test_collector_records_model_vars_as_mesa_does(tiny):
    model = FedGameModel(validate(tiny))
    plain = mesa.DataCollector(model_reporters=dict(model.datacollector.model_reporters))
    plain.collect(model)  # step 0, as FedGameModel does when built
    for _ in range(3):
        model.step()
        plain.collect(model)
    pd.testing.assert_frame_equal(
        model.datacollector.get_model_vars_dataframe(), plain.get_model_vars_dataframe()
    )


def test_views_expose_only_declared_agent_knowable_fields(tiny):
    model = FedGameModel(validate(tiny))
    model.step()
    views = model.table.views()
    assert views.column("epsilon_spent").shape == (len(views),)
    for hidden in ("straggled", "uploaded", "train_loss", "noise_std"):
        with pytest.raises(KeyError, match="plug-ins may read: client_id, dataset_size"):
            views.column(hidden)
    assert not hasattr(views[0], "straggled")
