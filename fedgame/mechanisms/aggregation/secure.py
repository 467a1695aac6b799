"""Secure aggregation: pairwise-masked fixed-point sums around a weighted-sum aggregator."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator

import fedgame.registry as registry
from fedgame.errors import FedGameError, ScenarioError
from fedgame.mechanisms.aggregation.recovery import Recovery, p2p_threshold, recovery_status
from fedgame.mechanisms.base import BoundsStragglers, FaultDraw, WeightedSumAggregator
from fedgame.registry import register
from fedgame.views import ClientView, SetupContext

if TYPE_CHECKING:
    import torch


def straggler_bound(*components: Any) -> int | None:
    """S̄, the most stragglers a round has: the first of ``components`` that bounds them
    (``BoundsStragglers``: a privacy mechanism sized for S̄, a fault model that draws at most
    S̄), or None.

    Note 004 §5.2 (SMPC + DP) sizes the noise for at least N − C̄ − S̄ honest uploads, so the
    secure sum it models must unmask with up to S̄ uploads missing: threshold K − S̄."""
    for comp in components:
        if isinstance(comp, BoundsStragglers):
            return int(comp.max_stragglers)
    return None


@register("aggregation", "secure")
class SecureAggregation:
    """SecAgg-style masked sum (Bonawitz et al. 2017) of an inner weighted-sum aggregator.

    Every selected client k (uploaders and the ``dropped``) encodes x_k = (w_k/W) u_k in
    fixed point (``scale``) modulo 2^``bits`` and adds its pairwise masks, expanded from
    per-pair seeds drawn from the round's ``masks`` stream (lower id adds, higher subtracts).
    The server only sees masked vectors; their sum unmasks itself when everyone uploads. When
    some upload is missing, the server rebuilds the dropped clients' pair masks and removes
    them if the ``recovery`` policy (:mod:`~fedgame.mechanisms.aggregation.recovery`) allows:
    ``always``, ``none`` (the round fails, ``None``) or ``p2p`` (paper 004's SecAgg model: at
    least ``threshold`` uploads, and as many uploaders with every client-client link up; by
    default K − S̄ of the K selected, S̄ the run's straggler bound, :func:`straggler_bound`);
    without ``recovery`` it is ``always`` or ``none`` by ``recover_dropouts``. The result equals the
    inner aggregate up to fixed-point resolution 1/scale per term. The inner aggregator must
    be a weighted sum (``fedavg``, ``mean``); a ``median`` is refused at validation.
    """

    round_columns = ("secure_dropped", "secure_recovered", "secure_error", "secure_status")
    #: declared capability (``DrawsMasks``): the round's ``masks`` stream seeds the pair masks
    draws_masks = True

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        inner: dict[str, Any] = Field(
            default_factory=lambda: {"kind": "fedavg"},
            description="the weighted-sum aggregator whose sum is computed securely ({kind: ...})",
        )
        bits: int = Field(48, ge=16, le=62, description="fixed-point modulus 2^bits")
        scale: PositiveFloat = Field(
            2.0**20, description="fixed-point scale (values x scale are rounded)"
        )
        recover_dropouts: bool = Field(
            True,
            description=(
                "remove the masks of dropped clients (SecAgg recovery); else such a round fails"
            ),
        )

        recovery: Recovery | None = Field(
            None,
            description=(
                "recovery policy: always, none or p2p (threshold uploads with every "
                "client-client link up); default: always if recover_dropouts, else none"
            ),
        )
        threshold: PositiveInt | None = Field(
            None,
            description=(
                "p2p recovery: uploads needed to unmask (default: K - S_bar of the K selected, "
                "S_bar the straggler bound of the privacy mechanism or else of the fault "
                "model, as note 004 sizes SMPC+DP; K, every selected, when nothing bounds the "
                "stragglers)"
            ),
        )

        @field_validator("inner", mode="before")
        @classmethod
        def _shorthand(cls, value: Any) -> Any:
            return {"kind": value} if isinstance(value, str) else value

    def __init__(self, config: Config) -> None:
        self.config = config
        params = dict(config.inner)
        kind = params.pop("kind", "fedavg")
        self.inner = registry.create("aggregation", kind, params)
        self._warned = False  # the overflow warning is said once a run
        rec = config.recovery
        self.recovery: Recovery = rec or ("always" if config.recover_dropouts else "none")
        #: S̄ of the run (set-up state, :meth:`prepare`): None when nothing bounds it
        self.max_stragglers: int | None = None

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        """The run's straggler bound S̄, for ``p2p``'s default threshold K − S̄."""
        del rng
        self.max_stragglers = straggler_bound(ctx.privacy, ctx.faults)

    def threshold(self, selected: int) -> int | None:
        """Uploads ``p2p`` needs of ``selected`` clients: ``threshold``, else K − S̄, else
        None (every selected client)."""
        if self.config.threshold is not None or self.max_stragglers is None:
            return self.config.threshold
        return p2p_threshold(selected, self.max_stragglers)

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        registry.validate("aggregation", config.inner, key=f"{key}.inner")
        kind = config.inner["kind"]  # validate() above ensures a str kind
        cls = registry.entry("aggregation", kind, key=f"{key}.inner.kind").cls
        inner = registry.create(
            "aggregation", kind, registry.validate("aggregation", config.inner, key=f"{key}.inner")
        )
        if not isinstance(inner, WeightedSumAggregator) or cls is SecureAggregation:
            raise ScenarioError(
                f"{key}.inner.kind",
                kind,
                "secure aggregation needs a sum-decomposable (weighted-sum) inner aggregator, "
                "e.g. fedavg or mean",
            )

    def weights(self, clients: Sequence[ClientView]) -> np.ndarray:
        """The inner aggregator's weights (central noise uses them for its sensitivity)."""
        return self.inner.weights(clients)

    def aggregate(
        self,
        updates: torch.Tensor,
        *,
        clients: Sequence[ClientView],
        dropped: Sequence[ClientView] = (),
        rng: np.random.Generator | None = None,
        faults: FaultDraw | None = None,
    ) -> tuple[torch.Tensor | None, dict[str, float]]:
        """The masked sum's decoded aggregate (None: it could not be unmasked), with the
        round's ``secure_*`` metrics. ``faults`` (``DrawsMasks``): the round's client-client
        links down, which ``p2p`` recovery needs up."""
        import torch

        from fedgame.privacy.secure import decode_fixed, encode_fixed, masked_uploads, unmask_sum

        if rng is None:
            raise FedGameError("secure aggregation needs the round's masks rng")
        bits, scale = self.config.bits, self.config.scale
        ids = [c.client_id for c in clients] + [c.client_id for c in dropped]
        order = np.argsort(ids, kind="stable")
        n, k = len(ids), len(clients)
        w = np.concatenate(
            [self.inner.weights(clients), self.inner.weights(dropped) if dropped else []]
        ).astype(float)
        total_w = w.sum()
        rows = torch.zeros(n, updates.shape[1], dtype=torch.float64, device=updates.device)
        rows[:k] = (
            updates.double() * torch.as_tensor(w[:k] / total_w, device=updates.device)[:, None]
        )
        self._check_range(rows[:k])
        # positions sorted by client id: pair signs follow ids (lower id adds)
        encoded = encode_fixed(rows[order], scale=scale, bits=bits)
        uploaded = (np.arange(n) < k)[order]
        seeds = rng.integers(0, 2**63 - 1, size=n * (n - 1) // 2, dtype=np.int64)
        uploads = masked_uploads(encoded, seeds, bits=bits)
        status = recovery_status(
            self.recovery,
            ids=[ids[i] for i in order],
            uploaded=uploaded,
            failed_edges=frozenset(faults.failed_edges) if faults is not None else frozenset(),
            threshold=self.threshold(n),
        )
        total = unmask_sum(uploads, uploaded, seeds, bits=bits, recover=status == 0)
        metrics = {"secure_dropped": float(n - k), "secure_recovered": 0.0}
        metrics["secure_status"] = float(status)
        if status != 0 or total is None:
            metrics["secure_error"] = math.nan
            return None, metrics
        metrics["secure_recovered"] = float(n > k)
        result = decode_fixed(total, scale=scale, bits=bits) * (total_w / w[:k].sum())
        result = result.to(updates.dtype)
        plain = self.inner.aggregate(updates, clients=clients)
        metrics["secure_error"] = float((result - plain).abs().max()) if k else 0.0
        return result, metrics

    def _check_range(self, rows: torch.Tensor) -> None:
        limit = 2.0 ** (self.config.bits - 1) / self.config.scale
        if not self._warned and rows.numel() and float(rows.abs().sum(0).max()) >= limit:
            self._warned = True
            warnings.warn(
                f"secure aggregation overflows its fixed-point range (|sum| >= {limit:.3g}); "
                "raise bits or lower scale",
                stacklevel=3,
            )
