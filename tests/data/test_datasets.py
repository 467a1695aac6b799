"""Tests for fedgame.data.datasets, synthetic and mnist1d."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.data.datasets import Dataset, Digits, stratified_split, subsample
from fedgame.data.mnist1d import Mnist1D, resample, templates
from fedgame.data.partition import Natural
from fedgame.data.synthetic import Synthetic, client_sizes, feature_scales
from fedgame.errors import ScenarioError


def _load(plugin, seed: int = 0, num_clients: int = 5) -> Dataset:
    return plugin.load(rng=np.random.default_rng(seed), num_clients=num_clients)


def _check(ds: Dataset, input_shape: tuple[int, ...], num_classes: int) -> None:
    assert ds.input_shape == input_shape and ds.num_classes == num_classes
    assert ds.x_train.dtype == np.float32 and ds.x_test.dtype == np.float32
    assert ds.y_train.dtype == np.int64 and ds.y_test.dtype == np.int64
    assert ds.x_train.shape == (ds.num_train, *input_shape)
    assert ds.x_test.shape == (ds.num_test, *input_shape)
    assert ds.y_train.min() >= 0 and ds.y_train.max() < num_classes
    assert np.isfinite(ds.x_train).all()


def _same(a: Dataset, b: Dataset) -> bool:
    return np.array_equal(a.x_train, b.x_train) and np.array_equal(a.y_test, b.y_test)


def test_digits_shapes_scale_and_stratified_split():
    ds = _load(Digits(Digits.Config(test_fraction=0.25)))
    _check(ds, (1, 8, 8), 10)
    assert ds.num_train + ds.num_test == 1797
    assert ds.x_train.min() == 0.0 and ds.x_train.max() == 1.0
    test_share = np.bincount(ds.y_test, minlength=10) / np.bincount(
        np.concatenate([ds.y_train, ds.y_test]), minlength=10
    )
    np.testing.assert_allclose(test_share, 0.25, atol=0.01)
    assert _same(ds, _load(Digits(Digits.Config(test_fraction=0.25))))
    assert not _same(ds, _load(Digits(Digits.Config(test_fraction=0.25)), seed=1))


def test_stratified_split_and_subsample():
    labels = np.array([0] * 10 + [1] * 4 + [2])
    train, test = stratified_split(labels, test_fraction=0.5, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(15))
    assert np.bincount(labels[test], minlength=3).tolist() == [5, 2, 0]  # singleton stays in train
    idx = subsample(100, 10, rng=np.random.default_rng(0))
    assert idx.size == 10 and np.all(np.diff(idx) > 0)
    np.testing.assert_array_equal(subsample(5, 10, rng=np.random.default_rng(0)), np.arange(5))


def test_dataset_rejects_inconsistent_arrays():
    x = np.zeros((3, 2), np.float32)
    with pytest.raises(ValueError, match="labels outside"):
        Dataset("t", x, np.array([0, 1, 2]), x, np.array([0, 0, 0]), 2, (2,))
    with pytest.raises(TypeError):
        Dataset("t", x.astype(np.float64), np.zeros(3, np.int64), x, np.zeros(3, np.int64), 2, (2,))


def test_feature_scales_and_sizes_follow_fedprox():
    np.testing.assert_allclose(feature_scales(3) ** 2, [1.0, 2**-1.2, 3**-1.2])
    sizes = client_sizes(
        1000, mean=4.0, sigma=2.0, offset=50, cap=None, rng=np.random.default_rng(0)
    )
    assert sizes.min() >= 50
    assert np.median(sizes - 50) == pytest.approx(np.exp(4.0), rel=0.15)  # lognormal median
    capped = client_sizes(
        1000, mean=4.0, sigma=2.0, offset=50, cap=300, rng=np.random.default_rng(0)
    )
    assert capped.max() == 300


def test_synthetic_groups_and_natural_federation():
    cfg = Synthetic.Config(alpha=0.5, beta=0.5, max_client_samples=200)
    ds = _load(Synthetic(cfg), num_clients=6)
    _check(ds, (60,), 10)
    assert ds.groups is not None and np.unique(ds.groups).tolist() == list(range(6))
    parts = Natural(Natural.Config()).split(
        ds.y_train, num_clients=6, rng=np.random.default_rng(0), groups=ds.groups
    )
    assert all(np.all(ds.groups[p] == k) for k, p in enumerate(parts))
    # each client keeps ~80% of its 50..200 samples for training
    assert all(40 <= p.size <= 160 for p in parts)
    assert _same(ds, _load(Synthetic(cfg), num_clients=6))
    assert not _same(ds, _load(Synthetic(cfg), seed=1, num_clients=6))


def test_synthetic_labels_are_argmax_of_a_linear_model():
    # Within one client the labels are a linear function of x, so a linear model fits them.
    from sklearn.linear_model import LogisticRegression

    ds = _load(Synthetic(Synthetic.Config(size_offset=400, max_client_samples=400)), num_clients=1)
    clf = LogisticRegression(C=100.0, max_iter=3000).fit(ds.x_train, ds.y_train)
    assert clf.score(ds.x_train, ds.y_train) > 0.95


def test_synthetic_heterogeneity_grows_with_beta():
    def spread(beta: float) -> float:
        ds = _load(Synthetic(Synthetic.Config(alpha=0.0, beta=beta)), num_clients=20)
        means = np.stack([ds.x_train[ds.groups == k, 0].mean() for k in range(20)])
        return float(means.std())

    assert spread(5.0) > 3 * spread(0.0)


def test_mnist1d_templates_match_original():
    t = templates()
    assert t.shape == (10, 12)
    np.testing.assert_allclose(t[:, 0], 0.0)  # signals start at 0
    np.testing.assert_allclose(t[:, -1], 0.0)  # ... and end at 0 (first and last values equal)
    np.testing.assert_allclose(t.std(axis=1), 1 / 6)


def test_mnist1d_resample_matches_linear_interpolation():
    x = np.array([[0.0, 1.0, 2.0, 9.0], [0.0, 10.0, 0.0, 0.0]])
    out = resample(x, np.array([3, 2]), 5)
    np.testing.assert_allclose(out, [[0, 0.5, 1, 1.5, 2], [0, 2.5, 5, 7.5, 10]])


def test_mnist1d_shapes_balance_determinism():
    cfg = Mnist1D.Config(num_samples=500)
    ds = _load(Mnist1D(cfg))
    _check(ds, (40,), 10)
    assert ds.num_train == 400 and ds.num_test == 100
    assert np.bincount(ds.y_train).tolist() == [40] * 10
    x = np.concatenate([ds.x_train, ds.x_test])
    assert abs(x.mean()) < 1e-5 and x.std() == pytest.approx(1.0, abs=1e-5)
    assert _same(ds, _load(Mnist1D(cfg)))
    assert not _same(ds, _load(Mnist1D(cfg), seed=1))


def test_mnist1d_logistic_regression_accuracy_matches_paper():
    # Greydanus (2020), Fig. 3: logistic regression reaches ~32% test accuracy on MNIST-1D
    # (chance is 10%); a generator that lost its noise would be near-linearly separable. LDA is
    # a closed-form linear classifier of the same capacity and fits in a fraction of the time.
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis

    ds = _load(Mnist1D(Mnist1D.Config(num_samples=4000)))
    lda = LinearDiscriminantAnalysis().fit(ds.x_train, ds.y_train)
    acc = lda.score(ds.x_test, ds.y_test)
    assert 0.22 < acc < 0.45


def test_mnist1d_rejects_bad_padding():
    from fedgame.registry import validate

    with pytest.raises(ScenarioError) as err:
        validate("dataset", {"kind": "mnist1d", "padding": [10, 5]}, key="data.dataset")
    assert err.value.key == "data.dataset.padding"
    assert "low <= high" in str(err.value)
