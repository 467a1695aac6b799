"""Label-distribution quality of client datasets (pure functions, no state, no RNG).

QI-DPFL (Sec. III-A, Eq. 11) scores client ``h`` by the "earth mover's distance"
``θ_h = Σ_j |P_h(y=j) − P_a(y=j)|`` between its label marginal and a reference ``P_a``. This is
the L1 distance (range ``[0, 2]``), not Wasserstein-1: with the discrete metric ``W1 = L1 / 2``,
so rankings agree but thresholds differ by a factor of two. fedgame implements Eq. 11 (L1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def label_counts(labels: np.ndarray, parts: Sequence[np.ndarray], num_classes: int) -> np.ndarray:
    """Per-client label histograms.

    Args:
        labels: label of every sample, ints in ``[0, num_classes)``.
        parts: one index array per client (as returned by a partition), or
            :class:`~fedgame.data.shards.ClientShards`.
        num_classes: number of classes ``C``.

    Returns:
        int64 array ``[N, C]``: ``counts[i, j]`` samples of class ``j`` held by client ``i``.
    """
    from fedgame.data.shards import as_shards

    return as_shards(parts).label_counts(labels, num_classes)


def label_frequencies(counts: np.ndarray) -> np.ndarray:
    """Row-normalised label counts ``P_h(y=j)`` (QI-DPFL Sec. III-A); empty rows become NaN."""
    counts = np.asarray(counts, dtype=np.float64)
    totals = counts.sum(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(totals > 0, counts / totals, np.nan)


def emd(client_freq: np.ndarray, reference_freq: np.ndarray) -> float | np.ndarray:
    """QI-DPFL Eq. 11: ``θ = Σ_j |P_h(y=j) − P_a(y=j)|`` (L1 over classes, in ``[0, 2]``).

    Broadcasts over leading axes: a ``[C]`` client vector gives a float, ``[N, C]`` gives ``[N]``.

    >>> emd(np.array([0.5, 0.5]), np.array([1.0, 0.0]))
    1.0
    """
    dist = np.abs(np.asarray(client_freq, float) - np.asarray(reference_freq, float)).sum(-1)
    return float(dist) if np.ndim(dist) == 0 else dist


def population_frequencies(counts: np.ndarray) -> np.ndarray:
    """Label frequencies of all clients pooled: QI-DPFL's reference ``P_a`` estimated from data."""
    return label_frequencies(np.asarray(counts).sum(axis=0))


def emd_to_population(counts: np.ndarray) -> np.ndarray:
    """Eq. 11 of QI-DPFL for every client, with ``P_a`` = the pooled label frequencies; ``[N]``."""
    return np.asarray(emd(label_frequencies(counts), population_frequencies(counts)))


def emd_to_uniform(counts: np.ndarray) -> np.ndarray:
    """Eq. 11 of QI-DPFL for every client, with ``P_a`` uniform over the ``C`` classes; ``[N]``."""
    counts = np.asarray(counts)
    uniform = np.full(counts.shape[-1], 1.0 / counts.shape[-1])
    return np.asarray(emd(label_frequencies(counts), uniform))
