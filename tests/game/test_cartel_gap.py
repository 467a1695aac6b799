"""The cartel is one player of the Nash gap; its members' own defection gains are apart."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import minimize_scalar

from fedgame.game.contest import contest_equilibrium
from fedgame.game.diagnostics import as_one_player, cartel_gap, nash_gaps


def _joint_best(rho, nu, reward, cartel, caps):
    """The cartel's best joint utility against the outsiders' total, by search (oracle)."""
    s = rho[~cartel].sum()
    members = np.argsort(nu[cartel], kind="stable")
    cap = np.full(members.size, np.inf) if caps is None else caps[cartel][members]

    def joint(x):
        left, cost = x, 0.0
        for j, c in zip(members, cap):
            take = min(left, c)
            cost += nu[cartel][j] * take
            left -= take
        if left > 1e-15:
            return -np.inf
        return (reward * x / (x + s) if x + s > 0 else 0.0) - cost

    upper = reward / nu[cartel].min()
    if caps is not None:
        upper = min(upper, cap.sum())
    grid = max(joint(x) for x in np.linspace(0.0, upper, 4001))
    res = minimize_scalar(lambda x: -joint(x), bounds=(0.0, upper), method="bounded")
    return max(grid, -res.fun)


@settings(max_examples=30)
@given(
    nu=st.lists(st.floats(0.3, 3.0), min_size=3, max_size=6),
    k=st.integers(2, 3),
    reward=st.floats(0.5, 10.0),
    capped=st.booleans(),
)
def test_the_cartel_equilibrium_has_no_gap_and_members_would_defect(nu, k, reward, capped):
    nu = np.array(nu)
    n = nu.size
    k = min(k, n - 1)
    cartel = np.zeros(n, dtype=bool)
    cartel[:k] = True
    caps = np.where(cartel, 0.05 * reward / nu.sum(), np.inf) if capped else None
    rho = contest_equilibrium(nu, reward=reward, phi=1.0, cartel=cartel, caps=caps)
    gap, norm = cartel_gap(rho, nu, reward=reward, phi=1.0, p=None, caps=caps, cartel=cartel)
    assert gap <= 1e-7 * reward and norm <= 1e-6
    members = nash_gaps(rho, nu, reward=reward, phi=1.0, caps=caps)
    whole = as_one_player(members, cartel, (gap, norm))
    assert whole.absolute.size == n - k + 1
    assert np.all(members.absolute >= 0)
    if rho[~cartel].sum() > 0 and rho[cartel].sum() > 0:
        assert whole.max <= 1e-7 * reward  # outsiders best-respond too: an equilibrium


def test_a_member_held_back_by_its_cartel_gains_by_defecting():
    """Two equal members and two outsiders (ν = 0.5, R = 1): the cartel plays as one of three
    symmetric players, X = R·2/(9·0.5) = 4/9, the first member supplies it all. The member held
    at 0 faces rivals 4/3 and would play sqrt(R·(4/3)/0.5) − 4/3 ≈ 0.30 alone."""
    nu = np.full(4, 0.5)
    cartel = np.array([True, True, False, False])
    rho = contest_equilibrium(nu, reward=1.0, phi=1.0, cartel=cartel)
    np.testing.assert_allclose(rho, [4 / 9, 0.0, 4 / 9, 4 / 9], rtol=1e-9)
    gap, _ = cartel_gap(rho, nu, reward=1.0, phi=1.0, p=None, caps=None, cartel=cartel)
    assert gap == pytest.approx(0.0, abs=1e-12)
    own = nash_gaps(rho, nu, reward=1.0, phi=1.0).absolute
    br = np.sqrt(4 / 3 / 0.5) - 4 / 3
    assert own[1] == pytest.approx(br / (br + 4 / 3) - 0.5 * br, rel=1e-9) and own[1] > 0.03


@settings(max_examples=30)
@given(
    rho=st.lists(st.one_of(st.just(0.0), st.floats(0.01, 2.0)), min_size=3, max_size=6),
    nu=st.lists(st.floats(0.3, 3.0), min_size=6, max_size=6),
    reward=st.floats(0.5, 10.0),
)
def test_the_cartel_gap_is_what_the_joint_best_response_gains(rho, nu, reward):
    rho = np.array(rho)
    n = rho.size
    nu = np.array(nu[:n])
    cartel = np.zeros(n, dtype=bool)
    cartel[:2] = True
    gap, _ = cartel_gap(rho, nu, reward=reward, phi=1.0, p=None, caps=None, cartel=cartel)
    s, x = rho[~cartel].sum(), rho[cartel].sum()
    now = (reward * x / (x + s) if x + s > 0 else 0.0) - (nu * rho)[cartel].sum()
    if s > 0:
        assert gap == pytest.approx(
            max(_joint_best(rho, nu, reward, cartel, None) - now, 0.0), abs=1e-6 * reward
        )
    else:
        assert gap == pytest.approx(reward - now)  # the supremum: X -> 0+ wins R


def test_off_equilibrium_the_cartel_has_a_gap():
    nu = np.array([1.0, 1.0, 1.2, 0.9])
    cartel = np.array([True, True, False, False])
    rho = contest_equilibrium(nu, reward=4.0, phi=1.0, cartel=cartel)
    gap, norm = cartel_gap(
        rho * np.array([2.0, 2.0, 1.0, 1.0]),
        nu,
        reward=4.0,
        phi=1.0,
        p=None,
        caps=None,
        cartel=cartel,
    )
    assert gap > 1e-3 and 0 < norm < 1
