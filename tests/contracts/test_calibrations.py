"""Contract of every registered calibration, over every release it claims to describe.

For each (calibration, release, accountant that can describe the release's noise) and a few
targets, the z a calibration returns meets the target on the curve its guarantee is stated
on (``epsilon_of``), and z / ``loose_factor`` no longer does (the declared looseness). A new
calibration is covered with no test edit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedgame import registry
from fedgame.errors import ScenarioError
from fedgame.privacy.accountants import make_accountant
from fedgame.privacy.calibrations import (
    Release,
    Target,
    able,
    calibration_class,
    check_calibration,
    make_calibration,
)

CASES = [
    (name, release, acc)
    for name in registry.names("calibration")
    for release in sorted(calibration_class(name).describes)
    for acc in registry.names("accountant")
    if make_accountant(acc).describes(release.noise)
]
DELTA = 1e-5


def targets(cal, noise: str) -> Target:
    """Targets inside the calibration's proven range: per-release ε_r, or a total ε over T."""
    top = min(cal.proven_below, 10.0)
    eps_r = np.array([0.05, 0.3, 0.9]) * top if top < 10 else np.array([0.1, 1.0, 4.0])
    t = np.array([1, 3, 5], dtype=np.int64)
    total = np.array([0.5, 2.0, 6.0])
    return Target(eps_r, np.full(3, DELTA), total, np.full(3, DELTA), t, noise)


@pytest.mark.parametrize("name, release, acc", CASES, ids=[f"{n}:{r}:{a}" for n, r, a in CASES])
def test_calibration_meets_its_target_and_is_not_loose(name, release, acc):
    cal = make_calibration(name)
    accountant = make_accountant(acc)
    target = targets(cal, release.noise)
    z = cal.multipliers(target, accountant=accountant)
    assert np.all(np.isfinite(z)) and np.all(z > 0)
    achieved = cal.epsilon_of(z, target, accountant=accountant)
    wanted = target.epsilon_round if cal.scope == "release" else target.epsilon
    assert np.all(achieved <= wanted * (1 + 1e-6)), (achieved, wanted)
    tighter = cal.epsilon_of(z / cal.loose_factor, target, accountant=accountant)
    assert np.all(tighter >= wanted * (1 - 1e-9)), (tighter, wanted)


@pytest.mark.parametrize("name", registry.names("calibration"))
def test_more_budget_never_means_more_noise(name):
    cal, accountant = make_calibration(name), make_accountant("rdp")
    lo, hi = targets(cal, "gaussian"), targets(cal, "gaussian")
    hi = Target(lo.epsilon_round * 1.1, lo.delta_round, lo.epsilon * 1.1, lo.delta, lo.releases)
    assert np.all(
        cal.multipliers(hi, accountant=accountant) < cal.multipliers(lo, accountant=accountant)
    )


def test_the_classic_bound_is_looser_than_the_exact_one():
    target = targets(make_calibration("classic"), "gaussian")
    acc = make_accountant("basic")
    classic = make_calibration("classic").multipliers(target, accountant=acc)
    exact = make_calibration("analytic").multipliers(target, accountant=acc)
    assert np.all(classic > exact)


def test_a_tail_bound_refuses_a_release_past_its_proven_range():
    target = Target(*(np.array([v]) for v in (1.5, DELTA, 1.5, DELTA)), np.array([1]))
    with pytest.raises(ScenarioError, match="allow_loose_classic"):
        make_calibration("classic").multipliers(target, accountant=make_accountant("basic"))


def test_a_wrong_pair_is_refused_naming_both_keys_and_the_calibrations_that_work():
    release = Release("gaussian", "distributed", "update")
    with pytest.raises(ScenarioError) as info:
        check_calibration("dpfl_bcs", release, kind="lightdp", key="privacy")
    msg = str(info.value)
    assert info.value.key == "privacy.calibration" and "privacy.kind 'lightdp'" in msg
    for name in able(release):
        assert name in msg
    assert "dpfl_bcs" not in able(release) and "analytic" in able(release)


def test_calibration_knobs_come_from_the_privacy_section():
    from fedgame import registry as reg

    cfg = reg.validate(
        "privacy", {"kind": "gaussian_local", "calibration": "dpfl_bcs", "c2": 0.5}, key="p"
    )
    cal = make_calibration("dpfl_bcs", cfg)
    one = Target(*(np.array([v]) for v in (1.0, DELTA, 1.0, DELTA)), np.array([4]))
    z = cal.multipliers(one, accountant=make_accountant("rdp"))
    assert z[0] == pytest.approx(0.5 * math.sqrt(4 * math.log(1 / DELTA)) / 1.0)
