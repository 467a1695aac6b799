"""fedgame.analysis.stats: t-intervals over seeds and the verdict rules."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from fedgame.analysis.stats import (
    Interval,
    above,
    all_of,
    magnitude,
    paired_difference,
    t_interval,
    within,
)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=2, max_size=30),
    st.sampled_from([0.8, 0.9, 0.95, 0.99]),
)
def test_t_interval_matches_scipy(values, confidence):
    iv = t_interval(values, confidence)
    x = np.asarray(values)
    assert iv.n == x.size and iv.mean == pytest.approx(x.mean(), abs=1e-9)
    if x.std() == 0:
        assert iv.half_width == pytest.approx(0.0, abs=1e-9)
        return
    low, high = sps.t.interval(confidence, x.size - 1, loc=x.mean(), scale=sps.sem(x))
    assert iv.low == pytest.approx(low, rel=1e-9, abs=1e-9)
    assert iv.high == pytest.approx(high, rel=1e-9, abs=1e-9)


def test_worked_example_five_seeds():
    # mean 3, sd sqrt(2.5), t_{0.975,4} = 2.7764451: half width 2.7764451 * 1.5811388 / sqrt(5)
    iv = t_interval([1, 2, 3, 4, 5])
    assert iv.mean == 3.0
    assert iv.half_width == pytest.approx(1.9632432, rel=1e-6)
    assert iv.format() == "3.0 ± 2.0"
    assert iv.format(2, seeds=True) == "3.00 ± 1.96 (n=5)"
    assert iv.scaled(100).format(0) == "300 ± 196"


def test_degenerate_inputs():
    one = t_interval([0.4])
    assert one.n == 1 and not one.defined and one.format() == "0.4 ± n/a"
    none = t_interval([math.nan])
    assert none.n == 0 and none.format() == "n/a"
    assert t_interval([1.0, math.nan, 3.0]).n == 2
    with pytest.raises(ValueError):
        t_interval([1, 2], confidence=1.0)


def test_paired_difference_is_narrower_than_separate_intervals():
    base = np.array([10.0, 30.0, 50.0, 70.0, 90.0])  # large seed-to-seed spread
    a, b = base + 2.0 + np.array([0.1, -0.1, 0.2, 0.0, -0.2]), base
    d = paired_difference(a, b)
    assert d.mean == pytest.approx(2.0)
    assert d.half_width < 0.5 < t_interval(a).half_width
    assert above(d) == "yes"
    with pytest.raises(ValueError):
        paired_difference([1.0], [1.0, 2.0])


def _iv(low: float, high: float) -> Interval:
    return Interval((low + high) / 2, (high - low) / 2, 5)


def test_verdict_rules():
    assert above(_iv(0.5, 3.0)) == "yes"
    assert above(_iv(-3.0, -0.5)) == "no"
    assert above(_iv(-1.0, 1.0)) == "inconclusive"
    assert above(_iv(10.0, 20.0), margin=15.0) == "inconclusive"
    assert above(Interval(5.0, math.nan, 1)) == "inconclusive"
    assert above(Interval(0.0, 0.0, 5)) == "no"  # identical on every seed: no gain
    assert above(Interval(0.0, 0.0, 5), margin=-1.0) == "yes"
    assert within(_iv(-0.5, 0.8), 1.0) == "yes"
    assert within(_iv(1.5, 3.0), 1.0) == "no"
    assert within(_iv(0.5, 3.0), 1.0) == "inconclusive"
    assert magnitude(_iv(20.0, 40.0), 38.5) == "yes"
    assert magnitude(_iv(10.0, 20.0), 38.5) == "partly"
    assert magnitude(_iv(-20.0, -10.0), 38.5) == "no"
    assert magnitude(_iv(-1.0, 50.0), 38.5) == "inconclusive"
    assert all_of(["yes", "yes"]) == "yes"
    assert all_of(["yes", "partly"]) == "partly"
    assert all_of(["yes", "inconclusive"]) == "inconclusive"
    assert all_of(["inconclusive", "no"]) == "no"
    assert all_of([]) == "inconclusive"


def test_a_rule_states_its_margin_and_applies_it():
    """The text a claims row prints and the verdict it gives come from one Rule object."""
    from fedgame.analysis.stats import Rule

    margin = Rule("above", 15.0)
    assert "above 15 pts" in margin.text and "A − B > 15 pts" in margin.short
    gap = Interval(10.0, 2.0, 5)  # significantly positive, wholly below 15
    assert margin.verdict(gap) == "no" and Rule("above", 0.0).verdict(gap) == "yes"
    assert Rule("within", 1.0).verdict(Interval(-0.05, 0.15, 5)) == "yes"
    assert Rule("magnitude", 38.5).verdict(Interval(16.1, 8.3, 5)) == "partly"
    every = margin.every("ε").also("an arm at chance is inconclusive")
    assert every.text.startswith(margin.text)
    assert "at every ε" in every.text and every.text.endswith("an arm at chance is inconclusive")
    assert every.verdict(gap) == "no"  # scope and guards are words; the test is the kind's
    data = every.as_dict()
    assert data["threshold"] == 15.0 and data["text"] == every.text and data["short"]
    assert Rule("peak", custom="a peak rule").text == "a peak rule"
    with pytest.raises(ValueError):
        Rule("peak")
    with pytest.raises(ValueError):
        Rule("above")


def test_a_seed_with_a_refused_value_makes_the_paired_interval_undefined():
    """A NaN (a refused total) on one seed is not dropped from a paired comparison."""
    iv = paired_difference([1.0, 2.0, math.nan], [0.0, 0.5, 1.0])
    assert iv.n == 3 and not iv.defined and math.isnan(iv.mean)
    assert above(iv) == "inconclusive" and iv.format(seeds=True) == "n/a (n=3)"
