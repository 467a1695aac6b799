"""Coordinate-wise median aggregator."""

from __future__ import annotations

import torch

from fedgame.mechanisms.aggregation.robust import CoordinateMedian, coordinate_median
from fedgame.mechanisms.base import WeightedSumAggregator


def test_median_odd_and_even():
    odd = torch.tensor([[1.0, 10.0], [2.0, -5.0], [100.0, 0.0]])
    assert coordinate_median(odd).tolist() == [2.0, 0.0]
    even = torch.tensor([[1.0], [2.0], [4.0], [100.0]])
    assert coordinate_median(even).tolist() == [3.0]


def test_median_resists_one_outlier_and_is_not_a_weighted_sum():
    agg = CoordinateMedian(None)
    ups = torch.tensor([[1.0], [1.1], [0.9], [1e6]])
    assert abs(agg.aggregate(ups, clients=[]).item() - 1.05) < 1e-6
    assert not isinstance(agg, WeightedSumAggregator)
