"""Selection plug-ins of papers 000-002 (bcs, privacy_aware, unbiased, power_of_choice,
round_robin, optimal_queries) and the WeiAvg aggregation, end to end on the tiny scenario."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

import fedgame.mechanisms.aggregation.weighted_eps
import fedgame.mechanisms.selection.bcs as bcs_sel
import fedgame.mechanisms.selection.optimal_queries
import fedgame.mechanisms.selection.power_of_choice
import fedgame.mechanisms.selection.presampled
import fedgame.mechanisms.selection.round_robin as rr
import fedgame.plugins  # noqa: F401
from fedgame.errors import ScenarioError
from fedgame.game import privacy_aware as pa_game
from fedgame.mechanisms.aggregation.weighted_eps import WeightedEpsilon
from fedgame.model import FedGameModel
from fedgame.run.single import simulate
from fedgame.scenario.load import validate

SELECTIONS = [
    {"kind": "bcs", "k": 4, "t0": 2, "restarts": 0},
    {"kind": "privacy_aware", "k": 4, "eta_d": 1e4},
    {"kind": "unbiased", "k": 4},
    {"kind": "power_of_choice", "k": 4},
    {"kind": "round_robin", "b": 2},
    {"kind": "optimal_queries", "clip_l1": 30.0, "probe_steps": 20},
]


def _scenario(tiny, selection, **extra):
    d = copy.deepcopy(tiny)
    d["selection"] = selection
    d["training"] = {"mode": "fedsgd", "lr": 0.1, "device": "cpu", "per_sample_clip": 1.0}
    d["network"] = {"faults": {"kind": "none"}}
    d.update(extra)
    return d


@pytest.mark.parametrize("selection", SELECTIONS, ids=lambda s: s["kind"])
def test_selection_runs_three_rounds(tiny, selection):
    res = simulate(validate(_scenario(tiny, selection, aggregation={"kind": "weighted_eps"})))
    assert res.completed and len(res.rounds) == 3
    assert res.rounds["selected"].iloc[0] > 0
    assert np.isfinite(res.rounds["test_loss"]).all()


def test_bcs_two_stages_exact_k_and_hooks(tiny):
    d = _scenario(tiny, {"kind": "bcs", "k": 4, "t0": 2}, rounds=5, privacy={"kind": "none"})
    model = FedGameModel(validate(d))
    sel = model.world.components.selection
    assert sum(sel.planned_participations(i) for i in range(12)) == 4 * 5
    assert sel.loss_bound(1) > 0 and sel.loss_bound(3) == 0
    for _ in range(5):
        model.step()
        assert len(model.state.selection.client_ids) == 4
        assert len(set(model.state.selection.client_ids)) == 4
        assert model.extra["bcs_missing"] == 0
    assert sel._stage == 2 and sum(sel._planned) == 4 * 3 and sel._planned.max() <= 3
    assert len(sel._reports) > 0 and np.isfinite(model.extra["bcs_L"])
    assert all(0 <= sel.budget_fraction(i) <= 1 for i in range(12))


def test_systematic_schedule_exact_counts():
    rng = np.random.default_rng(0)
    counts = np.array([5, 5, 3, 2, 0, 4, 1])
    sched = bcs_sel.systematic_schedule(counts, rounds=5, rng=rng)
    assert all(len(r) == 4 and len(set(r.tolist())) == 4 for r in sched)
    realised = np.bincount(np.concatenate(sched), minlength=counts.size)
    np.testing.assert_array_equal(realised, counts)


def test_presampled_counts_match_draws(tiny):
    model = FedGameModel(validate(_scenario(tiny, {"kind": "privacy_aware", "k": 4})))
    sel = model.world.components.selection
    assert sum(sel.planned_participations(i) for i in range(12)) == 4 * 3
    assert sel.p.sum() == pytest.approx(1.0)


def test_round_robin_counts():
    np.testing.assert_array_equal(
        rr.round_robin_counts(num_clients=4, per_round=3, rounds=3), [3, 2, 2, 2]
    )


def test_weighted_eps_weights():
    class V:
        def __init__(self, e):
            self.epsilon_total = e

    agg = WeightedEpsilon(None)
    out = agg.aggregate(torch.tensor([[1.0], [4.0]]), clients=[V(1.0), V(3.0)])
    assert out.item() == pytest.approx(3.25)


@pytest.mark.parametrize(
    ("selection", "key"),
    [
        ({"kind": "bcs", "k": 20}, "selection.k"),
        ({"kind": "bcs", "k": 4, "t0": 3}, "selection.t0"),
        ({"kind": "bcs", "k": 4, "t0": 1}, "selection.t0"),
        ({"kind": "privacy_aware", "k": 13}, "selection.k"),
        ({"kind": "privacy_aware", "eta_d": 0.0}, "selection.eta_d"),
        ({"kind": "privacy_aware", "eta_d": -2.0}, "selection.eta_d"),
        ({"kind": "unbiased", "k": 13}, "selection.k"),
        ({"kind": "power_of_choice", "k": 13}, "selection.k"),
        ({"kind": "round_robin", "b": 13}, "selection.b"),
        ({"kind": "optimal_queries", "constants": "given"}, "selection.smoothness"),
        (
            {
                "kind": "optimal_queries",
                "constants": "given",
                "smoothness": 1.0,
                "strong_convexity": -0.5,
                "grad_bound_sq": 1.0,
                "noniid": 0.0,
                "initial_distance_sq": 1.0,
            },
            "selection.strong_convexity",
        ),
    ],
)
def test_bad_inputs_are_scenario_errors(tiny, selection, key):
    with pytest.raises(ScenarioError) as err:
        validate(_scenario(tiny, selection))
    assert key in str(err.value)


def test_bcs_infeasible_stage2_is_flagged(tiny):
    d = _scenario(tiny, {"kind": "bcs", "k": 4, "t0": 2, "estimate": "none"}, rounds=4)
    d["privacy"] = {"kind": "none"}
    model = FedGameModel(validate(d))
    sel = model.world.components.selection
    for _ in range(2):
        model.step()
    sel._stage1_plan = np.ones(12, dtype=int)  # clients 2.. spent their whole stage-1 plan
    sel._counts = np.array([0, 0] + [1] * 10)
    with pytest.warns(UserWarning, match="budget left"):
        model.step()
    assert model.extra["bcs_infeasible"] == 1.0
    assert sorted(model.state.selection.client_ids) == [0, 1]


def test_optimal_queries_gaussian_follows_the_sign_of_d(tiny, monkeypatch):
    from fedgame.game import queries

    sel = {"kind": "optimal_queries", "mechanism": "gaussian", "probe_steps": 20}
    model = FedGameModel(validate(_scenario(tiny, sel)))
    planner = model.server.selection_rule
    c = planner.constants
    e1, e2, *_ = queries.gaussian_constants(
        n_clients=12, n_params=model.learner.num_params,
        samples_per_client=[max(v.dataset_size, 1) for v in (cl.view() for cl in model.clients)],
        sample_rate=1.0, clip_l2=1.0, epsilons=[cl.epsilon_total for cl in model.clients],
        deltas=[cl.delta for cl in model.clients], c2=1.0, grad_bound_sq=c["grad_bound_sq"],
        grad_variances=[c["grad_bound_sq"]] * 12, smoothness=c["smoothness"],
        strong_convexity=c["strong_convexity"], noniid=max(c["noniid"], 0.0),
        initial_distance_sq=max(c["initial_distance_sq"], 0.0),
    )  # fmt: skip
    expected_rounds = tiny["rounds"] if e1 / 12 + e2 > 0 else 0
    assert planner.b == 12 and planner.active_rounds == expected_rounds
    # Solution 2: with D <= 0 the planner trains nobody
    monkeypatch.setattr(queries, "gaussian_constants", lambda **kw: (1.0, -1.0, 1.0, 2.0))
    model = FedGameModel(validate(_scenario(tiny, sel)))
    assert model.server.selection_rule.active_rounds == 0


def _local_sgd(tiny, selection, batch):
    d = _scenario(tiny, selection)
    d["training"] = {"mode": "local_sgd", "local_steps": 2, "batch_size": batch, "device": "cpu"}
    return d


def test_privacy_aware_batch_follows_the_learners_batch(tiny):
    unset = FedGameModel(validate(_local_sgd(tiny, {"kind": "privacy_aware", "k": 4}, 8)))
    explicit = FedGameModel(
        validate(_local_sgd(tiny, {"kind": "privacy_aware", "k": 4, "batch_size": 8}, 8))
    )
    a, b = (m.world.components.selection for m in (unset, explicit))
    assert a.batch == b.batch == 8
    np.testing.assert_array_equal(a.p, b.p)  # V_k of Eq. 7 at r_k = min(1, 8/|M_k|)
    # under fedsgd the step uses the whole local set: r_k = 1 (no batch)
    full = FedGameModel(validate(_scenario(tiny, {"kind": "privacy_aware", "k": 4})))
    sel = full.world.components.selection
    assert sel.batch is None
    views = full.table.views()
    sizes = np.maximum(views.column("dataset_size"), 1.0)
    v = pa_game.noise_factors(
        epsilons=views.column("epsilon_total"),
        deltas=views.column("delta"),
        sample_rates=np.ones_like(sizes),
        sizes=sizes,
    )
    np.testing.assert_allclose(
        sel.p, pa_game.selection_probabilities(sizes=sizes, v=v, eta_d=1e4), rtol=1e-12
    )


@pytest.mark.parametrize(
    ("batch", "training_batch", "fedsgd", "allowed"),
    [(16, 8, False, "must equal training.batch_size (8)"), (16, 16, True, "left unset under")],
)
def test_privacy_aware_batch_that_disagrees_with_the_learner_is_refused(
    tiny, batch, training_batch, fedsgd, allowed
):
    selection = {"kind": "privacy_aware", "k": 4, "batch_size": batch}
    d = _scenario(tiny, selection) if fedsgd else _local_sgd(tiny, selection, training_batch)
    with pytest.raises(ScenarioError) as info:
        validate(d)
    assert info.value.key == "selection.batch_size"
    assert allowed in str(info.value)
