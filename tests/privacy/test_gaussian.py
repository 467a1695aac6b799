"""The ``gaussian`` mechanism: analytic calibration by default, classic only where it holds."""

from __future__ import annotations

import dataclasses
import math
import warnings

import dp_accounting as dpa
import numpy as np
import pytest
import torch

from fedgame.errors import ScenarioError
from fedgame.privacy.calibrate import analytic_gaussian_epsilon, analytic_gaussian_sigma
from fedgame.privacy.gaussian import GaussianMechanism
from fedgame.views import ClientView, Response, RoundInfo


def view(cid: int, eps_round: float, delta_round: float) -> ClientView:
    return ClientView(
        client_id=cid,
        dataset_size=10,
        emd=0.0,
        privacy_value=1.0,
        epsilon_total=10.0,
        delta=1e-5,
        epsilon_spent=0.0,
        epsilon_round=eps_round,
        delta_round=delta_round,
        straggle_prob=0.0,
        colluder=False,
    )


def test_default_is_the_analytic_gaussian_for_any_epsilon_and_noise_has_that_std():
    mech = GaussianMechanism(GaussianMechanism.Config(clip=2.0))
    clients = [view(0, 0.5, 1e-5), view(1, 9.7, 1e-6)]  # 9.7: the old quickstart's worst case
    plan = mech.plan(clients, [Response(0, True), Response(1, True)], info=RoundInfo(1, 10, 2))
    expected = [
        2.0 * analytic_gaussian_sigma(epsilon=0.5, delta=1e-5),
        2.0 * analytic_gaussian_sigma(epsilon=9.7, delta=1e-6),
    ]
    np.testing.assert_allclose(plan.noise_std, expected, rtol=1e-12)
    # each release is exactly (eps_r, delta_r)-DP: its z gives back eps_r at delta_r
    z = plan.charges[1].noise_multiplier
    assert analytic_gaussian_epsilon(noise_multiplier=z, delta=1e-6) == pytest.approx(9.7)
    zeros = torch.zeros(2, 200_000, dtype=torch.float64)
    noisy = mech.privatise(zeros, plan, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(noisy.std(dim=1).numpy(), expected, rtol=0.01)


def test_classic_by_name_is_dwork_roth_below_one():
    mech = GaussianMechanism(GaussianMechanism.Config(clip=2.0, calibration="classic"))
    clients = [view(0, 0.5, 1e-5), view(1, 0.9, 1e-6)]
    plan = mech.plan(clients, [Response(0, True), Response(1, True)], info=RoundInfo(1, 10, 2))
    expected = [
        2.0 * math.sqrt(2 * math.log(1.25 / 1e-5)) / 0.5,
        2.0 * math.sqrt(2 * math.log(1.25 / 1e-6)) / 0.9,
    ]
    np.testing.assert_allclose(plan.noise_std, expected, rtol=1e-12)


def test_classic_refuses_a_release_at_epsilon_one_or_more_unless_allowed():
    strict = GaussianMechanism(GaussianMechanism.Config(calibration="classic"))
    with pytest.raises(ScenarioError, match="classic bound does not hold"):
        strict.plan([view(0, 2.0, 1e-5)], [Response(0, True)], info=RoundInfo(1, 1, 1))
    loose = GaussianMechanism(
        GaussianMechanism.Config(calibration="classic", allow_loose_classic=True)
    )
    plan = loose.plan([view(0, 2.0, 1e-5)], [Response(0, True)], info=RoundInfo(1, 1, 1))
    assert plan.noise_std[0] == pytest.approx(math.sqrt(2 * math.log(1.25e5)) / 2.0)


def test_updates_clipped_to_norm_before_noise():
    mech = GaussianMechanism(GaussianMechanism.Config(clip=1.0))
    big = torch.full((3, 100), 5.0, dtype=torch.float64)
    plan = mech.plan(
        [view(i, 0.5, 1e-5) for i in range(3)],
        [Response(i, True) for i in range(3)],
        info=RoundInfo(1, 1, 3),
    )
    plan = dataclasses.replace(plan, noise_std=np.zeros(3))
    out = mech.privatise(big, plan, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(torch.linalg.vector_norm(out, dim=1).numpy(), 1.0)


def test_response_epsilon_overrides_default():
    mech = GaussianMechanism(GaussianMechanism.Config(clip=1.0))
    plan = mech.plan(
        [view(0, 0.5, 1e-5)], [Response(0, True, epsilon=0.25)], info=RoundInfo(1, 1, 1)
    )
    expected = analytic_gaussian_sigma(epsilon=0.25, delta=1e-5)
    assert plan.charges[0].noise_multiplier == pytest.approx(expected)


def test_per_round_split_of_budget():
    mech = GaussianMechanism(GaussianMechanism.Config())
    eps, delta = mech.epsilon_per_round(np.array([6.0]), np.array([1e-5]), participations=3)
    assert eps[0] == 2.0 and math.isclose(delta[0], 1e-5 / 3)


def test_release_is_described_by_multiplier_and_delta_share():
    mech = GaussianMechanism(
        GaussianMechanism.Config(clip=2.0, adjacency="replace", calibration="classic")
    )
    charge = mech.next_charges([view(0, 0.5, 1e-6)])[0]
    assert charge.delta == 1e-6 and charge.noise == "gaussian"
    # z = sigma / Delta = sqrt(2 ln(1.25/delta)) / eps, independent of C
    assert math.isclose(charge.noise_multiplier, math.sqrt(2 * math.log(1.25e6)) / 0.5)
    assert charge.event() == dpa.GaussianDpEvent(charge.noise_multiplier)


def test_basic_spends_exact_release_epsilons_and_rdp_a_fresh_composition(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    tiny["rounds"] = 4
    basic = simulate(validate(tiny)).clients
    last = basic[basic["round"] == 4]
    releases = basic.groupby("client_id")["uploaded"].sum().to_numpy()
    assert releases.max() >= 2
    eps_r = last["epsilon_round"].to_numpy()  # exact per release: T releases spend T * eps_r
    np.testing.assert_allclose(last["epsilon_spent"], releases * eps_r, rtol=1e-6)
    tiny["privacy"]["accountant"] = "rdp"
    rdp = simulate(validate(tiny))
    sent = rdp.clients[rdp.clients["uploaded"]]
    cid = int(sent["client_id"].value_counts().idxmax())
    mine = sent[sent["client_id"] == cid]
    z = mine["noise_std"].to_numpy() / 1.0  # clip 1, add/remove: sigma = z
    oracle = dpa.rdp.RdpAccountant()
    for zk in z:
        oracle.compose(dpa.GaussianDpEvent(float(zk)))
    final = rdp.clients[(rdp.clients["client_id"] == cid) & (rdp.clients["round"] == 4)]
    assert final["epsilon_spent"].iloc[0] == pytest.approx(oracle.get_epsilon(1e-5), rel=1e-9)


def test_quickstart_runs_with_no_calibration_warning_and_within_budgets(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    tiny["population"]["budget"]["epsilon"] = {"dist": "uniform", "low": 20.0, "high": 60.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clients = simulate(validate(tiny)).clients
    assert (clients["epsilon_round"] > 1).all()  # the regime the classic bound cannot cover
    assert (clients["epsilon_spent"] <= clients["epsilon_total"] * (1 + 1e-9)).all()


@pytest.mark.parametrize("kind", ["gaussian", "gaussian_local"])
def test_classic_with_per_round_epsilon_of_one_or_more_exits_2(tiny, write_scenario, capsys, kind):
    from fedgame.cli import main

    tiny["privacy"] = {"kind": kind, "calibration": "classic"}
    assert main(["validate", str(write_scenario(tiny))]) == 2
    err = capsys.readouterr().err
    assert "'privacy.calibration'" in err and "allow_loose_classic" in err
    tiny["privacy"]["allow_loose_classic"] = True
    assert main(["validate", str(write_scenario(tiny))]) == 0


def test_accountant_that_does_not_exist_is_refused(tiny, write_scenario, capsys):
    from fedgame.cli import main

    tiny["privacy"]["accountant"] = "nonsense"
    assert main(["validate", str(write_scenario(tiny))]) == 2
    assert "'privacy.accountant'" in capsys.readouterr().err
