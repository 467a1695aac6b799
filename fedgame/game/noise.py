"""How loud is the noise on a round's released average, measured against the clipping bound.

The server releases the weighted average ū = Σ_k w_k·(u_k + n_k) of the delivered updates,
w_k ≥ 0 the aggregation weights normalised to Σ_k w_k = 1, u_k the clipped update
(‖u_k‖₂ ≤ C) and n_k client k's noise, independent with per-coordinate standard deviation
σ_k on each of the d coordinates. The noise on the average, Σ_k w_k·n_k, has expected
squared L2 norm d·Σ_k w_k²σ_k², so its norm is about

    ‖n̄‖ ≈ sqrt(d · Σ_k w_k² σ_k²),

while the signal's norm is at most C (an average of vectors of norm ≤ C). The ratio
‖n̄‖/C is the round's ``noise_norm_over_clip``: below 1 the released average can carry its
signal; far above it (the per-coordinate std alone hides a factor √d: 25 at d = 650) one
round's update is mostly noise.

Two mechanism families are read differently:

* **Laplace** noise of scale b has per-coordinate standard deviation √2·b.
* **Noise inside training** (DP-SGD, ``step_noise_std``): σ_k is added to each of the s_k
  local steps' averaged, per-sample clipped gradient (norm ≤ C), so the update carries
  lr·√s_k·σ_k of noise per coordinate against a signal of at most lr·s_k·C; the ratio uses
  σ_k/√s_k in place of σ_k (lr cancels).

Noise a mechanism adds to the aggregate itself (central DP, ``FinalisesAggregate``) is not in
the per-client plan; the round check reports NaN for it.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike


def noise_norm_over_clip(
    noise_std: ArrayLike,
    weights: ArrayLike | None = None,
    *,
    dim: int,
    clip: float,
    steps: ArrayLike | None = None,
    laplace: bool = False,
) -> float:
    """sqrt(d·Σ_k w_k²σ_k²)/C for the delivered updates (module doc); NaN with none.

    Args:
        noise_std: σ_k per delivered client (Laplace: the scale b; DP-SGD: per step).
        weights: the aggregation weights (any scale, normalised here; None: equal).
        dim: d, the number of noised coordinates (the model's parameters).
        clip: C, the L2 bound of each clipped update (DP-SGD: of each clipped gradient).
        steps: s_k noisy steps per update when the noise is added in training (None: once).
        laplace: the noise is Laplace of scale σ_k (standard deviation √2·σ_k).

    >>> round(noise_norm_over_clip([1.0, 1.0, 1.0, 1.0], dim=100, clip=1.0), 6)
    5.0
    >>> round(noise_norm_over_clip([2.0, 0.0], [3.0, 1.0], dim=4, clip=0.5), 6)
    6.0
    """
    sigma = np.asarray(noise_std, dtype=float)
    if sigma.size == 0:
        return math.nan
    w = np.ones(sigma.size) if weights is None else np.asarray(weights, dtype=float)
    total = float(w.sum())
    if not total > 0:
        return math.nan
    w = w / total
    if laplace:
        sigma = sigma * math.sqrt(2.0)
    if steps is not None:
        sigma = sigma / np.sqrt(np.maximum(np.asarray(steps, dtype=float), 1.0))
    return float(math.sqrt(dim * float(np.sum(w * w * sigma * sigma))) / clip)
