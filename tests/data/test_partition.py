"""Tests for fedgame.data.partition."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from fedgame.data.partition import (
    DirichletLabel,
    Iid,
    Natural,
    QuantitySkew,
    Shards,
    SSimilarity,
    repair_min_size,
    shards_per_class,
    sizes_from_shares,
)
from fedgame.data.quality import emd_to_population, label_counts
from fedgame.errors import ScenarioError

KINDS = {
    "iid": lambda m: Iid(Iid.Config(min_size=m)),
    "dirichlet": lambda m: DirichletLabel(DirichletLabel.Config(alpha=0.3, min_size=m)),
    "dirichlet_per_client": lambda m: DirichletLabel(
        DirichletLabel.Config(alpha=0.3, min_size=m, variant="per_client")
    ),
    "shards": lambda m: Shards(Shards.Config(classes_per_client=2, min_size=m)),
    "quantity_skew": lambda m: QuantitySkew(QuantitySkew.Config(beta=0.5, min_size=m)),
    "quantity_skew_lognormal": lambda m: QuantitySkew(
        QuantitySkew.Config(distribution="lognormal", sigma=1.5, min_size=m)
    ),
    "natural": lambda m: Natural(Natural.Config(mapping="random", min_size=m)),
    "s_similarity": lambda m: SSimilarity(SSimilarity.Config(s=30.0, min_size=m)),
    "s_similarity_equal": lambda m: SSimilarity(
        SSimilarity.Config(s=70.0, sizes="equal", min_size=m)
    ),
}


def _split(kind: str, labels: np.ndarray, num_clients: int, seed: int, min_size: int = 1):
    groups = np.arange(labels.size) % (num_clients + 3)  # natural: more groups than clients
    return KINDS[kind](min_size).split(
        labels, num_clients=num_clients, rng=np.random.default_rng(seed), groups=groups
    )


@pytest.mark.parametrize("kind", sorted(KINDS))
@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(60, 400),
    num_classes=st.integers(2, 10),
    num_clients=st.integers(1, 12),
    seed=st.integers(0, 2**32 - 1),
)
def test_exact_cover_min_size_and_determinism(kind, n, num_classes, num_clients, seed):
    assume(kind != "shards" or 2 * num_clients >= num_classes)
    labels = np.random.default_rng(seed).integers(0, num_classes, n)
    min_size = 1 if kind in ("shards", "natural") else 3
    parts = _split(kind, labels, num_clients, seed, min_size)

    assert len(parts) == num_clients
    for p in parts:
        assert p.dtype == np.int64
        assert np.all(np.diff(p) > 0)  # sorted, no duplicates
        assert p.size >= min_size
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(n))
    again = _split(kind, labels, num_clients, seed, min_size)
    assert all(np.array_equal(a, b) for a, b in zip(parts, again))


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_other_seed_gives_other_split(kind):
    labels = np.random.default_rng(0).integers(0, 5, 500)
    a = _split(kind, labels, 8, seed=1)
    b = _split(kind, labels, 8, seed=2)
    assert any(not np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.parametrize("kind", ["iid", "dirichlet", "quantity_skew"])
def test_too_few_samples_raises(kind):
    with pytest.raises(ScenarioError) as err:
        _split(kind, np.zeros(10, dtype=np.int64), 4, seed=0, min_size=3)
    assert err.value.key == "min_size"
    assert "4 clients" in str(err.value)


def test_dirichlet_large_alpha_is_near_iid_and_tiny_alpha_concentrated():
    labels = np.repeat(np.arange(10), 600)
    rng = np.random.default_rng(3)
    rng2 = np.random.default_rng(3)
    big = DirichletLabel(DirichletLabel.Config(alpha=1e4)).split(labels, num_clients=10, rng=rng)
    tiny = DirichletLabel(DirichletLabel.Config(alpha=1e-3)).split(labels, num_clients=10, rng=rng2)
    emd_big = emd_to_population(label_counts(labels, big, 10))
    tiny_counts = label_counts(labels, tiny, 10)
    assert emd_big.max() < 0.1
    # with tiny alpha each class lands (almost) wholly on one client
    assert np.all(tiny_counts.max(axis=0) >= 0.99 * 600)
    assert emd_to_population(tiny_counts).mean() > 1.5


def test_dirichlet_repairs_when_redraws_run_out():
    labels = np.repeat(np.arange(3), 20)
    part = DirichletLabel(DirichletLabel.Config(alpha=1e-3, min_size=5, max_redraws=0))
    parts = part.split(labels, num_clients=10, rng=np.random.default_rng(0))
    assert min(p.size for p in parts) >= 5
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.arange(60))


def test_repair_moves_from_largest():
    owner = np.array([0] * 9 + [1])
    fixed = repair_min_size(owner, num_clients=3, min_size=2, rng=np.random.default_rng(0))
    np.testing.assert_array_equal(np.bincount(fixed, minlength=3), [6, 2, 2])
    assert fixed[9] == 1  # a client's own samples stay


@settings(max_examples=25, deadline=None)
@given(
    k=st.integers(1, 4),
    num_clients=st.integers(3, 15),
    seed=st.integers(0, 2**32 - 1),
)
def test_shards_at_most_k_classes(k, num_clients, seed):
    labels = np.random.default_rng(seed).integers(0, 3, 300)
    parts = Shards(Shards.Config(classes_per_client=k)).split(
        labels, num_clients=num_clients, rng=np.random.default_rng(seed)
    )
    assert all(np.unique(labels[p]).size <= k for p in parts)


def test_shards_on_balanced_data_match_mcmahan():
    labels = np.repeat(np.arange(10), 60)
    parts = Shards(Shards.Config(classes_per_client=2)).split(
        labels, num_clients=10, rng=np.random.default_rng(0)
    )
    assert [p.size for p in parts] == [60] * 10  # 20 shards of 30, two per class


def test_shards_per_class_minimises_largest_shard():
    np.testing.assert_array_equal(shards_per_class(np.array([100, 50, 10]), total=6), [3, 2, 1])
    np.testing.assert_array_equal(shards_per_class(np.array([2, 1]), total=3), [2, 1])


def test_shards_rejects_too_few_shards_for_classes():
    labels = np.repeat(np.arange(10), 10)
    with pytest.raises(ScenarioError) as err:
        Shards(Shards.Config(classes_per_client=1)).split(
            labels, num_clients=5, rng=np.random.default_rng(0)
        )
    assert err.value.key == "classes_per_client"


def test_sizes_from_shares_largest_remainder():
    sizes = sizes_from_shares(10, np.array([0.5, 0.3, 0.2]), min_size=1)
    np.testing.assert_array_equal(sizes, [5, 3, 2])  # surplus 7 -> 3.5, 2.1, 1.4 -> 4, 2, 1
    assert sizes_from_shares(7, np.array([1.0, 0.0]), min_size=2).tolist() == [5, 2]


def test_quantity_skew_keeps_labels_iid_but_sizes_skewed():
    labels = np.repeat(np.arange(4), 500)
    parts = QuantitySkew(QuantitySkew.Config(beta=0.3)).split(
        labels, num_clients=5, rng=np.random.default_rng(1)
    )
    sizes = np.array([p.size for p in parts])
    assert sizes.max() > 2 * sizes.min()
    big = parts[int(np.argmax(sizes))]
    assert emd_to_population(label_counts(labels, [big], 4))[0] < 0.2


def test_natural_exact_maps_sorted_groups():
    labels = np.zeros(6, dtype=np.int64)
    groups = np.array([7, 3, 7, 5, 3, 3])
    parts = Natural(Natural.Config()).split(
        labels, num_clients=3, rng=np.random.default_rng(0), groups=groups
    )
    assert [p.tolist() for p in parts] == [[1, 4, 5], [3], [0, 2]]


def test_natural_errors():
    labels = np.zeros(6, dtype=np.int64)
    nat = Natural(Natural.Config())
    with pytest.raises(ScenarioError, match="natural groups"):
        nat.split(labels, num_clients=2, rng=np.random.default_rng(0))
    with pytest.raises(ScenarioError) as err:
        nat.split(labels, num_clients=2, rng=np.random.default_rng(0), groups=np.arange(6))
    assert err.value.key == "mapping" and "exactly" in str(err.value)
    with pytest.raises(ScenarioError, match="at least"):
        Natural(Natural.Config(mapping="random")).split(
            labels, num_clients=7, rng=np.random.default_rng(0), groups=np.arange(6)
        )


def test_registry_builds_partitions():
    from fedgame.registry import create

    part = create("partition", "dirichlet", {"alpha": 0.5, "min_size": 2})
    assert isinstance(part, DirichletLabel) and part.config.alpha == 0.5
    with pytest.raises(ScenarioError) as err:
        create("partition", "dirichlet", {"alpha": 0.0})
    assert err.value.key == "partition.alpha"


def _s_parts(labels: np.ndarray, s: float, num_clients: int, seed: int, **kw):
    part = SSimilarity(SSimilarity.Config(s=s, **kw))
    return part, part.split_parts(labels, num_clients=num_clients, rng=np.random.default_rng(seed))


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(50, 600),
    num_classes=st.integers(2, 10),
    num_clients=st.integers(1, 15),
    s=st.floats(0.0, 100.0),
    sizes=st.sampled_from(["uniform", "equal"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_s_similarity_covers_once_with_paper_label_structure(
    n, num_classes, num_clients, s, sizes, seed
):
    """Paper 001 §VI-A: every sample once; s % of each client IID, the rest label-sorted."""
    labels = np.random.default_rng(seed).integers(0, num_classes, n)
    part, pairs = _s_parts(labels, s, num_clients, seed, sizes=sizes)
    merged = part.split(labels, num_clients=num_clients, rng=np.random.default_rng(seed))
    iid = [a for a, _ in pairs]
    ordered = [b for _, b in pairs]
    everything = np.concatenate([*iid, *ordered])
    np.testing.assert_array_equal(np.sort(everything), np.arange(n))  # each sample exactly once
    for (a, b), m in zip(pairs, merged):
        np.testing.assert_array_equal(np.sort(np.concatenate([a, b])), m)
        assert a.size == round(s / 100.0 * m.size)  # the client's IID share
    # the non-IID parts, read in client order, are the rest of the data sorted by label
    chain = labels[np.concatenate(ordered)]
    assert np.all(np.diff(chain) >= 0)
    np.testing.assert_array_equal(np.sort(chain), np.sort(np.delete(labels, np.concatenate(iid))))
    sizes_ = np.array([m.size for m in merged])
    if sizes == "equal":
        assert sizes_.max() - sizes_.min() <= 1


@settings(max_examples=25, deadline=None)
@given(num_clients=st.integers(2, 20), seed=st.integers(0, 2**32 - 1))
def test_s_similarity_zero_gives_contiguous_label_ranges(num_clients, seed):
    """s = 0: client k's labels all lie at or below client k+1's (contiguous sorted chunks)."""
    labels = np.repeat(np.arange(10), 60)
    _, pairs = _s_parts(labels, 0.0, num_clients, seed)
    spans = [(labels[b].min(), labels[b].max()) for a, b in pairs if b.size]
    assert all(a.size == 0 for a, _ in pairs)
    assert all(hi <= lo for (_, hi), (lo, _) in itertools.pairwise(spans))
    # about as many clients as classes: nobody holds more than 3 labels
    if num_clients >= 10:
        assert max(hi - lo + 1 for lo, hi in spans) <= 3


def test_s_similarity_hundred_is_iid_and_sizes_follow_uniform_shares():
    labels = np.repeat(np.arange(10), 1000)
    _part, pairs = _s_parts(labels, 100.0, 20, seed=4)
    assert all(b.size == 0 for _, b in pairs)
    counts = label_counts(labels, [a for a, _ in pairs], 10)
    assert emd_to_population(counts).max() < 0.5  # every client sees every class
    sizes = counts.sum(axis=1)
    # |M_k| = |S| v_k / sum v, v_k ~ U(0.5, 1.5): sizes between 1/3 and 3 times each other
    assert sizes.sum() == 10000 and sizes.min() >= 10000 / 20 * 0.5 / 1.5 - 1
    assert sizes.max() <= 10000 / 20 * 1.5 / 0.5 + 1 and sizes.std() > 50


def test_s_similarity_skew_falls_as_s_grows():
    labels = np.repeat(np.arange(10), 500)
    emd = []
    for s in (0.0, 30.0, 70.0, 100.0):
        part = SSimilarity(SSimilarity.Config(s=s, sizes="equal"))
        parts = part.split(labels, num_clients=10, rng=np.random.default_rng(1))
        emd.append(emd_to_population(label_counts(labels, parts, 10)).mean())
    assert emd[0] > emd[1] > emd[2] > emd[3]
    assert emd[0] > 1.5 and emd[3] < 0.3


def test_s_similarity_config_is_validated():
    from fedgame.registry import create

    with pytest.raises(ScenarioError) as err:
        create("partition", "s_similarity", {"s": 120})
    assert err.value.key == "partition.s"
    with pytest.raises(ScenarioError) as err:
        create("partition", "s_similarity", {"size_low": 2.0, "size_high": 1.0})
    assert "size_low" in str(err.value)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(20, 400),
    num_classes=st.integers(2, 6),
    num_clients=st.integers(1, 20),
    alpha=st.floats(0.05, 50.0),
    seed=st.integers(0, 2**32 - 1),
)
def test_dirichlet_per_client_equal_sizes_exact_cover(n, num_classes, num_clients, alpha, seed):
    labels = np.random.default_rng(seed).integers(0, num_classes, n)
    part = DirichletLabel(DirichletLabel.Config(alpha=alpha, variant="per_client"))
    assume(n >= num_clients)
    parts = part.split(labels, num_clients=num_clients, rng=np.random.default_rng(seed))
    allidx = np.concatenate(parts)
    assert np.array_equal(np.sort(allidx), np.arange(n))
    sizes = [p.size for p in parts]
    assert max(sizes) - min(sizes) <= 1


def test_dirichlet_per_client_min_size_error():
    part = DirichletLabel(DirichletLabel.Config(min_size=50, variant="per_client"))
    with pytest.raises(ScenarioError):
        part.split(np.zeros(100, dtype=np.int64), num_clients=3, rng=np.random.default_rng(0))


def test_dirichlet_per_client_mean_mix_is_p_and_spread_falls_with_alpha():
    rng = np.random.default_rng(0)
    labels = rng.choice(4, size=20000, p=[0.4, 0.3, 0.2, 0.1])
    p = np.bincount(labels) / labels.size
    spreads = []
    for alpha in (0.1, 1.0, 100.0):
        part = DirichletLabel(DirichletLabel.Config(alpha=alpha, variant="per_client"))
        parts = part.split(labels, num_clients=100, rng=np.random.default_rng(1))
        mix = np.array([np.bincount(labels[q], minlength=4) / q.size for q in parts])
        assert np.allclose(mix.mean(axis=0), p, atol=1e-9)
        spreads.append(mix.std(axis=0).mean())
    assert spreads[0] > spreads[1] > spreads[2]
