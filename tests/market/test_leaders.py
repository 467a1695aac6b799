"""The leaders' iterated best response and the Herfindahl index (fedgame.market)."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.market.leaders import leaders_equilibrium
from fedgame.market.tables import herfindahl


def test_a_contraction_reaches_its_fixed_point():
    # BR_s(R) = 1 + R_other/2: the fixed point R = 1 + R/2 is R = 2 for both
    out = leaders_equilibrium(
        lambda s, r: 1.0 + 0.5 * r[1 - s], np.array([0.0, 0.0]), tol=1e-10, max_iter=200
    )
    assert out.converged
    np.testing.assert_allclose(out.rewards, [2.0, 2.0], rtol=1e-8)


def test_an_expanding_answer_is_reported_not_converged():
    out = leaders_equilibrium(lambda s, r: 1.0 + 2.0 * r[1 - s], np.array([1.0, 1.0]), max_iter=5)
    assert not out.converged
    assert out.iterations == 5


def test_monopolists_converge_in_one_sweep():
    out = leaders_equilibrium(lambda s, r: float(r[s]), np.array([3.0, 4.0]))
    assert out.converged and out.iterations == 1


@pytest.mark.parametrize(
    ("shares", "hhi"),
    [([1.0], 1.0), ([0.5, 0.5], 0.5), ([0.25] * 4, 0.25), ([0.7, 0.3], 0.58)],
)
def test_herfindahl_by_hand(shares, hhi):
    assert herfindahl(np.array(shares)) == pytest.approx(hhi)


def test_herfindahl_of_no_supply_is_nan():
    assert np.isnan(herfindahl(np.array([np.nan, np.nan])))
