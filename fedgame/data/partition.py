"""Partitions of a training set over clients (family ``"partition"``).

Every plug-in has ``split(labels, *, num_clients, rng, groups=None) -> list[np.ndarray]``: one
sorted int64 index array per client, every sample in exactly one client, every client with at
least ``min_size`` samples (``ScenarioError`` when that is impossible). All randomness comes from
``rng``. Kinds: ``iid``, ``dirichlet`` (label skew), ``shards`` (pathological label skew),
``quantity_skew`` (size skew, iid labels), ``s_similarity`` (paper 001's s %-similarity) and
``natural`` (the dataset's own groups).
"""

from __future__ import annotations

import heapq
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fedgame.errors import ScenarioError
from fedgame.registry import register


class PartitionConfig(BaseModel):
    """Knob shared by every partition."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    min_size: int = Field(1, ge=1, description="smallest local dataset a client may get")


class Partitioner(Protocol):
    """A partition plug-in: each client's sample indices (the ``partition`` stream)."""

    def split(
        self,
        labels: np.ndarray,
        *,
        num_clients: int,
        rng: np.random.Generator,
        groups: np.ndarray | None = None,
    ) -> Any: ...


@runtime_checkable
class DeclaresMinSize(Protocol):
    """A partition config declaring ``min_size`` (as :class:`PartitionConfig` does); the preflight
    capacity check reads it, taking 1 for a config without it."""

    @property
    def min_size(self) -> int: ...


@runtime_checkable
class ChecksCapacity(Protocol):
    """Capability of a partition with its own rule for the training samples it needs (one
    whose clients share samples); raises ``ScenarioError`` on its own keys. Partitions
    without it need ``num_clients * min_size`` samples (:func:`check_capacity`)."""

    def check_capacity(self, *, num_train: int, num_classes: int, num_clients: int) -> None: ...


def check_capacity(n: int, *, num_clients: int, min_size: int) -> None:
    """Raise ``ScenarioError`` unless ``n`` samples can give each client ``min_size`` samples."""
    if num_clients < 1 or n < num_clients * min_size:
        raise ScenarioError(
            "min_size",
            min_size,
            f"needs num_clients * min_size <= number of samples; got {num_clients} clients "
            f"and {n} samples",
        )


def finish(parts: list[np.ndarray]) -> list[np.ndarray]:
    """Sort each client's indices and cast them to int64."""
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def cut_by_sizes(order: np.ndarray, sizes: np.ndarray) -> list[np.ndarray]:
    """Cut ``order`` into consecutive pieces of the given ``sizes``."""
    return np.split(order, np.cumsum(sizes)[:-1])


def sizes_from_shares(total: int, shares: np.ndarray, *, min_size: int) -> np.ndarray:
    """Integer sizes ``>= min_size`` summing to ``total``, the surplus split ∝ ``shares``.

    Uses largest remainders, so the result is deterministic given ``shares``.
    """
    surplus = total - min_size * shares.size
    raw = surplus * shares / shares.sum()
    sizes = np.floor(raw).astype(np.int64)
    left = surplus - int(sizes.sum())
    sizes[np.argsort(-(raw - sizes), kind="stable")[:left]] += 1
    return sizes + min_size


@register("partition", "iid")
class Iid:
    """Uniform random split into (near-)equal parts: each client's labels follow the population."""

    Config = PartitionConfig

    def __init__(self, config: PartitionConfig) -> None:
        self.config = config

    def split(
        self,
        labels: np.ndarray,
        *,
        num_clients: int,
        rng: np.random.Generator,
        groups: np.ndarray | None = None,
    ) -> list[np.ndarray]:
        """Shuffle and cut into ``num_clients`` parts whose sizes differ by at most one."""
        check_capacity(labels.shape[0], num_clients=num_clients, min_size=self.config.min_size)
        return finish(np.array_split(rng.permutation(labels.shape[0]), num_clients))


@register("partition", "dirichlet")
class DirichletLabel:
    """Label-skewed split: each class is spread over clients with proportions ~ Dir(α·1).

    The per-class variant common in FL code bases (e.g. NIID-Bench), used for the "Dirichlet"
    partitions of Hsu et al. (2019) and QI-DPFL; client sizes are unequal. Small ``alpha``
    concentrates each class on few clients; large ``alpha`` approaches ``iid``. A draw that leaves
    a client below ``min_size`` is re-drawn up to ``max_redraws`` times, then repaired by moving
    random samples from the largest clients, so any feasible request succeeds.

    ``variant="per_client"`` is Hsu et al. (2019)'s own draw, which QI-DPFL cites (note 003
    §6.3): client sizes differ by at most one and client i's class proportions are
    q_i ~ Dir(α·p), p the label frequencies. Client i fills its quota class by class,
    sampling without replacement from what is left of each class; when a class runs out, q_i
    is renormalised over the classes that remain, so the split always completes.
    """

    class Config(PartitionConfig):
        """Parameters of ``dirichlet``."""

        variant: Literal["per_class", "per_client"] = Field(
            "per_class",
            description="per_class: each class split by Dir(α·1), unequal sizes; "
            "per_client: equal sizes, class mix q_i ~ Dir(α·p) (Hsu et al. 2019)",
        )

        alpha: float = Field(
            1.0, gt=0.0, description="Dirichlet concentration (smaller: more label skew)"
        )
        max_redraws: int = Field(
            20, ge=0, description="redraws allowed to give every client min_size samples"
        )

    def __init__(self, config: Config) -> None:
        self.config = config

    def _draw(self, labels: np.ndarray, num_clients: int, rng: np.random.Generator) -> np.ndarray:
        owner = np.empty(labels.shape[0], dtype=np.int64)
        for c in np.unique(labels):
            idx = rng.permutation(np.flatnonzero(labels == c))
            p = rng.dirichlet(np.full(num_clients, self.config.alpha))
            cuts = np.clip(np.round(np.cumsum(p[:-1]) * idx.size), 0, idx.size).astype(np.int64)
            counts = np.diff(cuts, prepend=0, append=idx.size)
            owner[idx] = np.repeat(np.arange(num_clients), counts)
        return owner

    def split(
        self,
        labels: np.ndarray,
        *,
        num_clients: int,
        rng: np.random.Generator,
        groups: np.ndarray | None = None,
    ) -> list[np.ndarray]:
        """Assign each class's samples to clients by Dirichlet proportions."""
        min_size = self.config.min_size
        check_capacity(labels.shape[0], num_clients=num_clients, min_size=min_size)
        if self.config.variant == "per_client":
            return per_client_split(labels, num_clients, alpha=self.config.alpha, rng=rng)
        for _ in range(self.config.max_redraws + 1):
            owner = self._draw(labels, num_clients, rng)
            sizes = np.bincount(owner, minlength=num_clients)
            if sizes.min() >= min_size:
                break
        else:
            owner = repair_min_size(owner, num_clients=num_clients, min_size=min_size, rng=rng)
        return finish([np.flatnonzero(owner == k) for k in range(num_clients)])


def per_client_split(
    labels: np.ndarray, num_clients: int, *, alpha: float, rng: np.random.Generator
) -> list[np.ndarray]:
    """Equal sizes (differ by <= 1), client mix q_i ~ Dir(α·p); see :class:`DirichletLabel`.

    Each client's quota is drawn multinomially from q_i restricted to the classes with samples
    left (capped by what is left; the shortfall re-drawn on the remaining classes).
    """
    classes, inverse = np.unique(labels, return_inverse=True)
    freq = np.bincount(inverse) / labels.shape[0]
    pools = [list(rng.permutation(np.flatnonzero(inverse == c))) for c in range(classes.size)]
    left = np.array([len(pool) for pool in pools], dtype=np.int64)
    sizes = np.array([p.size for p in np.array_split(np.arange(labels.shape[0]), num_clients)])
    q = rng.dirichlet(alpha * freq, size=num_clients)
    parts: list[np.ndarray] = [np.empty(0, dtype=np.int64)] * num_clients
    for i in rng.permutation(num_clients):
        take = np.zeros(classes.size, dtype=np.int64)
        need = int(sizes[i])
        while need > 0:
            open_ = left - take > 0
            w = np.where(open_, q[i], 0.0)
            w = w / w.sum() if w.sum() > 0 else open_ / open_.sum()
            draw = np.minimum(rng.multinomial(need, w), left - take)
            take += draw
            need -= int(draw.sum())
        chosen = []
        for c in np.flatnonzero(take):
            chosen.extend(pools[c][left[c] - take[c] : left[c]])
        left -= take
        parts[i] = np.asarray(chosen, dtype=np.int64)
    return finish(parts)


def repair_min_size(
    owner: np.ndarray, *, num_clients: int, min_size: int, rng: np.random.Generator
) -> np.ndarray:
    """Move random samples from the currently largest clients to those below ``min_size``."""
    owner = owner.copy()
    sizes = np.bincount(owner, minlength=num_clients)
    for k in np.flatnonzero(sizes < min_size):
        while sizes[k] < min_size:
            donor = int(np.argmax(sizes))
            take = min(min_size - sizes[k], sizes[donor] - min_size)
            moved = rng.choice(np.flatnonzero(owner == donor), size=take, replace=False)
            owner[moved] = k
            sizes[donor] -= take
            sizes[k] += take
    return owner


@register("partition", "shards")
class Shards:
    """Pathological label skew (McMahan et al. 2017): ``classes_per_client`` shards per client.

    The data are sorted by label and every class is cut into contiguous shards, ``num_clients ·
    classes_per_client`` in all, allotted to classes so that the largest shard is as small as
    possible; shards never straddle two classes, so a client sees at most ``classes_per_client``
    labels. Shards are dealt to clients at random.
    """

    class Config(PartitionConfig):
        """Parameters of ``shards``."""

        classes_per_client: int = Field(2, ge=1, description="labels each client holds")

    def __init__(self, config: Config) -> None:
        self.config = config

    def split(
        self,
        labels: np.ndarray,
        *,
        num_clients: int,
        rng: np.random.Generator,
        groups: np.ndarray | None = None,
    ) -> list[np.ndarray]:
        """Cut every class into shards and deal ``classes_per_client`` shards to each client."""
        k = self.config.classes_per_client
        check_capacity(labels.shape[0], num_clients=num_clients, min_size=self.config.min_size)
        classes, counts = np.unique(labels, return_counts=True)
        total = num_clients * k
        if total < classes.size or total > labels.shape[0]:
            raise ScenarioError(
                "classes_per_client",
                k,
                f"needs {classes.size} classes <= num_clients * classes_per_client <= "
                f"{labels.shape[0]} samples; got {num_clients} clients",
            )
        per_class = shards_per_class(counts, total=total)
        shards: list[np.ndarray] = []
        for c, s in zip(classes, per_class):
            shards.extend(np.array_split(rng.permutation(np.flatnonzero(labels == c)), s))
        smallest = np.sort([s.size for s in shards])[:k].sum()
        if smallest < self.config.min_size:
            raise ScenarioError(
                "min_size",
                self.config.min_size,
                f"cannot be guaranteed: the {k} smallest shards hold {smallest} samples",
            )
        deal = rng.permutation(total).reshape(num_clients, k)
        return finish([np.concatenate([shards[j] for j in row]) for row in deal])


def shards_per_class(counts: np.ndarray, *, total: int) -> np.ndarray:
    """Shards per class: one each, then greedily to the class with the largest shard size.

    Minimises the largest shard ``ceil(n_c / s_c)`` subject to ``1 <= s_c <= n_c``.
    """
    shards = np.ones(counts.size, dtype=np.int64)
    heap = [(-float(n), c) for c, n in enumerate(counts) if n > 1]
    heapq.heapify(heap)
    for _ in range(total - counts.size):
        _, c = heapq.heappop(heap)
        shards[c] += 1
        if shards[c] < counts[c]:
            heapq.heappush(heap, (-counts[c] / shards[c], c))
    return shards


@register("partition", "quantity_skew")
class QuantitySkew:
    """Size skew with iid labels: client sizes ∝ Dir(β·1) or lognormal(0, σ) shares.

    Each client first gets ``min_size`` samples; the rest are split in proportion to the drawn
    shares (largest remainders). Samples are shuffled before cutting, so labels are iid.
    """

    class Config(PartitionConfig):
        """Parameters of ``quantity_skew``."""

        distribution: Literal["dirichlet", "lognormal"] = Field(
            "dirichlet", description="law of the client sizes: dirichlet or lognormal"
        )
        beta: float = Field(0.5, gt=0.0, description="Dirichlet concentration of the sizes")
        sigma: float = Field(1.0, ge=0.0, description="log-normal sigma of the sizes")

    def __init__(self, config: Config) -> None:
        self.config = config

    def split(
        self,
        labels: np.ndarray,
        *,
        num_clients: int,
        rng: np.random.Generator,
        groups: np.ndarray | None = None,
    ) -> list[np.ndarray]:
        """Draw size shares, then cut a shuffled index list by those sizes."""
        cfg = self.config
        n = labels.shape[0]
        check_capacity(n, num_clients=num_clients, min_size=cfg.min_size)
        if cfg.distribution == "dirichlet":
            shares = rng.dirichlet(np.full(num_clients, cfg.beta))
        else:
            shares = rng.lognormal(0.0, cfg.sigma, num_clients)
        sizes = sizes_from_shares(n, shares, min_size=cfg.min_size)
        return finish(cut_by_sizes(rng.permutation(n), sizes))


@register("partition", "s_similarity")
class SSimilarity:
    """s %-similarity split (paper 001 §VI-A, after SCAFFOLD): s % IID, the rest label-sorted.

    Xu, Zhang & Huang, "Tackling Privacy Heterogeneity in DP-FL" (paper 001), §VI-A, following
    Karimireddy et al. (SCAFFOLD, 2020): client k holds |M_k| = |S|·v_k / Σ_i v_i samples with
    v_k ~ U(``size_low``, ``size_high``) = U(0.5, 1.5) (``sizes: uniform``; ``equal`` gives
    sizes that differ by at most one); ``s`` % of them are drawn IID from the training set and
    the other (100 - ``s``) % come from the label-sorted data. ``s = 100`` is an IID split;
    ``s = 0`` gives every client a contiguous range of labels (one or two classes when there
    are about as many clients as classes).

    The paper gives no recipe; fedgame's is note 001 §6.1's. Shuffle the samples; client k's
    IID part is m_k = round(s·|M_k|/100) samples taken consecutively from the first Σ m_k of
    the shuffled order (the IID pool); the rest are sorted by label (stably, so the order
    within a label stays random) and cut, in client order, into contiguous chunks of
    |M_k| - m_k samples. :meth:`split_parts` returns the two parts separately.
    """

    class Config(PartitionConfig):
        """Parameters of ``s_similarity``."""

        s: float = Field(
            30.0,
            ge=0.0,
            le=100.0,
            description="s-similarity: percent of each client's data drawn IID (paper 001)",
        )
        sizes: Literal["uniform", "equal"] = Field(
            "uniform", description="client sizes: uniform shares U(size_low, size_high) or equal"
        )
        size_low: float = Field(0.5, gt=0.0, description="lower end of the size shares")
        size_high: float = Field(1.5, gt=0.0, description="upper end of the size shares")

        @model_validator(mode="after")
        def _ordered(self) -> Any:
            if self.size_low > self.size_high:
                raise ScenarioError(
                    "size_low", self.size_low, f"must be <= size_high ({self.size_high})"
                )
            return self

    def __init__(self, config: Config) -> None:
        self.config = config

    def sizes(self, n: int, *, num_clients: int, rng: np.random.Generator) -> np.ndarray:
        """Client sizes summing to ``n``, each at least ``min_size`` (∝ v_k when uniform)."""
        cfg = self.config
        if cfg.sizes == "equal":
            return np.array([p.size for p in np.array_split(np.arange(n), num_clients)])
        shares = rng.uniform(cfg.size_low, cfg.size_high, num_clients)
        return sizes_from_shares(n, shares, min_size=cfg.min_size)

    def split_parts(
        self, labels: np.ndarray, *, num_clients: int, rng: np.random.Generator
    ) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per client ``(iid_part, sorted_part)``: the sorted parts, concatenated in client
        order, are the non-IID pool in label order."""
        n = labels.shape[0]
        check_capacity(n, num_clients=num_clients, min_size=self.config.min_size)
        sizes = self.sizes(n, num_clients=num_clients, rng=rng)
        iid_counts = np.rint(self.config.s / 100.0 * sizes).astype(np.int64)
        order = rng.permutation(n)
        pool = int(iid_counts.sum())
        rest = order[pool:]
        rest = rest[np.argsort(labels[rest], kind="stable")]
        iid_parts = cut_by_sizes(order[:pool], iid_counts)
        sorted_parts = cut_by_sizes(rest, sizes - iid_counts)
        return list(zip(iid_parts, sorted_parts))

    def split(
        self,
        labels: np.ndarray,
        *,
        num_clients: int,
        rng: np.random.Generator,
        groups: np.ndarray | None = None,
    ) -> list[np.ndarray]:
        """Each client's IID part and label-sorted chunk, merged."""
        parts = self.split_parts(labels, num_clients=num_clients, rng=rng)
        return finish([np.concatenate(pair) for pair in parts])


@register("partition", "natural")
class Natural:
    """The dataset's own federation (``Dataset.groups``, e.g. FedProx Synthetic's clients).

    ``mapping="exact"`` needs exactly ``num_clients`` distinct groups and gives the ``i``-th
    smallest group id to client ``i``. ``mapping="random"`` needs at least ``num_clients``
    groups, shuffles them and deals them round-robin, so clients hold whole groups.
    """

    class Config(PartitionConfig):
        """Parameters of ``natural``."""

        mapping: Literal["exact", "random"] = Field(
            "exact", description="exact (each group is a client) or random"
        )

    def __init__(self, config: Config) -> None:
        self.config = config

    def split(
        self,
        labels: np.ndarray,
        *,
        num_clients: int,
        rng: np.random.Generator,
        groups: np.ndarray | None = None,
    ) -> list[np.ndarray]:
        """Give each client the samples of its group(s)."""
        cfg = self.config
        if groups is None or groups.shape != labels.shape:
            raise ScenarioError(
                "kind", "natural", "needs a dataset with natural groups (e.g. synthetic)"
            )
        ids, inverse = np.unique(groups, return_inverse=True)
        if ids.size < num_clients or (cfg.mapping == "exact" and ids.size != num_clients):
            need = "exactly" if cfg.mapping == "exact" else "at least"
            raise ScenarioError(
                "mapping",
                cfg.mapping,
                f"needs {need} num_clients = {num_clients} groups; the dataset has {ids.size}",
            )
        if cfg.mapping == "exact":
            client_of_group = np.arange(ids.size)
        else:
            client_of_group = np.empty(ids.size, dtype=np.int64)
            client_of_group[rng.permutation(ids.size)] = np.arange(ids.size) % num_clients
        owner = client_of_group[inverse]
        parts = finish([np.flatnonzero(owner == k) for k in range(num_clients)])
        smallest = min(p.size for p in parts)
        if smallest < cfg.min_size:
            raise ScenarioError(
                "min_size", cfg.min_size, f"is not met: the smallest client has {smallest} samples"
            )
        return parts
