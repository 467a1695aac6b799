"""laplace_local: L1 clipping, Laplace scale of papers 000/002, pure-DP basic accounting."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers_dp import scenario, view

from fedgame.learning.settings import TrainingSettings
from fedgame.privacy.laplace_local import LocalLaplace, laplace_noise
from fedgame.views import Response, RoundInfo, SetupContext


def test_noise_has_laplace_scale_and_variance():
    scale = np.array([0.5, 2.0])
    noise = laplace_noise(
        torch.Size([2, 200_000]),
        scale,
        like=torch.zeros(1, dtype=torch.float64),
        generator=torch.Generator().manual_seed(4),
    )
    # Laplace(0, b): E|X| = b, Var = 2 b^2, median 0
    np.testing.assert_allclose(noise.abs().mean(dim=1).numpy(), scale, rtol=0.01)
    np.testing.assert_allclose(noise.var(dim=1).numpy(), 2 * scale**2, rtol=0.02)
    assert noise.median(dim=1).values.abs().max() < 0.02 * scale.max()


def test_update_clipped_in_l1_not_l2():
    mech = LocalLaplace(LocalLaplace.Config(clip=1.0))
    mech.epsilon_per_round(np.array([1.0]), np.array([1e-5]), participations=2)
    clients = [view(0, participations=2)]
    plan = mech.plan(clients, [Response(0, True)], info=RoundInfo(1, 2, 1))
    plan = dataclasses.replace(plan, noise_std=np.zeros(1))
    ones = torch.ones(1, 100, dtype=torch.float64)
    out = mech.privatise(ones, plan, generator=torch.Generator().manual_seed(0))
    assert out.abs().sum().item() == pytest.approx(1.0)  # L1 norm = C
    assert torch.linalg.vector_norm(out).item() == pytest.approx(0.1)  # L2 clip would give 1


def test_scale_matches_paper_002_theorem_1():
    # paper 002 MNIST: d_i = 6000, xi_1 = 300, N = 10 -> s = (2 xi/d)(bT/N)/eps = 0.01 bT/eps;
    # bT/N = 20 replies per client means bT = 200
    mech = LocalLaplace(LocalLaplace.Config(clip=300.0, level="sample", adjacency="replace"))
    mech.training = TrainingSettings(mode="fedsgd", lr=1.0, clip_norm="l1")
    mech.epsilon_per_round(np.array([1.0]), np.array([1e-5]), participations=20)
    client = view(0, eps_total=1.0, participations=20, dataset_size=6000)
    plan = mech.plan([client], [Response(0, True)], info=RoundInfo(1, 20, 1))
    assert plan.noise_std[0] == pytest.approx(0.01 * 200 / 1.0)
    assert plan.per_sample_clip == 300.0 and plan.clip is None
    assert plan.charges[0].noise == "laplace"
    assert 1 / plan.charges[0].noise_multiplier == pytest.approx(0.05)


def test_update_level_scale_is_paper_000_lemma_2():
    # b = T Delta_1 / eps with Delta_1 = 2C (replace-one)
    mech = LocalLaplace(LocalLaplace.Config(clip=0.5))
    mech.epsilon_per_round(np.array([1.0]), np.array([1e-5]), participations=5)
    plan = mech.plan(
        [view(0, eps_total=2.0, participations=5)], [Response(0, True)], info=RoundInfo(1, 5, 1)
    )
    assert plan.noise_std[0] == pytest.approx(5 * 2 * 0.5 / 2.0)


def test_end_to_end_basic_composition(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    result = simulate(validate(scenario(tiny, privacy={"kind": "laplace_local"})))
    clients = result.clients
    up = clients[clients["uploaded"]]
    assert result.completed and len(up) > 0
    # pure DP adds up: each release costs exactly epsilon_round
    np.testing.assert_allclose(up["epsilon_charged"], up["epsilon_round"], rtol=1e-9)
    assert (clients["epsilon_spent"] <= clients["epsilon_total"] * (1 + 1e-9)).all()


def test_prepare_reads_training_from_learner():
    mech = LocalLaplace(LocalLaplace.Config(level="sample"))
    learner = SimpleNamespace(settings=TrainingSettings(mode="fedsgd", clip_norm="l1"))
    ctx = SetupContext(num_clients=0, rounds=1, clients=(), learner=learner)
    mech.prepare(ctx, rng=np.random.default_rng(0))
    assert mech.training.mode == "fedsgd"
