"""central_gaussian: clip locally, noise the aggregate with std z C x (max weight share)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers_dp import scenario, view

from fedgame.privacy.central_gaussian import CentralGaussian, max_weight_share
from fedgame.views import Response, RoundInfo


def test_max_weight_share_worst_case():
    assert max_weight_share(np.ones(5), num_received=5) == pytest.approx(0.2)
    # heaviest (10) with the lightest other (1) when only two arrive
    assert max_weight_share(np.array([3, 1, 10, 2]), num_received=2) == pytest.approx(10 / 11)
    assert max_weight_share(np.array([3, 1, 10, 2]), num_received=4) == pytest.approx(10 / 16)


def test_finalise_noise_std_is_z_c_over_n_for_a_mean():
    mech = CentralGaussian(CentralGaussian.Config(clip=2.0, noise_multiplier=1.5))
    clients = [view(i) for i in range(4)]
    plan = mech.plan(clients, [Response(i, True) for i in range(4)], info=RoundInfo(1, 1, 4))
    big = torch.full((4, 10), 3.0, dtype=torch.float64)
    clipped = mech.privatise(big, plan, generator=torch.Generator().manual_seed(0))
    np.testing.assert_allclose(torch.linalg.vector_norm(clipped, dim=1).numpy(), 2.0)
    zero = torch.zeros(200_000, dtype=torch.float64)
    out, metrics = mech.finalise(
        zero, plan, num_received=4, generator=torch.Generator().manual_seed(2)
    )
    assert out.std().item() == pytest.approx(1.5 * 2.0 / 4, rel=0.01)
    assert metrics == {"central_noise_std": pytest.approx(1.5 * 2.0 / 4, rel=1e-12)}
    assert plan.charges[0].noise_multiplier == 1.5


def test_calibrated_to_strictest_client():
    mech = CentralGaussian(CentralGaussian.Config())
    both = mech.strictest_z([view(0, eps_total=0.5), view(1, eps_total=4.0)], releases=3)
    strict = mech.strictest_z([view(0, eps_total=0.5)], releases=3)
    loose = mech.strictest_z([view(1, eps_total=4.0)], releases=3)
    assert both == strict > loose
    # a per-round split is pure: it changes nothing on the mechanism
    mech.epsilon_per_round(np.array([0.5, 4.0]), np.array([1e-5, 1e-5]), participations=3)
    assert np.isnan(mech.z)


def test_end_to_end_noise_column(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    data = scenario(
        tiny,
        privacy={"kind": "central_gaussian", "noise_multiplier": 1.0},
        aggregation={"kind": "mean"},
    )
    result = simulate(validate(data))
    rounds = result.rounds
    assert result.completed
    np.testing.assert_allclose(rounds["central_noise_std"], 1.0 * 1.0 / rounds["uploaded"])
