"""Behavioural contracts of every registered plug-in, drawn from the registry.

Each test runs a real model with one family's plug-in (its declared ``example``, with the
scenario sections it ``needs``) and watches that plug-in's own calls: a new selection rule,
policy, incentive, fault model or aggregator is covered here with no test edit.

* selection: returns only candidates, each at most once unless the rule samples with
  replacement, never more than its ``k``;
* policy: answers for exactly the clients asked, in their order, with finite levels for
  those who take part;
* incentive: pays only delivered clients, finite non-negative amounts;
* faults: one link and one straggler flag per client, failed edges are edges of the graph;
* aggregation: of identical rows, that row (its weights sum to one); a weighted sum is
  Σ w_k u_k / Σ w_k with the non-negative weights it declares.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import torch

from fedgame import registry
from fedgame.mechanisms.base import (
    DrawsMasks,
    FaultDraw,
    SelectsK,
    WeightedSumAggregator,
    settlement_of,
)
from fedgame.mechanisms.metrics import split_metrics
from fedgame.model import FedGameModel
from fedgame.scenario.load import validate
from fedgame.scenario.schema import COMPONENT_FAMILIES
from fedgame.views import ClientView, Responses, Selection, ids_of

registry.ensure_loaded()

#: the scenario path of each family (``selection``, ``network.faults``, ...)
PATH = {family: path for path, family in COMPONENT_FAMILIES.items()}
#: selection rules that draw with replacement (a client may appear twice: virtual duplicates)
WITH_REPLACEMENT = {"unbiased", "privacy_aware"}


def spec(family: str, name: str) -> dict[str, Any]:
    return {"kind": name, **copy.deepcopy(dict(registry.example(family, name).config))}


def run_with(tiny: dict[str, Any], family: str, name: str, *, rounds: int = 3) -> FedGameModel:
    """A model of the tiny scenario with ``family``'s plug-in ``name`` (its example), run."""
    model = build_with(tiny, family, name, rounds=rounds)
    for _ in range(rounds):
        model.step()
    return model


def build_with(tiny: dict[str, Any], family: str, name: str, *, rounds: int = 3) -> FedGameModel:
    """The model of :func:`run_with`, built (its plug-ins prepared) but not run."""
    data = copy.deepcopy(tiny)
    data.update(copy.deepcopy(dict(registry.example(family, name).needs)))
    node = data
    *parents, last = PATH[family].split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = spec(family, name)
    data["rounds"] = rounds
    data["population"].update(clients=10, straggle_prob=0.2)
    data["training"].update(local_steps=1, batch_size=8)
    return FedGameModel(validate(data))


def spy(monkeypatch: pytest.MonkeyPatch, cls: type, method: str) -> list[tuple[Any, ...]]:
    """Record ``(args, kwargs, result)`` of every call of ``cls.method`` (instance method)."""
    calls: list[tuple[Any, ...]] = []
    original: Callable[..., Any] = getattr(cls, method)

    def recorded(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = original(self, *args, **kwargs)
        calls.append((args, kwargs, out))
        return out

    monkeypatch.setattr(cls, method, recorded)
    return calls


# --- selection -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", registry.names("selection"))
def test_a_selection_returns_only_candidates(tiny, monkeypatch, name):
    cls = registry.entry("selection", name).cls
    calls = spy(monkeypatch, cls, "select")
    model = run_with(tiny, "selection", name)
    assert calls, f"{name} was never asked to select"
    declared = set(getattr(cls, "round_columns", ()))
    for args, kwargs, result in calls:
        candidates = set(ids_of(args[0] if args else kwargs["candidates"]).tolist())
        out, metrics = split_metrics(result)
        assert isinstance(out, Selection)
        assert set(metrics) <= declared, f"{name} measured undeclared {set(metrics) - declared}"
        chosen = list(out.client_ids)
        assert set(chosen) <= candidates, f"{name} chose non-candidates"
        if name not in WITH_REPLACEMENT:
            assert len(chosen) == len(set(chosen)), f"{name} chose a client twice"
        selection = model.world.components.selection
        if isinstance(selection, SelectsK):
            assert len(chosen) <= selection.k
        assert all(0.0 <= p <= 1.0 + 1e-12 for p in out.probabilities.values())
    fraction = model.world.components.selection.expected_fraction(10)
    assert 0.0 <= fraction <= 1.0


# --- policy --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", registry.names("policy"))
def test_a_policy_answers_exactly_the_clients_asked(tiny, monkeypatch, name):
    cls = registry.entry("policy", name).cls
    batched = callable(getattr(cls, "respond_all", None))
    calls = spy(monkeypatch, cls, "respond_all" if batched else "respond")
    run_with(tiny, "policy", name)
    assert calls, f"{name} was never asked"
    for args, kwargs, out in calls:
        if batched:
            asked = ids_of(kwargs["clients"] if "clients" in kwargs else args[1])
            if isinstance(out, tuple):  # (responses, client columns): declared, of asked ids
                out, per_client = out
                assert set(per_client) <= set(getattr(cls, "client_columns", ()))
                for values in per_client.values():
                    assert set(values) <= set(asked.tolist())
            answers = out if isinstance(out, Responses) else list(out)
            got = np.array([r.client_id for r in answers], dtype=np.int64)
            np.testing.assert_array_equal(got, asked)
        else:
            me = kwargs["me"]
            answers = [out]
            assert out.client_id == me.client_id
        for response in answers:
            if response.participate:
                for level in (response.epsilon, response.rho):
                    assert level is None or math.isnan(level) or 0.0 <= level < math.inf


# --- incentive -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", registry.names("incentive"))
def test_an_incentive_pays_only_delivered_clients(tiny, monkeypatch, name):
    cls = registry.entry("incentive", name).cls
    calls = spy(monkeypatch, cls, "settle")
    run_with(tiny, "incentive", name)
    assert calls, f"{name} never settled"
    for args, kwargs, out in calls:
        delivered = args[1] if len(args) > 1 else kwargs["delivered"]
        ids = {r.client_id for r in delivered}
        paid = settlement_of(out, args[0]).payments
        assert set(paid) <= ids, f"{name} paid clients that delivered nothing"
        assert all(math.isfinite(v) and v >= 0.0 for v in paid.values())


# --- faults --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", registry.names("faults"))
def test_a_fault_model_draws_one_flag_per_client_and_fails_only_edges(tiny, monkeypatch, name):
    cls = registry.entry("faults", name).cls
    calls = spy(monkeypatch, cls, "draw")
    model = run_with(tiny, "faults", name)
    assert calls
    graph = model.world.graph
    for args, kwargs, out in calls:
        n = len(args[0] if args else kwargs["clients"])
        assert isinstance(out, FaultDraw)
        assert np.asarray(out.link_up).shape == (n,)
        assert np.asarray(out.straggler).shape == (n,)
        for u, v in out.failed_edges:
            assert graph.has_edge(u, v), f"{name} failed a link the topology does not have"


# --- aggregation ---------------------------------------------------------------------------


def _view(cid: int, size: int) -> ClientView:
    return ClientView(cid, size, 0.0, 1.0, 5.0, 1e-5, 0.0, 1.0, 1e-6, 0.0, False)


@pytest.mark.parametrize("name", registry.names("aggregation"))
def test_an_aggregate_of_identical_rows_is_that_row(name):
    config = spec("aggregation", name)
    config.pop("kind")
    agg = registry.create("aggregation", name, config)
    row = torch.tensor([0.5, -1.25, 2.0])
    updates = row.repeat(4, 1)
    clients = [_view(i, 10 * (i + 1)) for i in range(4)]  # unequal sizes: weights differ
    rng = np.random.default_rng(0) if isinstance(agg, DrawsMasks) else None
    out, metrics = split_metrics(agg.aggregate(updates, clients=clients, rng=rng))
    assert out is not None
    assert set(metrics) <= set(getattr(agg, "round_columns", ())), "undeclared metrics"
    torch.testing.assert_close(out, row, rtol=1e-5, atol=1e-5)
    if isinstance(agg, WeightedSumAggregator):  # Σ w_k u_k / Σ w_k, w_k >= 0
        weights = np.asarray(agg.weights(clients), dtype=float)
        assert (weights >= 0).all() and weights.sum() > 0
        distinct = torch.arange(12, dtype=torch.float32).reshape(4, 3) - 5.0
        mixed, _ = split_metrics(agg.aggregate(distinct, clients=clients, rng=rng))
        share = torch.tensor(weights / weights.sum(), dtype=torch.float32)
        torch.testing.assert_close(mixed, share @ distinct, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", registry.names("aggregation"))
def test_an_aggregate_runs_in_a_model(tiny, name):
    model = run_with(tiny, "aggregation", name, rounds=2)
    assert model.steps == 2 and math.isfinite(model.test_loss)
