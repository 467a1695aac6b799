"""gaussian_local: noise scale of each calibration, accountant oracles, closed-form column."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from helpers_dp import oracle_epsilon, scenario, view

from fedgame.privacy.accountants import make_accountant
from fedgame.privacy.base import Charge
from fedgame.privacy.calibrate import analytic_gaussian_sigma, epsilon_to_zcdp
from fedgame.privacy.gaussian_local import (
    LocalGaussian,
    classic_epsilon,
    moments_closed_form_epsilon,
)
from fedgame.privacy.local_common import sample_sensitivity
from fedgame.views import Response, RoundInfo

INFO = RoundInfo(1, 10, 3)


def plan_for(mech, clients):
    responses = [Response(c.client_id, True) for c in clients]
    return mech.plan(clients, responses, info=INFO)


def empirical_std(mech, plan, width=100_000):
    zeros = torch.zeros(len(plan.client_ids), width, dtype=torch.float64)
    out = mech.privatise(zeros, plan, generator=torch.Generator().manual_seed(1))
    return out.std(dim=1).numpy()


def test_classic_sigma_is_dwork_roth_per_participation():
    mech = LocalGaussian(LocalGaussian.Config(calibration="classic", clip=2.0))
    mech.epsilon_per_round(np.array([8.0]), np.array([1e-5]), participations=4)
    clients = [view(0, eps_total=2.0), view(1, eps_total=3.6)]
    plan = plan_for(mech, clients)
    # sigma = C sqrt(2 ln(1.25/delta_r)) / eps_r with eps_r = eps/4, delta_r = 1e-5/4
    expected = [2.0 * math.sqrt(2 * math.log(1.25 * 4 / 1e-5)) / (e / 4) for e in (2.0, 3.6)]
    np.testing.assert_allclose(plan.noise_std, expected, rtol=1e-12)
    np.testing.assert_allclose(empirical_std(mech, plan), expected, rtol=0.01)
    assert plan.charges[0].delta == pytest.approx(1e-5 / 4)


def test_analytic_sigma_is_exact_per_participation():
    mech = LocalGaussian(LocalGaussian.Config(calibration="analytic", clip=2.0))
    mech.epsilon_per_round(np.array([8.0]), np.array([1e-5]), participations=4)
    plan = plan_for(mech, [view(0, eps_total=20.0)])  # eps_r = 5 >= 1: still exact
    assert mech.accountant.name == "basic"
    expected = 2.0 * analytic_gaussian_sigma(epsilon=5.0, delta=1e-5 / 4)
    assert plan.noise_std[0] == pytest.approx(expected, rel=1e-12)


def test_dpfl_bcs_sigma_is_paper_000_lemma_1():
    mech = LocalGaussian(
        LocalGaussian.Config(calibration="dpfl_bcs", clip=1.5, adjacency="replace", c2=1.2)
    )
    mech.epsilon_per_round(np.array([1.0]), np.array([1e-5]), participations=9)
    plan = plan_for(mech, [view(0, eps_total=2.0, participations=9)])
    # sigma = c2 * Delta * sqrt(T ln(1/delta)) / eps, Delta = 2C
    expected = 1.2 * 3.0 * math.sqrt(9 * math.log(1e5)) / 2.0
    assert plan.noise_std[0] == pytest.approx(expected, rel=1e-12)
    np.testing.assert_allclose(empirical_std(mech, plan), [expected], rtol=0.01)


def test_sample_level_sensitivity_is_2_eta_B_over_D():
    # paper 000 Lemma 1: Delta = 2 eta B / D_n; eta = 0.1, B = 20, D_n = 600 (MNIST setting)
    got = sample_sensitivity(clip=20.0, lr=0.1, dataset_sizes=np.array([600]), factor=2.0)
    assert got[0] == pytest.approx(2 * 0.1 * 20 / 600)


def test_accountant_calibration_meets_budget_under_rdp_and_pld_oracle():
    mech = LocalGaussian(LocalGaussian.Config(calibration="accountant", clip=1.0))
    mech.epsilon_per_round(np.array([1.0]), np.array([1e-5]), participations=10)
    clients = [view(0, eps_total=0.3, participations=10), view(1, eps_total=7.0, participations=10)]
    plan = plan_for(mech, clients)
    np.testing.assert_allclose(empirical_std(mech, plan), plan.noise_std, rtol=0.01)
    for client, charge in zip(clients, plan.charges):
        eps_rdp, eps_pld = oracle_epsilon("rdp", charge, 10), oracle_epsilon("pld", charge, 10)
        assert eps_rdp <= client.epsilon_total * (1 + 1e-6)
        assert eps_rdp >= 0.98 * client.epsilon_total  # tight: not over-noised
        assert 0.6 * eps_rdp <= eps_pld <= eps_rdp * 1.01  # PLD is the tighter oracle
        # zCDP closed form z = sqrt(T / (2 rho)) is an upper bound on the noise needed
        rho = epsilon_to_zcdp(client.epsilon_total, delta=1e-5)
        assert charge.noise_multiplier <= math.sqrt(10 / (2 * rho))


def test_accountant_z_cached_per_budget():
    mech = LocalGaussian(LocalGaussian.Config())
    mech.epsilon_per_round(np.array([1.0]), np.array([1e-5]), participations=5)
    a = mech.next_charge(view(0, eps_total=2.0))
    b = mech.next_charge(view(7, eps_total=2.0))
    assert a.noise_multiplier == b.noise_multiplier and len(mech.calibration._cache) == 1
    z = make_accountant("rdp").calibrate(
        epsilon=2.0, delta=1e-5, releases=5, template=Charge("gaussian", delta=2e-6)
    )
    assert a.noise_multiplier == z


def test_closed_form_columns_values():
    # c2 sqrt(T ln(1/delta)) / z with T = 4, z = 2
    assert moments_closed_form_epsilon(sum_inv_z2=4 / 4, delta=1e-5) == pytest.approx(
        math.sqrt(4 * math.log(1e5)) / 2
    )
    assert classic_epsilon(noise_multiplier=2.0, delta=1e-5) == pytest.approx(
        math.sqrt(2 * math.log(1.25e5)) / 2
    )


def test_end_to_end_reports_epsilon_and_closed_form(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    data = scenario(tiny, privacy={"kind": "gaussian_local", "clip": 1.0})
    result = simulate(validate(data))
    clients = result.clients
    assert result.completed and len(result.rounds) == 3
    released = clients[clients["uploaded"]]
    assert len(released) > 0
    assert (clients["epsilon_spent"] <= clients["epsilon_total"] * (1 + 1e-9)).all()
    assert (released["epsilon_closed_form"] > 0).all()


def test_sample_level_end_to_end_uses_fedsgd(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    data = scenario(
        tiny,
        privacy={"kind": "gaussian_local", "level": "sample", "adjacency": "replace"},
        training={"mode": "fedsgd", "lr": 0.5, "device": "cpu"},
    )
    result = simulate(validate(data))
    up = result.clients[result.clients["uploaded"]]
    assert result.completed and len(up) > 0
    # noise_std in update units = z_k * 2 eta C / D_k, T = ceil(3 rounds * 5/12) = 2
    for _, row in up.head(4).iterrows():
        z = make_accountant("rdp").calibrate(
            epsilon=row["epsilon_total"],
            delta=1e-5,
            releases=2,
            template=Charge("gaussian", delta=5e-6),
        )
        assert row["noise_std"] == pytest.approx(z * 2 * 0.5 * 1.0 / row["dataset_size"])
