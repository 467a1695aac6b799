"""Contract of every registered belief estimator (``incentive.belief.kind``): new estimators
are covered automatically."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.game.belief import ContestObservation, PrivacyValueBelief
from fedgame.game.stackelberg import active_coefficients
from fedgame.mechanisms.incentive.belief import BeliefSpec, estimator_names

PRIORS = [
    {"kind": "lognormal", "median": 2.0, "sd": 0.5},
    {"kind": "discrete", "values": [0.5, 1.0, 4.0], "weights": [0.2, 0.5, 0.3]},
]


def _contest(nu: np.ndarray, ids: np.ndarray, reward: float) -> ContestObservation:
    rho = active_coefficients(nu, phi=1.0) * reward if nu.size else np.zeros(0)
    rho[-1:] = np.nan  # a player that declined for its own reason
    return ContestObservation(
        ids, rho, reward=reward, phi=1.0, p=np.ones(ids.size), caps=np.full(ids.size, np.inf)
    )


def test_the_built_in_estimator_is_registered():
    assert "lognormal" in estimator_names()


@pytest.mark.parametrize("prior", PRIORS, ids=[p["kind"] for p in PRIORS])
@pytest.mark.parametrize("name", estimator_names())
def test_estimator_keeps_a_positive_finite_estimate_per_client(name, prior):
    belief = BeliefSpec(kind=name, prior=prior).build(12)
    assert isinstance(belief, PrivacyValueBelief)
    for observation in (
        _contest(np.array([0.8, 1.0, 1.1, 3.0, 1.0]), np.array([2, 5, 7, 9, 11]), 3.0),
        _contest(np.zeros(0), np.zeros(0, np.int64), 1.0),  # nobody played
    ):
        belief.observe(observation)
        values = np.asarray(belief.estimate(), dtype=float)
        assert values.shape == (12,)
        assert np.all(np.isfinite(values)) and np.all(values > 0)
    untouched = BeliefSpec(kind=name, prior=prior).build(12).estimate()
    np.testing.assert_array_equal(values[[0, 1, 3]], untouched[[0, 1, 3]])  # not observed
