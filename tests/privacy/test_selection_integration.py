"""Local mechanisms read the selection's per-client plan (T_n, budget share, loss bound)."""

from __future__ import annotations

import copy
import math
import warnings

import numpy as np
import pytest
from helpers_dp import view

import fedgame.plugins  # noqa: F401
from fedgame.model import FedGameModel
from fedgame.privacy.calibrate import bcs_sensitivity, privacy_aware_sigma
from fedgame.privacy.gaussian_local import LocalGaussian
from fedgame.privacy.laplace_local import LocalLaplace
from fedgame.run.single import simulate
from fedgame.scenario.load import validate
from fedgame.views import Response, RoundInfo, SetupContext

BASE = {
    "name": "integration",
    "seed": 11,
    "rounds": 8,
    "population": {
        "clients": 16,
        "budget": {"epsilon": {"dist": "uniform", "low": 0.3, "high": 3.0}, "delta": 1e-5},
    },
    "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "dirichlet", "alpha": 3.0}},
    "model": {"kind": "logreg"},
    "training": {"mode": "fedsgd", "lr": 0.05, "clip_norm": "l2", "device": "cpu"},
    "selection": {"kind": "bcs", "k": 4, "t0": 3, "c2": 1.5},
    "privacy": {
        "kind": "gaussian_local",
        "calibration": "dpfl_bcs",
        "level": "sample",
        "adjacency": "replace",
        "c2": 1.5,
    },
    "network": {"faults": {"kind": "none"}},
}


def scenario(**sections):
    out = copy.deepcopy(BASE)
    for key, value in sections.items():
        merge = isinstance(value, dict) and "kind" not in value  # a new kind replaces the section
        out[key] = {**out[key], **value} if merge else value
    return out


class FakeSelection:
    """Hooks only: T_n, budget share and a stage-1 loss bound for rounds 1-2."""

    def __init__(self, planned, share, theta=0.0):
        self.planned, self.share, self.theta = planned, share, theta

    def planned_participations(self, client_id):
        return self.planned[client_id]

    def budget_fraction(self, client_id):
        return self.share[client_id]

    def loss_bound(self, round_index):
        return self.theta if round_index <= 2 else 0.0


def prepared(mech, selection, clients):
    ctx = SetupContext(
        num_clients=len(clients),
        rounds=10,
        clients=tuple(clients),
        selection=selection,
        planned_participations=5,
    )
    mech.epsilon_per_round(np.ones(1), np.ones(1), participations=5)
    mech.prepare(ctx, rng=np.random.default_rng(0))
    return mech


def test_dpfl_bcs_sigma_uses_each_clients_own_T_and_share():
    clients = [view(0, eps_total=2.0), view(1, eps_total=2.0)]
    sel = FakeSelection({0: 9, 1: 4}, {0: 1.0, 1: 0.5})
    cfg = LocalGaussian.Config(calibration="dpfl_bcs", clip=1.5, adjacency="replace", c2=1.2)
    mech = prepared(LocalGaussian(cfg), sel, clients)
    plan = mech.plan(clients, [Response(0, True), Response(1, True)], info=RoundInfo(5, 10, 2))
    # client 0: 1.2 * 3 * sqrt(9 ln 1e5) / 2 = 18.3226; client 1 (stage 2, share 1/2):
    # eps = 1, delta = 5e-6, T = 4: 1.2 * 3 * sqrt(4 ln 2e5) / 1 = 25.1548
    np.testing.assert_allclose(plan.noise_std, [18.3226, 25.1548], rtol=1e-4)
    # a fixed count ignores the hooks: T = 5 for both, whole budget
    fixed = prepared(LocalGaussian(cfg.model_copy(update={"participations": 5})), sel, clients)
    z = 1.2 * math.sqrt(5 * math.log(1e5)) / 2.0
    assert fixed.next_charge(clients[1]).noise_multiplier == pytest.approx(z)


def test_laplace_scale_and_charge_use_T_n():
    clients = [view(0, eps_total=2.0), view(1, eps_total=2.0)]
    mech = prepared(
        LocalLaplace(LocalLaplace.Config(clip=1.0)),
        FakeSelection({0: 4, 1: 1}, {0: 1.0, 1: 1.0}),
        clients,
    )
    plan = mech.plan(clients, [Response(0, True), Response(1, True)], info=RoundInfo(5, 10, 2))
    # b = T Delta1 / eps with Delta1 = 2C: 4 * 2 / 2 = 4 and 1 * 2 / 2 = 1
    np.testing.assert_allclose(plan.noise_std, [4.0, 1.0])
    assert 1 / mech.next_charge(clients[0]).noise_multiplier == pytest.approx(0.5)


def test_bcs_model_sigma_at_own_T_n_and_stage1_sensitivity():
    model = FedGameModel(validate(scenario()))
    sel, mech = model.world.components.selection, model.privacy
    views = [c.view() for c in model.clients]
    planned = [sel.planned_participations(v.client_id) for v in views]
    assert len(set(planned) - {0}) > 1  # a biased plan: distinct T_n
    lr, theta = 0.05, sel.config.loss_bound
    for v, t_n in zip(views, planned):
        z = 1.5 * math.sqrt(max(t_n, 1) * math.log(1 / v.delta)) / v.epsilon_total
        assert mech.next_charge(v).noise_multiplier == pytest.approx(z, rel=1e-12)
    # stage-1 rounds (1..t0 = 3): 2 eta (B + Theta) / D_n (Eq. 13); later rounds 2 eta B / D_n
    stage1 = mech.sensitivities(views, round_index=0)
    stage2 = mech.sensitivities(views, round_index=3)
    for v, s1, s2 in zip(views, stage1, stage2):
        d_n = v.dataset_size
        assert s1 == pytest.approx(
            bcs_sensitivity(clip=1.0, lr=lr, dataset_size=d_n, loss_bound=theta)
        )
        assert s2 == pytest.approx(bcs_sensitivity(clip=1.0, lr=lr, dataset_size=d_n))
    ids = [v.client_id for v in views[:3]]
    plan = mech.plan(views[:3], [Response(i, True) for i in ids], info=RoundInfo(1, 8, 16))
    z = mech.multipliers(mech.target(views[:3]))
    np.testing.assert_allclose(plan.noise_std, z * stage1[:3], rtol=1e-12)


def test_privacy_aware_sigma_uses_realised_T_k():
    sc = scenario(
        selection={"kind": "privacy_aware", "k": 4, "eta_d": 1e4, "batch_size": 16},
        privacy={"kind": "dpsgd_local", "calibration": "privacy_aware", "clip": 1.0},
        training={"mode": "local_sgd", "local_steps": 2, "batch_size": 16, "clip_norm": "l2"},
        population={
            "budget": {"epsilon": {"dist": "uniform", "low": 0.1, "high": 1.0}, "delta": 1e-5}
        },
    )
    model = FedGameModel(validate(sc))
    sel, mech = model.world.components.selection, model.privacy
    counts = sel.counts
    assert counts.sum() == 4 * 8 and len(set(counts.tolist()) - {0}) > 1
    for c in model.clients:
        v = c.view()
        q = min(1.0, 16 / v.dataset_size)
        expected = privacy_aware_sigma(
            clip=1.0, epsilon=v.epsilon_total, delta=v.delta, sample_rate=q,
            dataset_size=16 / q, participations=max(int(counts[v.client_id]), 1), local_steps=2,
        )  # fmt: skip
        assert mech.terms(v)[1] == pytest.approx(expected, rel=1e-12)


RUNS = {
    "bcs_dpfl_c2_1.5": {},
    "bcs_accountant": {"privacy": {"calibration": "accountant"}},
    "privacy_aware_dpsgd": {
        "selection": {"kind": "privacy_aware", "k": 4, "eta_d": 1e4},
        "privacy": {"kind": "dpsgd_local", "calibration": "accountant", "clip": 1.0},
    },
    "round_robin_laplace": {
        "selection": {"kind": "round_robin", "b": 5},
        "privacy": {"kind": "laplace_local", "level": "sample", "clip": 5.0},
        "training": {"clip_norm": "l1"},
    },
}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_scheduled_clients_afford_their_plan_and_never_overspend(name):
    sc = scenario(**copy.deepcopy(RUNS[name]))
    res = simulate(validate(sc))
    c, r = res.clients, res.rounds
    assert (c["epsilon_spent"] <= c["epsilon_total"] * (1 + 1e-9)).all()
    for col in ("bcs_missing", "presampled_missing"):
        if col in r:
            assert (r[col] == 0).all()  # no scheduled client refused by the budget check
    final = c[c["round"] == c["round"].max()]
    assert (final["epsilon_spent"] > 0.5 * final["epsilon_total"]).any()  # budgets are used
    if name == "round_robin_laplace":  # 40 replies: n_i = 3 or 2, each spends eps_i exactly
        assert (c.groupby("round")["selected"].sum() == 5).all()
        np.testing.assert_allclose(final["epsilon_spent"], final["epsilon_total"], rtol=1e-9)


def test_stage_change_never_releases_above_the_priced_charge():
    # c2 = 1 overshoots the RDP ledger; stage 2 may give a client fewer releases at a lower z
    # than stage 1 priced: the release keeps the priced z, so no client overspends
    budget = {"epsilon": {"dist": "uniform", "low": 0.1, "high": 3.0},
              "delta": {"dist": "uniform", "low": 1e-5, "high": 1e-4}}  # fmt: skip
    sc = scenario(
        rounds=12, selection={"k": 5, "c2": 1.0}, privacy={"c2": 1.0},
        population={"clients": 20, "budget": budget},
    )  # fmt: skip
    res = simulate(validate(sc))
    c = res.clients
    assert (c["epsilon_spent"] <= c["epsilon_total"] * (1 + 1e-9)).all()
    assert (res.rounds["bcs_stage"] == 2).any()


@pytest.mark.parametrize(("clip", "flagged"), [(1.0, False), (25.0, True)])
def test_a_p2_fit_at_the_optimisers_bound_is_flagged_and_warned(clip, flagged):
    """At B = 25 the stage-1 losses carry noise 2(B + Θ)/D_n too large to pin P2's
    constants: the fit runs to e^20 and the run says so (round column and a warning)."""
    sc = scenario(selection={"clip": clip}, privacy={"clip": clip})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = simulate(validate(sc))
    stage2 = res.rounds[res.rounds["bcs_stage"] == 2]
    assert len(stage2) > 0
    assert (stage2["bcs_p2_at_bound"] == float(flagged)).all()
    said = [w for w in caught if "fit of P2 ran to the optimiser's bound" in str(w.message)]
    assert bool(said) is flagged
