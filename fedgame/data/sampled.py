"""The ``sampled`` partition: small per-client shards drawn from one shared training set.

Every other partition gives each training sample to exactly one client, so a population can
never outgrow its dataset (Fashion-MNIST's 60,000 images cap it at 60,000 clients). For
population-scale studies (10^5-10^6 clients, of which a few hundred train per round) each
client instead draws its own small shard from the shared pool, as cross-device studies
subsample a large corpus per device; samples are shared between clients.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from fedgame.data.shards import ClientShards
from fedgame.errors import ScenarioError
from fedgame.registry import register

#: clients drawn per block (bounds the temporaries of a label-skewed draw)
_BLOCK = 1 << 16


@register("partition", "sampled")
class Sampled:
    """Each client draws ``size`` training samples from the shared pool (clients share samples).

    Without ``classes`` a client's samples are drawn uniformly from the whole training set
    (iid). With ``classes: c`` each client first draws ``c`` distinct classes uniformly, then
    fills its ``size`` slots round-robin over them (slot ``j`` takes class ``j mod c``), each
    slot a uniform sample of its class: pathological label skew as in ``shards``. Draws are
    with replacement (a client can hold a sample twice; with ``size`` 32 out of 60,000 images
    that happens to under 1 % of clients). Memory: 8 bytes per client and sample.
    """

    class Config(BaseModel):
        """Parameters of ``sampled``."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        size: PositiveInt = Field(
            32, le=1_000_000, description="training samples each client draws, 1..10^6"
        )
        classes: PositiveInt | None = Field(
            None, description="distinct classes per client (label skew); unset: iid draws"
        )

    def __init__(self, config: Config) -> None:
        self.config = config

    def check_capacity(self, *, num_train: int, num_classes: int, num_clients: int) -> None:
        """A non-empty training set, and no more ``classes`` per client than there are."""
        if num_train < 1:
            raise ScenarioError("size", self.config.size, "needs at least one training sample")
        c = self.config.classes
        if c is not None and c > num_classes:
            raise ScenarioError("classes", c, f"at most the dataset's {num_classes} classes")

    def split(
        self,
        labels: np.ndarray,
        *,
        num_clients: int,
        rng: np.random.Generator,
        groups: np.ndarray | None = None,
    ) -> ClientShards:
        """Draw every client's shard; returns sorted rows as :class:`ClientShards`."""
        labels = np.asarray(labels)
        present = np.unique(labels)
        self.check_capacity(
            num_train=labels.shape[0], num_classes=present.size, num_clients=num_clients
        )
        size, c = self.config.size, self.config.classes
        if c is None:
            rows = rng.integers(0, labels.shape[0], size=(num_clients, size), dtype=np.int64)
        else:
            rows = self._label_skewed(labels, present, num_clients, c, rng)
        rows.sort(axis=1)
        return ClientShards.from_matrix(rows)

    def _label_skewed(
        self,
        labels: np.ndarray,
        present: np.ndarray,
        num_clients: int,
        c: int,
        rng: np.random.Generator,
    ) -> np.ndarray:
        """``[N, size]`` sample indices, each client's from ``c`` classes of its own."""
        size = self.config.size
        order = np.argsort(labels, kind="stable")
        counts = np.array([np.count_nonzero(labels == k) for k in present], dtype=np.int64)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        slot = np.arange(size) % c
        rows = np.empty((num_clients, size), dtype=np.int64)
        for lo in range(0, num_clients, _BLOCK):
            hi = min(lo + _BLOCK, num_clients)
            chosen = rng.random((hi - lo, present.size)).argsort(axis=1)[:, :c]
            klass = chosen[:, slot]  # [block, size]: class position of each slot
            u = rng.random((hi - lo, size))
            within = np.minimum((u * counts[klass]).astype(np.int64), counts[klass] - 1)
            rows[lo:hi] = order[starts[klass] + within]
        return rows
