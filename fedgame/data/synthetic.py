"""FedProx Synthetic(α, β): a federated-by-construction logistic-regression dataset.

Li et al., "Federated Optimization in Heterogeneous Networks" (MLSys 2020), Sec. 5.1. Client
``k`` draws ``u_k ~ N(0, α)``, ``W_k ~ N(u_k, 1)`` (``dim × C``), ``b_k ~ N(u_k, 1)``,
``B_k ~ N(0, β)``, ``v_k ~ N(B_k, 1)`` per dimension, then samples ``x ~ N(v_k, Σ)`` with
``Σ = diag(j^-1.2)`` and labels ``y = argmax(softmax(W_k^T x + b_k))``. α controls how much the
local models differ, β how much the local feature distributions differ. As in the FedProx
reference code, α and β are standard deviations (``numpy.random.normal(0, alpha)``).
"""

from __future__ import annotations

import math

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from fedgame.data.datasets import DataFootprint, Dataset
from fedgame.registry import register


def client_sizes(
    num_clients: int,
    *,
    mean: float,
    sigma: float,
    offset: int,
    cap: int | None,
    rng: np.random.Generator,
) -> np.ndarray:
    """Samples per client: ``int(lognormal(mean, sigma)) + offset``, capped at ``cap``.

    FedProx (Li et al. 2020, reference code) uses ``lognormal(4, 2) + 50`` without a cap.
    """
    drawn = rng.lognormal(mean, sigma, num_clients)
    sizes = np.minimum(drawn, np.iinfo(np.int64).max / 4).astype(np.int64) + offset
    return sizes if cap is None else np.minimum(sizes, cap)


def feature_scales(dim: int) -> np.ndarray:
    """Standard deviations ``sqrt(Σ_jj)`` with ``Σ_jj = j^-1.2`` (Li et al. 2020, Sec. 5.1)."""
    return np.arange(1, dim + 1, dtype=np.float64) ** -0.6


@register("dataset", "synthetic")
class Synthetic:
    """FedProx Synthetic(α, β) (Li et al. 2020) with one generating client per fedgame client.

    Sets ``groups`` to the generating client id, so the ``natural`` partition reproduces the
    FedProx federation. The test set holds ``test_fraction`` of every client's samples. With
    ``iid=True`` all clients share ``W, b ~ N(0, 1)`` and ``v_k = B_k`` (FedProx's Synthetic-IID,
    used with α = β = 0). Features are left unscaled (their variance is already O(1)).
    """

    class Config(BaseModel):
        """Parameters of ``synthetic``."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        alpha: float = Field(
            1.0,
            ge=0.0,
            description="model heterogeneity: W_k ~ N(u_k, 1), u_k ~ N(0, alpha), >= 0",
        )
        beta: float = Field(
            1.0,
            ge=0.0,
            description="feature heterogeneity: v_k ~ N(B_k, 1), B_k ~ N(0, beta), >= 0",
        )
        iid: bool = Field(
            False,
            description="FedProx Synthetic-IID: one shared model and v_k = B_k for every client",
        )
        dim: int = Field(60, ge=1, description="features per sample, >= 1")
        num_classes: int = Field(10, ge=2, description="classes, >= 2")
        size_mean: float = Field(
            4.0, description="mean of the log of a client's sample count (lognormal mu)"
        )
        size_sigma: float = Field(
            2.0,
            ge=0.0,
            description="std of the log of a client's sample count (lognormal sigma), >= 0",
        )
        size_offset: int = Field(
            50, ge=2, description="samples every client has on top of the lognormal draw, >= 2"
        )
        max_client_samples: int | None = Field(
            2000, ge=2, description="cap on one client's samples, >= 2; unset: no cap"
        )
        test_fraction: float = Field(
            0.2,
            gt=0.0,
            lt=1.0,
            description="share of every client's samples held out for testing, (0, 1)",
        )

    def __init__(self, config: Config) -> None:
        self.config = config

    def footprint(self, *, num_clients: int) -> DataFootprint:
        """Expected sizes (client sizes are random); generation holds float64 copies."""
        cfg = self.config
        mean = math.exp(min(cfg.size_mean + cfg.size_sigma**2 / 2, 700.0)) + cfg.size_offset
        size = min(mean, cfg.max_client_samples or mean)
        total = math.ceil(num_clients * size)
        test = math.floor(total * cfg.test_fraction)
        load = total * (cfg.dim * 24 + 24)
        return DataFootprint(total - test, test, (cfg.dim,), cfg.num_classes, load, exact=False)

    def load(self, *, rng: np.random.Generator, num_clients: int) -> Dataset:
        """Generate ``num_clients`` local datasets and pool them."""
        cfg = self.config
        sizes = client_sizes(
            num_clients,
            mean=cfg.size_mean,
            sigma=cfg.size_sigma,
            offset=cfg.size_offset,
            cap=cfg.max_client_samples,
            rng=rng,
        )
        u = rng.normal(0.0, cfg.alpha, num_clients)
        big_b = rng.normal(0.0, cfg.beta, num_clients)
        scales = feature_scales(cfg.dim)
        if cfg.iid:
            w_global = rng.normal(0.0, 1.0, (cfg.dim, cfg.num_classes))
            b_global = rng.normal(0.0, 1.0, cfg.num_classes)
        train_x, train_y, train_g, test_x, test_y = [], [], [], [], []
        for k in range(num_clients):
            if cfg.iid:
                v, w, b = np.full(cfg.dim, big_b[k]), w_global, b_global
            else:
                v = rng.normal(big_b[k], 1.0, cfg.dim)
                w = rng.normal(u[k], 1.0, (cfg.dim, cfg.num_classes))
                b = rng.normal(u[k], 1.0, cfg.num_classes)
            x = v + rng.standard_normal((int(sizes[k]), cfg.dim)) * scales
            y = np.argmax(x @ w + b, axis=1)
            n_test = min(round(cfg.test_fraction * sizes[k]), int(sizes[k]) - 1)
            cut = int(sizes[k]) - n_test
            train_x.append(x[:cut])
            train_y.append(y[:cut])
            train_g.append(np.full(cut, k))
            test_x.append(x[cut:])
            test_y.append(y[cut:])
        return Dataset(
            name="synthetic",
            x_train=np.concatenate(train_x).astype(np.float32),
            y_train=np.concatenate(train_y).astype(np.int64),
            x_test=np.concatenate(test_x).astype(np.float32),
            y_test=np.concatenate(test_y).astype(np.int64),
            num_classes=cfg.num_classes,
            input_shape=(cfg.dim,),
            groups=np.concatenate(train_g).astype(np.int64),
        )
