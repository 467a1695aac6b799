"""zCDP Gaussian mechanism of QI-DPFL (paper 003 Eq. 10)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedgame.privacy.zcdp_gaussian import ZcdpGaussian
from fedgame.views import ClientView, Response, RoundInfo


def view(i, size):
    return ClientView(i, size, 0.0, 1.0, 10.0, 1e-5, 0.0, 1.0, 1e-5, 0.0, False)


def test_sigma_from_response_rho_or_fixed_default():
    mech = ZcdpGaussian(ZcdpGaussian.Config(clip=2.0, rho=0.5))
    clients = [view(0, 100), view(1, 50)]
    plan = mech.plan(
        clients, [Response(0, True, rho=0.02), Response(1, True)], info=RoundInfo(1, 3, 2)
    )
    # sigma^2 = 2 C^2 / (rho |D|^2): 8/(0.02*1e4) = 0.04 ; 8/(0.5*2500) = 0.0064
    np.testing.assert_allclose(plan.noise_std, [0.2, 0.08])
    # a Gaussian release of multiplier z costs rho = 1 / (2 z^2) (Bun & Steinke Prop. 1.6)
    rho = [1 / (2 * c.noise_multiplier**2) for c in plan.charges]
    np.testing.assert_allclose(rho, [0.02, 0.5], rtol=1e-12)
    assert plan.charges[0].noise_multiplier == pytest.approx(1 / math.sqrt(0.04))
    assert mech.next_charges(clients)[0].noise_multiplier == pytest.approx(1.0)


def test_privatise_clips_then_noises():
    mech = ZcdpGaussian(ZcdpGaussian.Config(clip=1.0, rho=1e12))
    clients = [view(0, 100)]
    plan = mech.plan(clients, [Response(0, True)], info=RoundInfo(1, 3, 1))
    out = mech.privatise(torch.full((1, 4), 3.0), plan, generator=torch.Generator().manual_seed(0))
    assert torch.linalg.vector_norm(out).item() == pytest.approx(1.0, abs=1e-4)


def test_ledger_charges_rho(tiny):
    from fedgame.privacy.calibrate import zcdp_to_epsilon
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    tiny["privacy"] = {"kind": "zcdp_gaussian", "rho": 0.01}
    tiny["population"]["straggle_prob"] = 0.0
    tiny["network"]["faults"]["link_failure"] = 0.0
    result = simulate(validate(tiny))
    last = result.clients[result.clients["round"] == 3]
    releases = result.clients.groupby("client_id")["uploaded"].sum().to_numpy()
    expected = [zcdp_to_epsilon(0.01 * k, delta=1e-5) for k in releases]  # rho adds up
    assert releases.max() > 0
    np.testing.assert_allclose(last["epsilon_spent"].to_numpy(), expected, rtol=1e-9)


def test_eq10_sigma_is_z_times_the_record_level_sensitivity():
    """The preset's σ (Eq. 10, stated by calibration qi_dpfl) is the core's z·Δ with
    Δ = 2C/|D_i| (record level, replace-one), up to rounding."""
    mech = ZcdpGaussian(ZcdpGaussian.Config(clip=1.5, rho=0.3))
    clients = [view(0, 37), view(1, 1000), view(2, 0)]
    responses = [Response(0, True, rho=0.07), Response(1, True), Response(2, True, rho=4.0)]
    plan = mech.plan(clients, responses, info=RoundInfo(1, 3, 3))
    z = np.array([c.noise_multiplier for c in plan.charges])
    delta_k = mech.sensitivities(clients, round_index=0)
    np.testing.assert_allclose(delta_k, 2 * 1.5 / np.array([37.0, 1000.0, 1.0]))
    np.testing.assert_allclose(plan.noise_std, z * delta_k, rtol=1e-14)
    assert math.isnan(responses[1].rho)  # no ρ chosen: the fixed default
    assert z[1] == 1.0 / math.sqrt(2 * 0.3)


def test_qi_dpfl_without_a_fixed_rho_meets_the_per_round_epsilon():
    """With no ``rho`` the calibration takes the largest ρ whose DP conversion (Bun & Steinke
    Prop. 1.3) meets ε_r: ρ = (sqrt(L + ε) − sqrt(L))², L = ln(1/δ)."""
    from fedgame.privacy.accountants import make_accountant
    from fedgame.privacy.calibrate import epsilon_to_zcdp, zcdp_to_epsilon
    from fedgame.privacy.calibrations import make_calibration, per_release_target

    cal = make_calibration("qi_dpfl")
    target = per_release_target(np.array([0.5, 2.0]), np.array([1e-5, 1e-6]))
    z = cal.multipliers(target, accountant=make_accountant("zcdp"))
    rho = 1 / (2 * z**2)
    want = [epsilon_to_zcdp(0.5, delta=1e-5), epsilon_to_zcdp(2.0, delta=1e-6)]
    np.testing.assert_allclose(rho, want, rtol=1e-12)
    # by hand: L = ln(1e5) = 11.5129..., rho = (sqrt(12.0129) - sqrt(11.5129))^2 = 0.0053...
    assert rho[0] == pytest.approx((math.sqrt(math.log(1e5) + 0.5) - math.sqrt(math.log(1e5))) ** 2)
    assert zcdp_to_epsilon(float(rho[1]), delta=1e-6) == pytest.approx(2.0, rel=1e-12)


def test_other_calibrations_cannot_describe_the_record_level():
    from fedgame.errors import ScenarioError
    from fedgame.privacy.calibrations import Release, able, check_calibration

    release = Release("gaussian", "local", "record")
    assert able(release) == ["qi_dpfl"]
    with pytest.raises(ScenarioError, match="qi_dpfl"):
        check_calibration("analytic", release, kind="zcdp_gaussian", key="privacy")
