"""Attribute distributions of the client population."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import TypeAdapter, ValidationError

from fedgame.agents.population import Distribution, coerce_distribution
from fedgame.errors import ScenarioError

ADAPTER = TypeAdapter(Distribution)


def parse(value):
    return ADAPTER.validate_python(coerce_distribution(value))


def test_shorthands():
    assert parse(3).sample(4, rng=np.random.default_rng(0)).tolist() == [3.0] * 4
    assert parse([1, 2, 3]).sample(3, rng=np.random.default_rng(0)).tolist() == [1.0, 2.0, 3.0]


def test_list_length_must_match():
    with pytest.raises(ValueError, match="3 values for 4 clients"):
        parse([1, 2, 3]).sample(4, rng=np.random.default_rng(0))


def test_uniform_in_bounds_and_reproducible():
    d = parse({"dist": "uniform", "low": 2.0, "high": 3.0})
    a = d.sample(1000, rng=np.random.default_rng(1))
    assert a.min() >= 2.0 and a.max() <= 3.0
    assert np.array_equal(a, d.sample(1000, rng=np.random.default_rng(1)))


def test_mixture_weights_and_support():
    d = parse(
        {
            "dist": "mixture",
            "components": [
                {"weight": 0.3, "dist": "uniform", "low": 0.1, "high": 0.5},
                {"weight": 0.7, "dist": "uniform", "low": 5.0, "high": 10.0},
            ],
        }
    )
    x = d.sample(20000, rng=np.random.default_rng(2))
    low = (x <= 0.5).mean()
    assert abs(low - 0.3) < 0.02
    assert ((x > 0.5) & (x < 5.0)).sum() == 0
    assert d.support() == (0.1, 10.0)


def test_choice_probs_checked():
    with pytest.raises(ValidationError):
        parse({"dist": "choice", "values": [1, 2], "probs": [0.5, 0.6]})
    d = parse({"dist": "choice", "values": [1, 2], "probs": [0.25, 0.75]})
    x = d.sample(20000, rng=np.random.default_rng(3))
    assert abs((x == 2).mean() - 0.75) < 0.02


def test_normal_and_lognormal_clipped():
    n = parse({"dist": "normal", "mean": 0.0, "std": 1.0, "low": -0.5, "high": 0.5})
    x = n.sample(1000, rng=np.random.default_rng(4))
    assert x.min() >= -0.5 and x.max() <= 0.5
    ln = parse({"dist": "lognormal", "mean": 0.0, "sigma": 0.5, "high": 2.0})
    y = ln.sample(1000, rng=np.random.default_rng(4))
    assert y.min() > 0 and y.max() <= 2.0


def test_lognormal_is_positive_where_values_must_be():
    """An unclipped log-normal privacy value validates (its support is open at 0), and even a
    sigma that makes exp underflow never draws 0; ordinary draws are the plain log-normal."""
    from fedgame.scenario.load import validate

    data = {
        "name": "ln",
        "rounds": 1,
        "population": {"clients": 20, "privacy_value": {"dist": "lognormal", "sigma": 0.5}},
    }
    assert validate(data).population.privacy_value.support()[0] > 0
    huge = parse({"dist": "lognormal", "sigma": 1000.0})
    assert huge.sample(10000, rng=np.random.default_rng(5)).min() > 0
    plain = parse({"dist": "lognormal", "mean": 0.3, "sigma": 0.5})
    x = plain.sample(100, rng=np.random.default_rng(6))
    np.testing.assert_array_equal(x, np.random.default_rng(6).lognormal(0.3, 0.5, size=100))
    uniform = {"dist": "uniform", "low": 0.0, "high": 1.0}
    with pytest.raises(ScenarioError, match="privacy_value"):
        validate(data | {"population": {"clients": 20, "privacy_value": uniform}})


def test_uniform_low_above_high_rejected():
    with pytest.raises(ValidationError, match="low <= high"):
        parse({"dist": "uniform", "low": 2.0, "high": 1.0})
