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
