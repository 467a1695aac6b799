"""dpsgd_local: per-step noise of paper 001 Eq. 6-7 and the subsampled-Gaussian accountant."""

from __future__ import annotations

import math

import numpy as np
import pytest
from helpers_dp import oracle_epsilon, scenario, view

from fedgame.learning.settings import TrainingSettings
from fedgame.privacy.calibrate import privacy_aware_sigma
from fedgame.privacy.dpsgd_local import LocalDpSgd, paper001_epsilon, step_geometry
from fedgame.views import Response, RoundInfo


def make(calibration: str, *, participations: int, steps: int, batch: int) -> LocalDpSgd:
    mech = LocalDpSgd(LocalDpSgd.Config(clip=1.0, calibration=calibration))
    mech.training = TrainingSettings(local_steps=steps, batch_size=batch)
    mech.epsilon_per_round(np.array([1.0]), np.array([1e-5]), participations=participations)
    return mech


def test_paper_calibration_matches_note_001_table():
    # note 001 §1.3: |M| = 600, B = 128, delta = 1e-5, T_k T^l = 100, eps = 1 -> sigma/C = 0.33,
    # z = sigma B / C = 42
    mech = make("privacy_aware", participations=10, steps=10, batch=128)
    plan = mech.plan(
        [view(0, eps_total=1.0, dataset_size=600)], [Response(0, True)], info=RoundInfo(1, 10, 1)
    )
    assert plan.step_noise_std[0] == pytest.approx(0.33, abs=0.005)
    assert plan.charges[0].noise_multiplier == pytest.approx(42, rel=0.02)
    assert plan.per_sample_clip == 1.0


def test_privacy_aware_calibration_is_eq_6_7_worked_by_hand():
    """The registered calibration on note 001 §1.3's client (|M| = 600, B = 128: q = 128/600,
    δ = 1e-5, ε = 1, T = 10 releases of T^l = 10 steps, Δ = C/B): ε' = log(1 + (e − 1)/q),
    V = 8 log(e + q ε'/δ)/(|M|² q² ε'²), σ = C sqrt(100 V), z = σ/Δ; and its stated ε at
    that z is the target back."""
    from fedgame.privacy.accountants import make_accountant
    from fedgame.privacy.calibrations import Target, make_calibration

    q, size, delta = 128 / 600, 600.0, 1e-5
    eps_p = math.log(1 + (math.e - 1) / q)
    v = 8 * math.log(math.e + q * eps_p / delta) / (size**2 * q**2 * eps_p**2)
    z_hand = math.sqrt(100 * v) / (1 / 128)
    one = np.array([1.0]), np.array([delta])
    target = Target(
        *one,
        *one,
        np.array([10]),
        "subsampled_gaussian",
        sample_rate=np.array([q]),
        steps=np.array([10]),
        sample_size=np.array([size]),
        sensitivity=np.array([1 / 128]),
    )
    cal, acc = make_calibration("privacy_aware"), make_accountant("rdp")
    z = cal.multipliers(target, accountant=acc)
    assert z[0] == pytest.approx(z_hand, rel=1e-12) and z[0] == pytest.approx(42, rel=0.02)
    assert cal.epsilon_of(z, target, accountant=acc)[0] == pytest.approx(1.0, rel=1e-9)


def test_paper_is_the_old_name_of_privacy_aware():
    with pytest.warns(FutureWarning, match="calibration: privacy_aware"):
        config = LocalDpSgd.Config(calibration="paper")
    assert config.calibration == "privacy_aware"


def test_a_calibration_that_cannot_describe_the_release_is_refused_in_one_line():
    """privacy_aware describes only DP-SGD's subsampled per-sample release: a local Gaussian
    update refuses it (naming both keys and the calibrations that work), and dpsgd_local
    refuses a per-release Gaussian calibration."""
    from fedgame.errors import ScenarioError
    from fedgame.scenario.load import validate

    for privacy, wrong in (
        ({"kind": "gaussian_local", "calibration": "privacy_aware"}, "gaussian_local"),
        ({"kind": "dpsgd_local", "calibration": "analytic"}, "dpsgd_local"),
    ):
        with pytest.raises(ScenarioError) as info:
            validate({"rounds": 2, "population": {"clients": 20}, "privacy": privacy})
        msg = str(info.value)
        assert info.value.key == "privacy.calibration" and "\n" not in msg
        assert f"privacy.kind {wrong!r}" in msg and "calibrations that can" in msg


def test_accountant_calibration_charges_subsampled_steps_within_budget():
    mech = make("accountant", participations=3, steps=4, batch=50)
    client = view(0, eps_total=2.0, dataset_size=500)
    plan = mech.plan([client], [Response(0, True)], info=RoundInfo(1, 3, 1))
    charge = plan.charges[0]
    assert (charge.noise, charge.sample_rate, charge.steps) == ("subsampled_gaussian", 0.1, 4)
    # std on the mean gradient of a batch: z C / B
    assert plan.step_noise_std[0] == pytest.approx(charge.noise_multiplier / 50)
    assert 0.97 * 2.0 <= oracle_epsilon("rdp", charge, 3) <= 2.0 * (1 + 1e-6)


def test_small_client_repeats_samples_and_sensitivity_grows():
    assert step_geometry(dataset_size=10, batch_size=32, local_steps=5, fedsgd=False) == (
        1.0,
        32,
        5,
        4,
    )
    assert step_geometry(dataset_size=10, batch_size=32, local_steps=5, fedsgd=True) == (
        1.0,
        10,
        1,
        1,
    )


def test_paper001_epsilon_inverts_eq_6_7():
    sigma = privacy_aware_sigma(
        clip=1.0,
        epsilon=0.7,
        delta=1e-5,
        sample_rate=0.2,
        dataset_size=300,
        participations=5,
        local_steps=3,
    )
    eps = paper001_epsilon(
        sigma=sigma, clip=1.0, delta=1e-5, sample_rate=0.2, dataset_size=300, steps=15
    )
    assert eps == pytest.approx(0.7, rel=1e-8)
    fewer = paper001_epsilon(
        sigma=sigma, clip=1.0, delta=1e-5, sample_rate=0.2, dataset_size=300, steps=6
    )
    assert 0 < fewer < 0.7 and math.isfinite(fewer)


def test_end_to_end_fedsgd_within_budget(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    data = scenario(
        tiny,
        privacy={"kind": "dpsgd_local", "clip": 1.0},
        training={"mode": "fedsgd", "lr": 0.5, "device": "cpu"},
    )
    result = simulate(validate(data))
    clients = result.clients
    up = clients[clients["uploaded"]]
    assert result.completed and len(up) > 0 and (up["noise_std"] > 0).all()
    assert (clients["epsilon_spent"] <= clients["epsilon_total"] * (1 + 1e-9)).all()
    assert (up["epsilon_closed_form"] > 0).all()
