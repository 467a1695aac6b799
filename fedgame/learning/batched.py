"""The batched learner: every selected client of a round trains in one vectorised computation.

Through the local steps each parameter is one ``[K, *shape]`` tensor (row k is client k's);
the K updates are flattened once, to ``[K, P]``, at the end. A step computes all K gradients
at once: the K losses come from ``torch.func.vmap`` over ``functional_call`` (one module
skeleton, never one module per client), and one ``torch.autograd.grad`` of their sum with
respect to the parameter tensors gives every client's gradient (client k's loss depends on
row k alone, so d(sum)/d(theta_k) is its own gradient). Each client's minibatch is gathered
from one shared on-device data tensor through the clients' sample indices, kept on the device
as one flat array with offsets (:class:`~fedgame.data.shards.ClientShards`), so a million
clients cost 4-8 bytes per sample index and nothing per round. Per-sample gradients (DP-SGD
clipping) use ``vmap`` over ``torch.func.grad_and_value``. Every tensor and generator of a
round lives on the learner's device; the only device-to-host transfers are the ones a round
reports (losses, accuracy).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn
from torch.func import functional_call, vmap

from fedgame.data.shards import as_shards
from fedgame.errors import DivergenceError
from fedgame.learning.device import device_name
from fedgame.learning.evaluate import (
    FORWARD_ROWS,
    accuracy_and_loss,
    accuracy_and_loss_models,
    cross_entropy,
    forward_rows,
    hidden_activations,
)
from fedgame.learning.models import ParamLayout
from fedgame.learning.settings import TrainingSettings

_CHUNK_ELEMENTS = 1 << 24  # bound on K * samples * width held at once (per-sample grads)

#: Where :meth:`BatchedLearner.train` calls made in this context go: None (the default) trains
#: here; a lockstep batch of sweep runs (:mod:`fedgame.run.lockstep`) sets a route per run,
#: called as ``route(learner, client_ids, round_index, generator, hooks)`` (``hooks``: the
#: keywords given), which returns the ``LocalResult`` the learner itself would compute.
TRAIN_ROUTE: ContextVar[Callable[..., LocalResult] | None] = ContextVar(
    "fedgame_train_route", default=None
)


@dataclass(frozen=True)
class LocalResult:
    """Outcome of one round of local training for K clients."""

    updates: Tensor  # [K, P]: theta_k - theta_global after local training, before privacy
    train_loss: Tensor  # [K]: mean over local steps of the minibatch loss (before each step)


@dataclass(frozen=True)
class Batches:
    """Sample indices into ``x_train`` per client and step, with a validity mask.

    ``indices`` and ``mask`` are ``[K, steps, B]``. ``local_sgd`` masks nothing (except clients
    without data); ``fedsgd`` has one step over the client's padded full data.
    """

    indices: Tensor
    mask: Tensor

    def weights(self, dtype: torch.dtype) -> Tensor:
        """Per-sample weights of each step's masked mean (zero for padding)."""
        m = self.mask.to(dtype)
        return m / m.sum(dim=-1, keepdim=True).clamp_min(1.0)


def clip_scale(norms: Tensor, *, bound: float) -> Tensor:
    """Per-sample clipping factor ``1 / max(1, ||g|| / bound)``.

    DPFL-BCS (paper 000, notes §1.4, per-sample clipping before averaging; the ``l1`` norm for
    the Laplace mechanism) and Abadi et al.'s DP-SGD: a clipped gradient has norm ``<= bound``.
    """
    return 1.0 / torch.clamp(norms / bound, min=1.0)


def resolve_device(device: str | torch.device) -> torch.device:
    """``"auto"`` becomes CUDA when available, else CPU; anything else is passed to torch.

    ``cuda`` is the current CUDA device (``cuda:0`` unless the process chose another), so a
    worker started with ``CUDA_VISIBLE_DEVICES`` set uses the GPU it was given.
    """
    if str(device) == "auto":
        return torch.device(device_name("auto"))
    return torch.device(device)


class BatchedLearner:
    """All clients' local training as one batched ``vmap`` computation.

    Holds the global model as a flat vector ``[P]``, the training and test data on ``device``,
    and each client's sample indices. ``train`` runs ``settings.local_steps`` SGD steps (or one
    full-data step in ``fedsgd`` mode) for K clients at once and returns their updates
    ``theta_k - theta_global``; optional per-sample clipping and per-step Gaussian noise give
    DP-SGD style local training.
    """

    def __init__(
        self,
        module: nn.Module,
        *,
        params: dict[str, Tensor],
        x_train: np.ndarray | Tensor,
        y_train: np.ndarray | Tensor,
        x_test: np.ndarray | Tensor,
        y_test: np.ndarray | Tensor,
        client_indices: Sequence[np.ndarray],
        settings: TrainingSettings,
        device: str | torch.device = "cpu",
    ) -> None:
        self.device = resolve_device(device)
        self.module = module
        self.settings = settings
        self.layout = ParamLayout.of(params)
        self.num_params = self.layout.numel
        self.dtype = next(iter(params.values())).dtype
        self._global = self.layout.flatten(params).detach().to(self.device, self.dtype).clone()
        self.x_train = torch.as_tensor(x_train).to(self.device, self.dtype)
        self.y_train = torch.as_tensor(y_train).to(self.device, torch.int64)
        self.x_test = torch.as_tensor(x_test).to(self.device, self.dtype)
        self.y_test = torch.as_tensor(y_test).to(self.device, torch.int64)
        n_train = int(self.x_train.shape[0])
        self._index = _SampleIndex.of(client_indices, n=n_train, device=self.device)
        self.client_sizes = self._index.sizes
        self._client_losses = vmap(self._weighted_loss)
        self._sample_grads: Any = None  # built on first DP-SGD step (imports torch._dynamo)
        self._buffer: Tensor | None = None  # per-sample gradients [K, B, P], reused
        self._velocity: Tensor | None = None  # server momentum, after the first update
        self._hidden: int | None = None  # activations per test sample, on first evaluate

    # -- losses seen by torch.func -------------------------------------------------------
    def _weighted_loss(self, params: dict[str, Tensor], x: Tensor, y: Tensor, w: Tensor) -> Tensor:
        logits = functional_call(self.module, params, (x,))
        return (cross_entropy(logits, y) * w).sum()

    def _named_sample_loss(self, params: dict[str, Tensor], x: Tensor, y: Tensor) -> Tensor:
        logits = functional_call(self.module, params, (x.unsqueeze(0),))
        return cross_entropy(logits, y.unsqueeze(0))[0]

    # -- public API ----------------------------------------------------------------------
    @property
    def global_params(self) -> Tensor:
        """A copy of the global model as a flat vector ``[P]``."""
        return self._global.clone()

    def set_global_params(self, flat: Tensor) -> None:
        """Replace the global model by ``flat`` (``[P]``)."""
        if tuple(flat.shape) != (self.num_params,):
            raise ValueError(f"expected shape ({self.num_params},), got {tuple(flat.shape)}")
        self._global = flat.detach().to(self.device, self.dtype).clone()

    def apply_update(self, delta: Tensor) -> None:
        """``v <- beta v + delta``, ``theta_global += server_lr * v`` (``beta`` =
        ``server_momentum``; 0 gives ``theta_global += server_lr * delta``, plain FedAvg).

        ``DivergenceError`` if the model turns non-finite; the model and ``v`` are then kept.
        Server momentum only post-processes released aggregates, so it costs no privacy.
        """
        step = delta.to(self.device, self.dtype)
        beta = self.settings.server_momentum
        velocity = step if beta == 0.0 or self._velocity is None else beta * self._velocity + step
        new = self._global + self.settings.server_lr * velocity
        if not bool(torch.isfinite(new).all()):
            raise DivergenceError("global model became non-finite after the update")
        self._global = new
        if beta != 0.0:
            self._velocity = velocity

    def evaluate(self) -> tuple[float, float]:
        """``(test accuracy, test loss)`` of the global model."""
        params = self.layout.unflatten(self._global)
        bs = self.settings.eval_batch_size
        if self._hidden is None:  # once: the architecture stays (0: one pass in any case)
            many = self.x_test.shape[0] > FORWARD_ROWS
            self._hidden = hidden_activations(self.module, params, self.x_test[:1]) if many else 0
        rows = forward_rows(self.x_test, self._hidden)  # the threads may change between rounds
        return accuracy_and_loss(
            self.module, params, self.x_test, self.y_test, batch_size=bs, rows=rows
        )

    def sample_batches(
        self,
        client_ids: Sequence[int] | np.ndarray,
        *,
        round_index: int,
        generator: torch.Generator,
    ) -> Batches:
        """This round's sample indices for ``client_ids`` (``round_index`` is for callers' logs).

        ``local_sgd``: one random permutation of each client's samples (argsort of uniform
        keys, padding sorted last), read cyclically for ``local_steps * batch_size``
        positions, so a client with fewer samples than a batch repeats them. ``fedsgd``: the
        client's full padded data as one step.
        """
        del round_index  # the generator carries the round's randomness
        ids = torch.as_tensor(np.asarray(client_ids, dtype=np.int64), device=self.device)
        padded, counts = self._index.padded(ids)
        valid = torch.arange(padded.shape[1], device=self.device) < counts[:, None]
        if self.settings.mode == "fedsgd":
            return Batches(padded[:, None, :], valid[:, None, :])
        s, b = self.settings.local_steps, self.settings.batch_size
        keys = torch.rand(padded.shape, generator=generator, device=self.device)
        keys = keys.masked_fill(~valid, 2.0)
        perm = keys.argsort(dim=1)
        pos = torch.arange(s * b, device=self.device) % counts.clamp_min(1)[:, None]
        idx = padded.gather(1, perm.gather(1, pos)).reshape(len(ids), s, b)
        mask = (counts > 0)[:, None, None].expand(-1, s, b)
        return Batches(idx, mask)

    def train(
        self,
        client_ids: Sequence[int] | np.ndarray,
        *,
        round_index: int,
        generator: torch.Generator,
        batches: Batches | None = None,
        step_noise_std: Tensor | None = None,
        per_sample_clip: float | None = None,
        clip_norm: str | None = None,
    ) -> LocalResult:
        """Local training of ``client_ids`` from the global model, all at once.

        Args:
            client_ids: the K clients (indices into ``client_indices``).
            round_index: 0-based round, for the learning-rate schedule.
            generator: source of the batch shuffle (when ``batches`` is None) and step noise.
            batches: precomputed :class:`Batches` (default: :meth:`sample_batches`).
            step_noise_std: ``[K]`` std of Gaussian noise added to each step's gradient.
            per_sample_clip: per-sample gradient clipping norm for this call (a privacy
                mechanism's DP-SGD clip); default ``settings.per_sample_clip``.
            clip_norm: ``"l2"`` or ``"l1"`` for ``per_sample_clip``; default the settings'.

        Returns:
            The K updates ``[K, P]`` and mean training losses ``[K]``.
        """
        route = TRAIN_ROUTE.get()
        if route is not None and batches is None:
            given = {
                "step_noise_std": step_noise_std,
                "per_sample_clip": per_sample_clip,
                "clip_norm": clip_norm,
            }
            hooks = {key: value for key, value in given.items() if value is not None}
            return route(self, client_ids, round_index, generator, hooks)
        return self._local(
            self._global,
            client_ids,
            round_index,
            generator,
            batches,
            step_noise_std=step_noise_std,
            per_sample_clip=per_sample_clip,
            clip_norm=clip_norm,
        )

    def train_models(
        self,
        models: Tensor,
        model_of: Sequence[int] | np.ndarray | Tensor,
        client_ids: Sequence[int] | np.ndarray,
        *,
        round_index: int,
        generator: torch.Generator,
        batches: Batches | None = None,
        step_noise_std: Tensor | None = None,
        per_sample_clip: float | None = None,
        clip_norm: str | None = None,
        data: tuple[Tensor, Tensor] | None = None,
    ) -> LocalResult:
        """Local training of ``client_ids`` from several global models, all at once.

        ``models`` is ``[G, P]`` (G models of this learner's architecture); client
        ``client_ids[i]`` starts from ``models[model_of[i]]``, and its update is taken from that
        model: ``theta_i - models[model_of[i]]``. Rows never mix (client i's loss depends on
        its own row only), so each client's update is the one a learner holding its model as
        the global one computes from the same batches; with ``step_noise_std`` the noise of
        all K clients is drawn at once from ``generator`` (``[K, P]`` a step). The G models
        share this learner's data and training settings (steps, learning rate, clipping).
        ``data`` (``x``, ``y``) replaces this learner's training data for the call: the
        ``batches`` (then required) index into it (several learners' data concatenated, each
        learner's batches offset to its part: :mod:`fedgame.run.lockstep`).
        The other arguments are :meth:`train`'s.
        """
        if data is not None and batches is None:
            raise ValueError("train_models with data needs the batches that index into it")
        starts = torch.as_tensor(models).to(self.device, self.dtype)
        if starts.ndim != 2 or starts.shape[1] != self.num_params:
            raise ValueError(f"models must be [G, {self.num_params}], got {tuple(starts.shape)}")
        tags = torch.as_tensor(np.asarray(model_of, dtype=np.int64), device=self.device)
        if tags.shape != (len(client_ids),):
            raise ValueError(f"model_of needs one model per client ({len(client_ids)})")
        if len(tags) and (int(tags.min()) < 0 or int(tags.max()) >= starts.shape[0]):
            raise ValueError(f"model_of must lie in [0, {starts.shape[0]})")
        return self._local(
            starts[tags],
            client_ids,
            round_index,
            generator,
            batches,
            step_noise_std=step_noise_std,
            per_sample_clip=per_sample_clip,
            clip_norm=clip_norm,
            data=data,
        )

    def evaluate_models(self, models: Tensor) -> list[tuple[float, float]]:
        """``(test accuracy, test loss)`` of each of the G models ``[G, P]``, in one batched
        forward pass per chunk of the test set (:func:`accuracy_and_loss_models`)."""
        starts = torch.as_tensor(models).to(self.device, self.dtype)
        if starts.ndim != 2 or starts.shape[1] != self.num_params:
            raise ValueError(f"models must be [G, {self.num_params}], got {tuple(starts.shape)}")
        params = self.layout.unflatten(starts)
        bs = self.settings.eval_batch_size
        return accuracy_and_loss_models(
            self.module, params, self.x_test, self.y_test, batch_size=bs
        )

    def _local(
        self,
        start: Tensor,
        client_ids: Sequence[int] | np.ndarray,
        round_index: int,
        generator: torch.Generator,
        batches: Batches | None,
        *,
        step_noise_std: Tensor | None,
        per_sample_clip: float | None,
        clip_norm: str | None,
        data: tuple[Tensor, Tensor] | None = None,
    ) -> LocalResult:
        """K clients' local training from ``start``: ``[P]`` (every client from the global
        model) or ``[K, P]`` (client i from row i), on ``data`` (default: the learner's)."""
        x_train, y_train = (self.x_train, self.y_train) if data is None else data
        k = len(client_ids)
        if batches is None:
            batches = self.sample_batches(client_ids, round_index=round_index, generator=generator)
        losses = torch.zeros(k, dtype=self.dtype, device=self.device)
        if k == 0:
            return LocalResult(start.expand(k, -1).clone(), losses)
        lr = self.settings.lr_at(round_index)
        wd = self.settings.weight_decay
        weights = batches.weights(self.dtype).to(self.device)
        indices = batches.indices.to(self.device)
        std = None if step_noise_std is None else step_noise_std.to(self.device, self.dtype)
        steps = indices.shape[1]
        clip = per_sample_clip if per_sample_clip is not None else self.settings.per_sample_clip
        norm = clip_norm or self.settings.clip_norm
        # one tensor [K, *shape] per parameter through the steps, flattened once at the end
        # (elementwise the same arithmetic as on the flat [K, P] rows, so the same bits)
        params = [
            p.expand(k, *shape).clone()
            for p, shape in zip(self.layout.unflatten(start).values(), self.layout.shapes)
        ]
        for s in range(steps):
            g, loss = self._step_gradient(
                params, indices[:, s], weights[:, s], clip, norm, x_train, y_train
            )
            if std is not None:
                noise = torch.randn(
                    (k, self.num_params), generator=generator, device=self.device, dtype=self.dtype
                )
                scaled = std[:, None] * noise
                g = [gi + ni for gi, ni in zip(g, self._split(scaled, k))]
            if wd:
                g = [gi + wd * pi for gi, pi in zip(g, params)]
            shared = _shared_storages(g)  # one gradient for two parameters: never in place
            params = [
                _sgd_step(pi, gi, lr, grad_shared=gi.untyped_storage().data_ptr() in shared)
                for pi, gi in zip(params, g)
            ]
            losses += loss
        theta = torch.cat([p.reshape(k, -1) for p in params], dim=1)
        return LocalResult(theta - start, losses / steps)

    # -- internals -----------------------------------------------------------------------
    def _split(self, flat: Tensor, k: int) -> list[Tensor]:
        """Views of the rows of ``flat`` (``[K, P]``) as one ``[K, *shape]`` per parameter."""
        return [
            flat[:, o : o + math.prod(shape)].reshape(k, *shape)
            for shape, o in zip(self.layout.shapes, self.layout.offsets)
        ]

    def _step_gradient(
        self,
        params: list[Tensor],
        idx: Tensor,
        w: Tensor,
        clip: float | None,
        norm: str,
        x_train: Tensor,
        y_train: Tensor,
    ) -> tuple[list[Tensor], Tensor]:
        """Masked-mean gradient (per-sample clipped when ``clip``), one ``[K, *shape]`` per
        parameter, and the losses ``[K]``."""
        k, b = idx.shape
        width = self.num_params if clip is not None else max(1, x_train[0].numel())
        chunk = max(1, _CHUNK_ELEMENTS // (k * width))
        g_sum: list[Tensor] | None = None
        loss_sum = torch.zeros(k, dtype=self.dtype, device=self.device)
        for lo in range(0, b, chunk):
            ic, wc = idx[:, lo : lo + chunk], w[:, lo : lo + chunk]
            x, y = gather_rows(x_train, ic), gather_rows(y_train, ic)
            if clip is None:
                g, loss = self._mean_gradient(params, x, y, wc)
            else:
                g_each, loss_each = self._per_sample_gradients(params, x, y)
                p = 2 if norm == "l2" else 1
                scale = clip_scale(torch.linalg.vector_norm(g_each, ord=p, dim=-1), bound=clip)
                g = self._split(torch.einsum("kb,kbp->kp", wc * scale, g_each), k)
                loss = (loss_each * wc).sum(dim=-1)
            if g_sum is None:  # 0 + g is g (up to the sign of a zero, which no step reads)
                g_sum = list(g)
            else:
                g_sum = [a + c for a, c in zip(g_sum, g)]
            loss_sum += loss
        assert g_sum is not None  # b >= 1: at least one chunk
        return g_sum, loss_sum

    def _mean_gradient(
        self, params: list[Tensor], x: Tensor, y: Tensor, w: Tensor
    ) -> tuple[list[Tensor], Tensor]:
        """Each client's gradient of its weighted loss, one ``[K, *shape]`` per parameter,
        and the losses ``[K]``.

        One backward pass through the K losses' sum: client k's loss depends on row k of
        each parameter only, so row k of the gradient of the sum is client k's own gradient.
        The gradient is taken with respect to each parameter's own tensor (one taken with
        respect to a flat ``[K, P]`` vector would scatter every slice into it, every step).
        """
        with torch.enable_grad():
            leaves = [p.detach().requires_grad_(True) for p in params]
            named = dict(zip(self.layout.names, leaves))
            losses = self._client_losses(named, x, y, w)
            grads = torch.autograd.grad(losses.sum(), leaves)
        return list(grads), losses.detach()

    def _per_sample_gradients(
        self, params: list[Tensor], x: Tensor, y: Tensor
    ) -> tuple[Tensor, Tensor]:
        """Per-sample gradients ``[K, B, P]`` and losses ``[K, B]`` (``vmap`` of ``grad``).

        The gradient is taken with respect to the named parameters and concatenated once: a
        gradient with respect to the flat vector would scatter every parameter's slice into
        its own ``[K, B, P]`` buffer (9 s against 1 s a round for LeNet-5 on 20 clients of
        60 samples).
        """
        if self._sample_grads is None:
            from torch.func import grad_and_value  # imports torch._dynamo: only when needed

            inner = vmap(grad_and_value(self._named_sample_loss), in_dims=(None, 0, 0))
            self._sample_grads = vmap(inner)
        grads, losses = self._sample_grads(dict(zip(self.layout.names, params)), x, y)
        k, b = losses.shape
        flat = self._sample_buffer(k * b).view(k, b, self.num_params)
        torch.cat([grads[name].reshape(k, b, -1) for name in self.layout.names], -1, out=flat)
        return flat, losses

    def _sample_buffer(self, rows: int) -> Tensor:
        """``rows * P`` values of one buffer kept for the learner's life, so the per-sample
        gradients are concatenated into memory already paged in (a fresh ``[K, B, P]`` each
        step costs its page faults, 3-7x the copy itself on CPU); as large as a step's chunk:
        ``_CHUNK_ELEMENTS`` values (64 MiB in float32) or one sample per client."""
        need = rows * self.num_params
        if self._buffer is None or self._buffer.numel() < need:
            self._buffer = torch.empty(need, dtype=self.dtype, device=self.device)
        return self._buffer[:need]


@dataclass(frozen=True)
class _SampleIndex:
    """Every client's training-sample indices on the learner's device.

    ``flat`` holds all indices client after client, client i's from ``offsets[i]``, ``counts[i]``
    of them; ``width`` is the largest count (the padded width of a client's row).
    """

    flat: Tensor
    offsets: Tensor
    counts: Tensor
    width: int
    sizes: np.ndarray

    @classmethod
    def of(
        cls, client_indices: Sequence[np.ndarray], *, n: int, device: torch.device
    ) -> _SampleIndex:
        """Check the indices (each in ``[0, n)``) and move them to ``device``."""
        shards = as_shards(client_indices)
        flat = shards.flat
        bad = np.flatnonzero((flat < 0) | (flat >= n)) if flat.size else flat
        if bad.size:
            row = int(np.searchsorted(shards.offsets, bad[0], side="right")) - 1
            raise ValueError(f"client {row} has sample indices outside [0, {n})")
        sizes = shards.sizes
        return cls(
            torch.from_numpy(flat).to(device),
            torch.from_numpy(shards.offsets[:-1].copy()).to(device),
            torch.from_numpy(sizes).to(device),
            max(1, int(sizes.max(initial=0))),
            sizes,
        )

    def padded(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        """Rows of ``ids`` padded to ``width`` with index 0 ``[K, width]``, and their counts."""
        counts = self.counts[ids]
        cols = torch.arange(self.width, device=ids.device)
        if self.flat.numel() == 0:
            return torch.zeros(len(ids), self.width, dtype=torch.int64, device=ids.device), counts
        last = (counts - 1).clamp_min(0)[:, None]
        pos = (self.offsets[ids][:, None] + torch.minimum(cols, last)).clamp_max(
            self.flat.numel() - 1
        )
        valid = cols < counts[:, None]
        return self.flat[pos].masked_fill(~valid, 0), counts


#: training settings that act on the server's side only: learners that differ in them can
#: still train their clients in one ``train_models`` call
SERVER_ONLY_SETTINGS = frozenset({"server_lr", "server_momentum"})


def shared_call_key(learner: BatchedLearner, spec: Any) -> str:
    """Learners with equal keys can train in one ``train_models`` call: the same model
    ``spec``, training settings (but the server's step), module class, parameter layout,
    dtype and device. (Whether they read the same data is for the caller to check.)"""
    return json.dumps(
        {
            "spec": spec,
            "settings": learner.settings.model_dump(exclude=set(SERVER_ONLY_SETTINGS)),
            "module": type(learner.module).__qualname__,
            "layout": [learner.layout.names, [list(s) for s in learner.layout.shapes]],
            "dtype": str(learner.dtype),
            "device": str(learner.device),
        },
        sort_keys=True,
        default=str,
    )


def gather_rows(table: Tensor, index: Tensor) -> Tensor:
    """``table[index]`` for an int64 or int32 ``index`` of any shape, on ``table``'s device,
    with entries in ``[0, len(table))`` (no wrapping of negative ones): the rows of
    ``table`` at ``index``, shaped ``[*index.shape, *table.shape[1:]]``. The same values as advanced
    indexing, which on CPU gathers element by element; ``index_select`` copies whole rows
    (0.2 against 1.4 ms for 20 x 32 rows of 784 values on one thread)."""
    rows = table.index_select(0, index.reshape(-1))
    return rows.view(*index.shape, *table.shape[1:])


def _sgd_step(param: Tensor, grad: Tensor, lr: float, *, grad_shared: bool = False) -> Tensor:
    """``param − lr·grad``, in place into ``param`` when it is the step's own tensor (each
    element once, the whole of its memory: :func:`_owns_dense`), and the scaling in place
    into ``grad`` too when the gradient is also its own and no other parameter's
    (``grad_shared``: autograd hands one tensor to two parameters that enter the loss as a
    sum). The same two roundings as the out-of-place expression (``lr·grad``, then the
    difference), so the same bits, without allocating two ``[K, *shape]`` temporaries a
    step.

    The gradient of a linear layer's weight comes out of the backward pass transposed (the
    ``[K, in, out]`` product, read as ``[K, out, in]``); scaling it in place walks its memory
    in order, and only the difference reads it across. For 20 clients of the 784-64-10 MLP
    on one CPU thread that is 3.0 against 5.8 ms a step for the first layer's weight."""
    same = grad.dtype == param.dtype and grad.shape == param.shape
    if not (same and _owns_dense(param)) or param.requires_grad or grad.requires_grad:
        return param - lr * grad
    own_grad = not grad_shared and _owns_dense(grad)
    return param.sub_(grad.mul_(lr) if own_grad else lr * grad)


def _shared_storages(tensors: Sequence[Tensor]) -> set[int]:
    """Storage addresses that more than one of ``tensors`` uses."""
    seen: set[int] = set()
    shared: set[int] = set()
    for tensor in tensors:
        address = tensor.untyped_storage().data_ptr()
        (shared if address in seen else seen).add(address)
    return shared


def _owns_dense(tensor: Tensor) -> bool:
    """Whether ``tensor`` covers its whole storage with each element once, in any order of
    its dimensions (contiguous, or a permutation of a contiguous tensor). Writing to it in
    place then changes only tensors that view the same storage, which the caller rules out
    (:func:`_shared_storages`)."""
    if tensor.untyped_storage().nbytes() != tensor.numel() * tensor.element_size():
        return False
    expected = 1
    for dim in sorted(range(tensor.ndim), key=tensor.stride):
        if tensor.shape[dim] != 1 and tensor.stride(dim) != expected:
            return False
        expected *= tensor.shape[dim]
    return tensor.storage_offset() == 0
