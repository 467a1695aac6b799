"""LightDP-FL privacy plug-in and its baselines: noise cancellation, residuals, failures."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
import torch

from fedgame.errors import ScenarioError
from fedgame.game import lightdp as ld
from fedgame.mechanisms.base import FaultDraw
from fedgame.mechanisms.faults.correlated import BoundedStragglers
from fedgame.mechanisms.faults.independent import NoFaults
from fedgame.privacy.baselines import IdealSmpc, LocalDP, SmpcDP
from fedgame.privacy.calibrate import analytic_gaussian_sigma
from fedgame.privacy.lightdp import LightDP, pair_arrays, pairwise_noise
from fedgame.run.single import simulate
from fedgame.scenario.load import validate
from fedgame.views import ClientView, Response, RoundInfo, SetupContext


def views(n: int, *, colluders: int = 0, eps: float = 3.0) -> list[ClientView]:
    return [
        ClientView(i, 100, 0.0, 1.0, eps * 10, 1e-4, 0.0, eps, 1e-5, 0.0, i < colluders)
        for i in range(n)
    ]


def prepared(cls, n: int, faults, *, graph=None, colluders: int = 0, **cfg):
    mech = cls(cls.Config(**cfg))
    ctx = SetupContext(
        num_clients=n,
        rounds=5,
        clients=tuple(views(n, colluders=colluders)),
        graph=graph if graph is not None else nx.complete_graph(n),
        faults=faults,
        planned_participations=5,
    )
    mech.prepare(ctx, rng=np.random.default_rng(0))
    return mech


def plan_for(mech, n: int, rnd: int = 1, colluders: int = 0):
    vs = views(n, colluders=colluders)
    return mech.plan(vs, [Response(v.client_id, True) for v in vs], info=RoundInfo(rnd, 5, n))


def design(plan):
    """The LightDP noise design of a planned round (its frozen plan's)."""
    return plan.design


def after_upload(plan, n: int, late=None, down=()):
    """The round's plan once the uploads are over (what the model hands the mechanism)."""
    late = np.zeros(n, bool) if late is None else late
    return plan.after_upload(FaultDraw(np.ones(n, bool), late, down))


def noise_rows(mech, plan, n: int, p: int, seed: int = 0) -> torch.Tensor:
    zeros = torch.zeros(n, p, dtype=torch.float64)
    rows, _ = mech.privatise(zeros, plan, generator=torch.Generator().manual_seed(seed))
    return rows


def test_pairwise_terms_cancel_exactly_in_the_sum():
    lo, hi = pair_arrays(nx.complete_graph(30), list(range(30)))
    assert lo.size == 435 and np.all(lo < hi)
    like = torch.zeros(1, dtype=torch.float64)
    pair = pairwise_noise(
        lo, hi, rows=30, cols=500, sigma=3.0, like=like, generator=torch.Generator().manual_seed(1)
    )
    assert pair.std() > 10  # each row carries 29 terms of std 3
    assert pair.sum(0).abs().max() < 1e-9


def test_aggregate_variance_is_individual_only_without_stragglers():
    n, p = 50, 20000
    mech = prepared(LightDP, n, NoFaults(None), max_colluders=10, max_stragglers=10)
    plan = plan_for(mech, n)
    d = design(plan)
    assert d.gamma0 > 0.05  # pairwise noise is really there
    agg = noise_rows(mech, plan, n, p).mean(0)
    # max_stragglers=10 but NoFaults: g is the point mass at 0 -> mu = 0 design
    assert agg.var().item() == pytest.approx(d.sigma_individual**2 / n, rel=0.05)


@pytest.mark.parametrize("s", [5, 15])
def test_residual_with_stragglers_matches_eq9(s):
    n, p = 50, 20000
    faults = BoundedStragglers(BoundedStragglers.Config(max_stragglers=20))
    mech = prepared(LightDP, n, faults, max_colluders=10)
    plan = plan_for(mech, n)
    d = design(plan)
    rows = noise_rows(mech, plan, n, p, seed=s)
    late = np.zeros(n, bool)
    late[np.random.default_rng(s).choice(n, s, replace=False)] = True
    agg = rows[torch.as_tensor(~late)].mean(0)
    expected = (s * d.sigma_pairwise**2 + d.sigma_individual**2) / (n - s)
    assert agg.var().item() == pytest.approx(expected, rel=0.05)
    rounds, _ = mech.release_metrics(after_upload(plan, n, late))
    assert rounds["residual_noise_var"] == pytest.approx(expected, rel=1e-12)


def test_design_matches_example1_and_falls_back():
    n = 50
    faults = BoundedStragglers(BoundedStragglers.Config(max_stragglers=10))
    mech = prepared(
        LightDP, n, faults, max_colluders=10, calibration="lightdp", allow_loose_classic=True
    )
    plan = plan_for(mech, n)
    assert design(plan).gamma0 == pytest.approx(0.079656, abs=1e-6)
    c = ld.tail_constant(1e-5)
    # note 004 §4.4 worked values at eps = 3, delta = 1e-5, Delta = 1
    assert design(plan).sigma_individual == pytest.approx(0.9477, abs=1e-4)
    assert design(plan).sigma_pairwise == pytest.approx(0.2675, abs=1e-4)
    # mu >= N - C_bar - 1 (C_bar = 44, S_bar = 10): no positive root, plain local DP
    mech2 = prepared(
        LightDP, n, faults, max_colluders=44, calibration="lightdp", allow_loose_classic=True
    )
    plan2 = plan_for(mech2, n)
    assert design(plan2).gamma0 == 0.0
    assert design(plan2).sigma_individual == pytest.approx(c / 3.0)


def test_effective_noise_counts_only_honest_partners():
    n = 20
    mech = prepared(LightDP, n, NoFaults(None), colluders=5, max_colluders=5)
    plan = plan_for(mech, n, colluders=5)
    rounds, clients = mech.release_metrics(after_upload(plan, n))
    eff = clients["effective_noise_var"]
    d = design(plan)
    assert eff[0] == 0.0  # a colluder reveals everything
    assert eff[10] == pytest.approx((n - 5 - 1) * d.sigma_pairwise**2 + d.sigma_individual**2)
    assert rounds["colluders"] == 5


def test_ldp_and_smpc_noise_levels():
    n = 50
    faults = BoundedStragglers(BoundedStragglers.Config(max_stragglers=10))
    ldp = prepared(LocalDP, n, faults, calibration="lightdp", allow_loose_classic=True)
    smpc = prepared(
        SmpcDP, n, faults, max_colluders=10, calibration="lightdp", allow_loose_classic=True
    )
    s_l = plan_for(ldp, n).noise_std
    s_s = plan_for(smpc, n).noise_std
    assert s_l[0] == pytest.approx(ld.tail_constant(1e-5) / 3.0)
    assert s_s[0] == pytest.approx(s_l[0] / np.sqrt(30))


def test_default_analytic_calibration_scales_every_scheme_alike():
    """Default: σ_L is the analytic Gaussian σ of (ε, δ) = (3, 1e-5); LightDP's design keeps
    its Example-1 ratio γ0, both terms scaled by σ_L(analytic)/σ_L(paper constant)."""
    n = 50
    faults = BoundedStragglers(BoundedStragglers.Config(max_stragglers=10))
    sigma_l = analytic_gaussian_sigma(epsilon=3.0, delta=1e-5)
    assert plan_for(prepared(LocalDP, n, faults), n).noise_std[0] == pytest.approx(sigma_l)
    paper = prepared(
        LightDP, n, faults, max_colluders=10, calibration="lightdp", allow_loose_classic=True
    )
    exact = prepared(LightDP, n, faults, max_colluders=10)
    paper_plan = plan_for(paper, n)
    plan = plan_for(exact, n)
    ratio = sigma_l / (ld.tail_constant(1e-5) / 3.0)
    assert design(plan).gamma0 == pytest.approx(design(paper_plan).gamma0)
    assert design(plan).sigma_individual == pytest.approx(
        design(paper_plan).sigma_individual * ratio
    )
    # each release is described as the local-DP Gaussian it is worth: z = σ_L / Δ
    assert plan.charges[0].noise_multiplier == pytest.approx(sigma_l)


def test_smpc_round_fails_when_masks_cannot_be_recovered():
    n = 10
    faults = BoundedStragglers(BoundedStragglers.Config(max_stragglers=2))
    smpc = prepared(SmpcDP, n, faults, max_colluders=2)
    plan = plan_for(smpc, n)
    delta = torch.zeros(3)
    gen = torch.Generator()
    late = np.zeros(n, bool)
    late[3] = True
    uploaded = after_upload(plan, n, late)
    assert smpc.finalise(delta, uploaded, num_received=9, generator=gen) is not None
    down = tuple((0, j) for j in range(1, 4))  # client 0 loses 3 links: 0..3 not ok
    uploaded = after_upload(plan, n, late, down)
    assert smpc.finalise(delta, uploaded, num_received=9, generator=gen) is None
    assert smpc.release_metrics(uploaded)[0]["smpc_status"] == 1
    late[:5] = True  # 5 > S_bar stragglers: too few uploads before the deadline
    uploaded = after_upload(plan, n, late)
    assert smpc.finalise(delta, uploaded, num_received=5, generator=gen) is None
    assert smpc.release_metrics(uploaded)[0]["smpc_status"] == 2
    ideal = prepared(IdealSmpc, n, faults, max_colluders=2)
    ideal_plan = plan_for(ideal, n)
    assert ideal.finalise(delta, ideal_plan, num_received=5, generator=gen) is not None


def small(privacy: dict, **over) -> dict:
    sc = {
        "name": "ldp_small",
        "seed": 5,
        "rounds": 3,
        "population": {"clients": 12, "budget": {"epsilon": 30.0, "delta": 3e-5}, "colluders": 0},
        "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "iid"}},
        "model": {"kind": "logreg"},
        "training": {"local_steps": 2, "batch_size": 8, "lr": 0.1, "device": "cpu"},
        "selection": {"kind": "all"},
        "aggregation": {"kind": "mean"},
        "privacy": {
            "kind": "lightdp",
            "max_colluders": 3,
            "level": "sample",
            "participations": 3,
            **privacy,
        },
        "network": {
            "topology": {"kind": "complete"},
            "faults": {"kind": "bounded_stragglers", "max_stragglers": 2},
        },
    }
    sc.update(over)
    return sc


def test_colluders_change_effective_privacy_not_training():
    base = simulate(validate(small({})))
    coll = small({})
    coll["population"]["colluders"] = 3
    other = simulate(validate(coll))
    np.testing.assert_array_equal(base.rounds["test_accuracy"], other.rounds["test_accuracy"])
    assert (other.rounds["colluders"] == 3).all() and (base.rounds["colluders"] == 0).all()
    eb, eo = base.clients["effective_noise_var"], other.clients["effective_noise_var"]
    assert (eo.fillna(0) <= eb.fillna(0) + 1e-15).all() and (eo < eb).any()


SECURE = {"kind": "secure", "inner": "mean"}


def test_smpc_dp_wraps_secure_aggregation_and_its_recovery_policy():
    sc = small({"kind": "smpc_dp"}, aggregation={**SECURE, "recovery": "p2p", "threshold": 10})
    sc["network"]["faults"]["edge_failure"] = 0.5
    out = simulate(validate(sc))
    assert out.rounds["aggregation_failed"].all()
    assert (out.rounds["secure_status"] == 1).all() and (out.rounds["smpc_status"] == -1).all()
    sc["privacy"]["kind"] = "ideal_smpc"
    sc["aggregation"] = {**SECURE, "recovery": "always"}
    assert not simulate(validate(sc)).rounds["aggregation_failed"].any()


def test_the_wrap_releases_what_the_ideal_mask_model_released():
    """Same noise, same recovery: the secure sum differs from the ideal one by fixed point."""
    ideal = simulate(validate(small({"kind": "ideal_smpc"})))
    real = simulate(validate(small({"kind": "ideal_smpc"}, aggregation={**SECURE})))
    np.testing.assert_array_equal(ideal.clients["noise_std"], real.clients["noise_std"])
    np.testing.assert_allclose(
        ideal.rounds["test_loss"], real.rounds["test_loss"], rtol=1e-4, atol=1e-6
    )
    assert (real.rounds["secure_error"] < 1e-4).all()


@pytest.mark.parametrize(
    ("privacy", "aggregation", "key"),
    [
        ({"kind": "smpc_dp", "recovery": "none"}, {**SECURE}, "privacy.recovery"),
        ({"kind": "smpc_dp"}, {"kind": "secure", "inner": "fedavg"}, "aggregation.inner.kind"),
        ({"kind": "ideal_smpc"}, {**SECURE, "recovery": "p2p"}, "aggregation.recovery"),
    ],
)
def test_wrong_wraps_are_refused_naming_the_key(privacy, aggregation, key):
    with pytest.raises(ScenarioError) as info:
        validate(small(privacy, aggregation=aggregation))
    assert info.value.key == key


def test_the_old_ideal_mask_spelling_works_with_one_deprecation_line():
    with pytest.warns(FutureWarning, match="aggregation: mean .* is deprecated") as caught:
        validate(small({"kind": "smpc_dp", "recovery": "p2p"}))
    assert len([w for w in caught if issubclass(w.category, FutureWarning)]) == 1


def test_smpc_with_link_failures_flags_failed_rounds():
    sc = small({"kind": "smpc_dp", "recovery": "p2p"})
    sc["network"]["faults"]["edge_failure"] = 0.5
    out = simulate(validate(sc))
    assert out.rounds["aggregation_failed"].all()
    assert (out.rounds["smpc_status"] == 1).all()
    sc["privacy"]["kind"] = "ideal_smpc"
    del sc["privacy"]["recovery"]
    assert not simulate(validate(sc)).rounds["aggregation_failed"].any()


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"privacy": {"max_colluders": 10}}, "privacy.max_colluders"),  # 10 + S_bar 2 >= 12
        ({"privacy": {"kind": "smpc_dp", "max_colluders": 11}}, "privacy.max_colluders"),
        ({"aggregation": {"kind": "fedavg"}}, "aggregation"),
        ({"network": {"topology": {"kind": "erdos_renyi", "p": 0.5}}}, "network.topology"),
        (
            {"network": {"faults": {"kind": "independent", "link_failure": 1.0}}},
            "network.faults.link_failure",
        ),
    ],
)
def test_bad_inputs_exit_2(change, key, write_scenario, capsys):
    from fedgame.cli import main

    sc = small({})
    for section, value in change.items():
        if section == "network":
            sc["network"].update(value)
        elif isinstance(sc.get(section), dict):
            sc[section] = {**sc[section], **value}
        else:
            sc[section] = value
    assert main(["validate", str(write_scenario(sc))]) == 2
    assert key in capsys.readouterr().err


def test_incomplete_graph_uses_ldp_floor():
    n = 20
    ring = nx.cycle_graph(n)
    mech = prepared(
        LightDP,
        n,
        NoFaults(None),
        graph=ring,
        max_colluders=2,
        incomplete_graph="ldp_floor",
        calibration="lightdp",
        allow_loose_classic=True,
    )
    plan = plan_for(mech, n)
    assert design(plan).sigma_individual == pytest.approx(ld.tail_constant(1e-5) / 3.0)
    # pairwise terms only on the ring's edges
    assert plan.adjacency().sum() == 2 * n


@pytest.mark.parametrize("cls", [LightDP, LocalDP, SmpcDP, IdealSmpc])
def test_update_norm_is_the_norm_of_the_mean_clipped_update(cls):
    """``update_norm`` (the signal the noise is measured against) is ‖mean of the clipped
    rows‖ before noise, for every paper-004 mechanism; rows above the clip are scaled to it."""
    n, p = 12, 40
    extra = {"max_stragglers": 2} if cls is not LocalDP else {}
    mech = prepared(cls, n, NoFaults(None), clip=1.0, **extra)
    plan = plan_for(mech, n)
    rows = torch.randn(n, p, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    rows[:4] *= 0.01  # inside the clip: kept as they are
    _, metrics = mech.privatise(rows, plan, generator=torch.Generator().manual_seed(4))
    scale = torch.clamp(1.0 / rows.norm(dim=1, keepdim=True), max=1.0)
    expected = float((rows * scale).mean(0).norm())
    assert "update_norm" in cls.round_columns
    assert float(metrics["update_norm"]) == pytest.approx(expected, rel=1e-12)
    assert 0 < expected <= 1.0


def test_smpc_dp_states_the_straggler_bound_its_noise_is_sized_for():
    """A secure sum around smpc_dp defaults to K − S̄ with smpc_dp's S̄: its own
    ``max_stragglers``, else the fault model's."""
    from fedgame.mechanisms.aggregation.secure import straggler_bound

    faults = BoundedStragglers(BoundedStragglers.Config(max_stragglers=2))
    assert straggler_bound(prepared(SmpcDP, 10, faults, max_colluders=2), faults) == 2
    own = prepared(SmpcDP, 10, faults, max_colluders=2, max_stragglers=3)
    assert straggler_bound(own, faults) == 3
