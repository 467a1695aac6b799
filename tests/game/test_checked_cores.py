"""The unchecked cores the round check calls give the public functions' numbers, bit for bit.

``gaps_of`` (of ``nash_gaps``), ``solve_contest`` (of ``contest_equilibrium``) and
``kinds_of`` (of ``degenerate_kinds``) skip the input checks; with ``p`` None and ``caps``
None they stand for arrays of ones and of infinities. Their answers must be the very same
floats, and the public functions must still refuse bad input.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.errors import ScenarioError
from fedgame.game.contest import contest_equilibrium, solve_contest
from fedgame.game.degeneracy import degenerate_kinds, kinds_of
from fedgame.game.diagnostics import gaps_of, nash_gaps
from fedgame.game.rules import DegeneracyThresholds

positive = st.floats(0.05, 5.0)
budget = st.floats(0.0, 3.0)


@st.composite
def profiles(draw: st.DrawFn) -> tuple[np.ndarray, ...]:
    n = draw(st.integers(2, 12))
    rho = np.array(draw(st.lists(budget, min_size=n, max_size=n)))
    nu = np.array(draw(st.lists(positive, min_size=n, max_size=n)))
    p = np.array(draw(st.lists(st.sampled_from([1.0, 0.9, 0.5]), min_size=n, max_size=n)))
    caps = np.array(draw(st.lists(st.sampled_from([np.inf, 0.2, 1.0]), min_size=n, max_size=n)))
    return rho, nu, p, caps


@settings(max_examples=60, deadline=None)
@given(profiles(), positive, st.booleans())
def test_gaps_of_equals_nash_gaps(profile, reward, quadratic):
    rho, nu, p, caps = profile
    for p_public, p_core in ((None, None), (p, p), (np.ones(rho.size), None)):
        for caps_public, caps_core in ((None, None), (caps, caps)):
            public = nash_gaps(
                rho, nu, reward=reward, phi=1.3, p=p_public, caps=caps_public, quadratic=quadratic
            )
            core = gaps_of(
                rho, nu, reward=reward, phi=1.3, p=p_core, caps=caps_core, quadratic=quadratic
            )
            np.testing.assert_array_equal(core.absolute, public.absolute)
            np.testing.assert_array_equal(core.normalised, public.normalised)


@settings(max_examples=60, deadline=None)
@given(profiles(), positive)
def test_solve_contest_equals_contest_equilibrium(profile, reward):
    _, nu, p, caps = profile
    for p_public, p_core in ((None, None), (p, p)):
        for caps_public, caps_core in ((None, None), (caps, caps)):
            public = contest_equilibrium(nu, reward=reward, phi=0.7, p=p_public, caps=caps_public)
            core = solve_contest(nu, reward=reward, phi=0.7, p=p_core, caps=caps_core, cartel=None)
            np.testing.assert_array_equal(core, public)
    cartel = np.zeros(nu.size, dtype=bool)
    cartel[:2] = True
    public = contest_equilibrium(nu, reward=reward, phi=0.7, cartel=cartel)
    np.testing.assert_array_equal(
        solve_contest(nu, reward=reward, phi=0.7, p=None, caps=None, cartel=cartel), public
    )


@given(
    st.lists(st.one_of(budget, st.just(float("nan"))), max_size=10),
    positive,
    st.floats(0.0, 3.0),
    st.one_of(st.just(float("nan")), st.floats(0.0, 2.0)),
)
def test_kinds_of_equals_degenerate_kinds(rho, reward, noise, impact):
    n = len(rho)
    paid = np.linspace(0.0, 1.0, n)
    th = DegeneracyThresholds()
    public = degenerate_kinds(
        reward=reward,
        previous_reward=0.01,
        rho=rho,
        payments=paid,
        noise_norm=noise,
        thresholds=th,
        market=True,
        players=n,
        knife_edge_impact=impact,
    )
    core = kinds_of(
        reward=reward,
        previous_reward=0.01,
        budgets=np.nan_to_num(np.array(rho, float), nan=0.0),
        payments=paid,
        noise_norm=noise,
        thresholds=th,
        uploaded=n,
        market=True,
        players=n,
        knife_edge_impact=impact,
    )
    assert core == public


def test_public_functions_still_refuse_bad_input():
    with pytest.raises(ScenarioError, match="caps"):
        nash_gaps([0.1, 0.2], [1.0, 1.0], reward=1.0, caps=[np.nan, 1.0])
    with pytest.raises(ScenarioError, match="p"):
        nash_gaps([0.1, 0.2], [1.0, 1.0], reward=1.0, p=[0.0, 1.0])
    with pytest.raises(ScenarioError, match="nu"):
        contest_equilibrium([1.0, -1.0], reward=1.0)
    with pytest.raises(ScenarioError, match="caps"):
        contest_equilibrium([1.0, 1.0], reward=1.0, caps=[-1.0, 1.0])
