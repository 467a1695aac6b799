"""Quality-aware selection by label-distribution distance (QI-DPFL §III-A, Eq. 11).

θ_h = Σ_j |P_h(y=j) - P_a(y=j)| (the L1 distance the paper calls EMD; note 003 §1.5) between a
client's label frequencies and a reference P_a: the pooled label frequencies of all clients
(``reference: population``, default) or uniform. Clients with θ_h < θ_th are selected (strict,
as Algorithm 1). θ_th is either absolute (``threshold``) or a share of clients (``quantile`` q:
the ⌈q·H⌉ clients with the lowest θ, ties broken by id; θ_th is then reported as the largest
selected θ nudged up). ``mode: static`` decides once before training, as the paper does
(the eligible set is fixed in ``prepare``); ``per_round`` re-applies the rule to each round's
candidates (the quantile then counts this round's candidates).

A threshold that selects no client is a ScenarioError naming the threshold and the observed
θ range; it can only be detected once the data are partitioned, so ``prepare`` raises it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from fedgame.data.quality import emd, label_frequencies, population_frequencies
from fedgame.errors import ScenarioError
from fedgame.registry import Example, register
from fedgame.views import ClientValues, ClientView, RoundInfo, Selection, SetupContext


def quantile_selection(theta: np.ndarray, *, share: float) -> np.ndarray:
    """Mask of the ⌈share·H⌉ lowest θ (stable: ties by index), at least one client."""
    k = max(1, math.ceil(share * theta.size - 1e-9))
    order = np.argsort(theta, kind="stable")
    mask = np.zeros(theta.size, dtype=bool)
    mask[order[:k]] = True
    return mask


@register("selection", "emd_threshold")
class EmdThreshold:
    """Select clients whose label-distribution distance θ_h is below θ_th (QI-DPFL Eq. 11)."""

    example = Example({"quantile": 0.75})

    round_columns = ("emd_threshold", "emd_eligible")
    client_columns = ("emd_theta",)

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        threshold: float | None = Field(
            None, gt=0, description="absolute EMD threshold theta_th (give this or quantile)"
        )
        quantile: float | None = Field(
            None,
            gt=0,
            le=1,
            description="share of clients with the lowest EMD kept (give this or threshold)",
        )
        reference: Literal["population", "uniform"] = Field(
            "population", description="distribution EMD is measured against: population or uniform"
        )
        mode: Literal["static", "per_round"] = Field(
            "static",
            description="static (decided once) or per_round (among the round's candidates)",
        )

        @model_validator(mode="after")
        def _one_rule(self) -> Any:
            if (self.threshold is None) == (self.quantile is None):
                raise ScenarioError(
                    "threshold",
                    self.threshold,
                    f"give exactly one of threshold (absolute θ_th) or quantile "
                    f"(share of clients); got quantile={self.quantile}",
                )
            return self

    def __init__(self, config: Config) -> None:
        self.config = config
        self.theta: dict[int, float] = {}
        self.eligible: frozenset[int] | None = None
        #: the static rule's θ threshold (set up in ``prepare``)
        self.threshold = math.nan

    def expected_fraction(self, num_clients: int) -> float:
        """Planned share per round: the quantile, or 1 for an absolute threshold (unknown yet)."""
        return float(self.config.quantile) if self.config.quantile is not None else 1.0

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        counts = np.array([c.label_counts for c in ctx.clients], dtype=float)
        freq = label_frequencies(counts)
        if self.config.reference == "population":
            ref = population_frequencies(counts)
        else:
            ref = np.full(counts.shape[1], 1.0 / counts.shape[1])
        theta = np.asarray(emd(freq, ref), dtype=float)
        self.theta = {c.client_id: float(t) for c, t in zip(ctx.clients, theta)}
        mask, self.threshold = self._rule(theta)
        if not mask.any():
            raise ScenarioError(
                "selection.threshold",
                self.config.threshold,
                f"selects no client: the EMD θ observed lies in [{theta.min():.4g}, "
                f"{theta.max():.4g}] (reference {self.config.reference}); give a threshold "
                f"above {theta.min():.4g} or use quantile",
            )
        ids = [c.client_id for c in ctx.clients]
        self.eligible = frozenset(i for i, m in zip(ids, mask) if m)

    def _rule(self, theta: np.ndarray) -> tuple[np.ndarray, float]:
        """Who passes among ``theta``, and the threshold they are below (a quantile's: just
        above the largest θ chosen; NaN when there is no θ to choose from)."""
        if self.config.threshold is not None:
            threshold = float(self.config.threshold)
            return theta < threshold, threshold
        if not theta.size:
            return np.zeros(0, dtype=bool), math.nan
        share = self.config.quantile
        assert share is not None  # Config._one_rule: exactly one of threshold/quantile is set
        mask = quantile_selection(theta, share=float(share))
        return mask, float(np.nextafter(theta[mask].max(), np.inf))

    def eligible_ids(self) -> frozenset[int] | None:
        """The statically selected clients (None before ``prepare`` or in ``per_round`` mode)."""
        return self.eligible if self.config.mode == "static" else None

    def select(
        self, candidates: Sequence[ClientView], *, info: RoundInfo, rng: np.random.Generator
    ) -> tuple[Selection, dict[str, float]]:
        """The eligible candidates, with the round's ``emd_threshold`` and ``emd_eligible``
        (the static set's size, or the clients under this round's threshold)."""
        if self.eligible is None:
            raise ScenarioError("selection", "emd_threshold", "needs prepare() before select()")
        if self.config.mode == "static":
            ids = tuple(sorted(c.client_id for c in candidates if c.client_id in self.eligible))
            threshold, count = self.threshold, len(self.eligible)
        else:
            theta = np.array([self.theta[c.client_id] for c in candidates], dtype=float)
            mask, threshold = self._rule(theta)
            ids = tuple(sorted(c.client_id for c, m in zip(candidates, mask) if m))
            count = len(ids)
        metrics = {"emd_threshold": threshold, "emd_eligible": float(count)}
        return Selection(ids, dict.fromkeys(ids, 1.0)), metrics

    def client_metrics(self) -> dict[str, ClientValues]:
        """Every client's column (written without making the client active this round)."""
        ids = np.fromiter(self.theta.keys(), np.int64, len(self.theta))
        return {"emd_theta": ClientValues(ids, np.fromiter(self.theta.values(), float, len(ids)))}
