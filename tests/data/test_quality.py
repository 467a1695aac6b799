"""Tests for fedgame.data.quality (QI-DPFL Eq. 11, L1 over classes)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame.data.quality import (
    emd,
    emd_to_population,
    emd_to_uniform,
    label_counts,
    label_frequencies,
    population_frequencies,
)


@pytest.mark.parametrize(
    ("client", "reference", "expected"),
    [
        ([0.5, 0.5], [1.0, 0.0], 1.0),  # |0.5-1| + |0.5-0|
        ([0.2, 0.3, 0.5], [0.2, 0.3, 0.5], 0.0),  # identical
        ([1.0, 0.0, 0.0], [0.0, 0.5, 0.5], 2.0),  # disjoint support: the maximum
        ([0.1, 0.2, 0.7], [0.25, 0.25, 0.5], 0.4),  # 0.15 + 0.05 + 0.2
    ],
)
def test_emd_hand_computed(client, reference, expected):
    value = emd(np.array(client), np.array(reference))
    assert isinstance(value, float)
    assert value == pytest.approx(expected)


def test_emd_is_twice_w1_under_discrete_metric():
    # QI-DPFL note §1.5: W1 with the 0/1 ground metric is half the L1 distance (total variation).
    p, q = np.array([0.6, 0.4, 0.0]), np.array([0.2, 0.3, 0.5])
    total_variation = 0.5 * np.abs(p - q).sum()
    assert emd(p, q) == pytest.approx(2 * total_variation) == pytest.approx(1.0)


def test_label_counts_and_frequencies():
    labels = np.array([0, 1, 1, 2, 2, 2])
    parts = [np.array([0, 1]), np.array([2, 3, 4, 5])]
    counts = label_counts(labels, parts, 4)
    np.testing.assert_array_equal(counts, [[1, 1, 0, 0], [0, 1, 3, 0]])
    assert counts.dtype == np.int64
    np.testing.assert_allclose(label_frequencies(counts), [[0.5, 0.5, 0, 0], [0, 0.25, 0.75, 0]])


def test_empty_client_has_nan_frequencies():
    freq = label_frequencies(np.array([[0, 0], [1, 3]]))
    assert np.isnan(freq[0]).all()
    np.testing.assert_allclose(freq[1], [0.25, 0.75])


def test_emd_to_population_and_uniform_worked_example():
    counts = np.array([[3, 1], [1, 3]])  # pooled: [0.5, 0.5]
    np.testing.assert_allclose(population_frequencies(counts), [0.5, 0.5])
    np.testing.assert_allclose(emd_to_population(counts), [0.5, 0.5])  # |.75-.5| + |.25-.5|
    counts = np.array([[4, 0, 0], [0, 1, 1]])  # pooled: [2/3, 1/6, 1/6]
    np.testing.assert_allclose(emd_to_population(counts), [2 / 3, 4 / 3])
    np.testing.assert_allclose(emd_to_uniform(counts), [4 / 3, 2 / 3])


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 50), min_size=4, max_size=4), min_size=1, max_size=8).filter(
        lambda rows: all(sum(r) > 0 for r in rows)
    )
)
def test_emd_bounds(rows):
    counts = np.array(rows)
    for theta in (emd_to_population(counts), emd_to_uniform(counts)):
        assert theta.shape == (counts.shape[0],)
        assert np.all(theta >= 0) and np.all(theta <= 2 + 1e-12)
    if counts.shape[0] == 1:
        assert emd_to_population(counts)[0] == pytest.approx(0.0)
