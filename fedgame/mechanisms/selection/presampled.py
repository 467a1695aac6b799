"""Pre-sampled selection (paper 001, Alg. 1 lines 4-5): ``privacy_aware`` and ``unbiased``.

Before round 1 the server draws every round's multiset S_t of ``k`` clients i.i.d. with
replacement from a probability vector p, and counts each client's realised selections T_k.
The privacy mechanism sizes client k's noise from that T_k before training (Eq. 6: sigma_k^2
= V_k T_k T^l C^2), read through the hook ``planned_participations(client_id)``; the share of
the budget is always 1 (``budget_fraction``). A client drawn m times in one round acts as m
virtual clients (``duplicates: virtual``, the paper; each copy trains and is noised and
charged separately) or once (``dedupe``). Drawn clients that are not candidates this round
(declined or unreachable) are skipped and counted in ``presampled_missing``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.game import privacy_aware as pa
from fedgame.privacy.local_common import training_from
from fedgame.registry import Example, register
from fedgame.views import ClientValues, ClientView, RoundInfo, Selection, SetupContext


class PresampledSelection:
    """Base: subclasses define ``probabilities(clients) -> p``."""

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        k: PositiveInt = Field(10, description="draws per round (with replacement)")
        duplicates: Literal["virtual", "dedupe"] = Field(
            "virtual",
            description="virtual (a client drawn m times trains as m clients, the paper) or dedupe",
        )

    round_columns: tuple[str, ...] = ("presampled_missing",)
    client_columns = ("selection_prob", "planned_participations")

    def __init__(self, config: Any) -> None:
        self.config = config
        self.k = config.k
        self.p = np.zeros(0)
        self.counts = np.zeros(0, dtype=int)
        #: set-up diagnostics reported every round beside ``presampled_missing``
        self._diag: dict[str, float] = {}

    @staticmethod
    def check_scenario(config: Any, scenario: Any, *, key: str) -> None:
        n = scenario.population.clients
        if config.k > n:
            raise ScenarioError(f"{key}.k", config.k, f"must be <= population.clients ({n})")

    def expected_fraction(self, num_clients: int) -> float:
        return min(self.k / num_clients, 1.0)

    def probabilities(self, clients: Sequence[ClientView]) -> np.ndarray:
        raise NotImplementedError

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        self.p = self.probabilities(ctx.clients)
        self.draws = rng.choice(ctx.num_clients, size=(ctx.rounds, self.k), p=self.p)
        self.counts = np.bincount(self.draws.ravel(), minlength=ctx.num_clients)
        if self.config.duplicates == "dedupe":
            self.counts = np.array(
                [sum(i in set(row) for row in self.draws) for i in range(ctx.num_clients)]
            )

    def select(
        self, candidates: Sequence[ClientView], *, info: RoundInfo, rng: np.random.Generator
    ) -> tuple[Selection, dict[str, float]]:
        if info.round > len(self.draws):
            return Selection(()), {"presampled_missing": 0.0, **self._diag}
        row = [int(i) for i in self.draws[info.round - 1]]
        if self.config.duplicates == "dedupe":
            row = sorted(set(row))
        avail = {c.client_id for c in candidates}
        ids = sorted(i for i in row if i in avail)
        chosen = Selection(
            tuple(ids), {c.client_id: float(self.p[c.client_id]) for c in candidates}
        )
        return chosen, {"presampled_missing": float(len(row) - len(ids)), **self._diag}

    def planned_participations(self, client_id: int) -> int:
        """Realised selection count T_k over all rounds (paper 001 Alg. 1 line 5)."""
        return int(self.counts[client_id])

    def budget_fraction(self, client_id: int) -> float:
        return 1.0

    def client_metrics(self) -> dict[str, ClientValues]:
        """Every client's column (written without making the client active this round)."""
        ids = np.arange(len(self.p))
        return {
            "selection_prob": ClientValues(ids, self.p),
            "planned_participations": ClientValues(ids, self.counts),
        }


@register("selection", "unbiased", reads=reads.BUDGET)
class UnbiasedSelection(PresampledSelection):
    """Pre-sampled i.i.d. selection with p_k = |M_k| / sum |M_i| (paper 001 baseline)."""

    example = Example({"k": 6})  # draws with replacement: virtual duplicates

    def probabilities(self, clients: Sequence[ClientView]) -> np.ndarray:
        return pa.unbiased_probabilities([max(c.dataset_size, 1) for c in clients])


@register("selection", "privacy_aware", reads=reads.BUDGET)
class PrivacyAwareSelection(PresampledSelection):
    """Pre-sampled i.i.d. selection with paper 001's privacy-aware probabilities (Problem 1).

    ``eta_d`` is the single knob eta*D (note 001 §8.2); the batch B_k sets the sampling
    ratio r_k = min(1, B_k/|M_k|) in V_k (Eq. 7). B_k is the learner's batch: unset, it is
    read from ``training.batch_size`` (``local_sgd``; r_k = 1 under ``fedsgd``, one step on
    the whole local set); set, it must equal that batch, so that the selection's V_k and the
    noise the clients' DP-SGD adds describe the same sampling (checked at validation).
    """

    example = Example({"k": 6})  # draws with replacement: virtual duplicates

    class Config(PresampledSelection.Config):
        eta_d: PositiveFloat = Field(
            1e4, description="the single knob eta x D of paper 001's Problem 1"
        )
        batch_size: PositiveInt | None = Field(
            None,
            description=(
                "batch B_k in r_k = min(1, B_k/|M_k|) of Eq. 7; unset: training.batch_size "
                "(r_k = 1 under fedsgd); if set, it must equal training.batch_size"
            ),
        )

    round_columns = ("presampled_missing", "pa_selection_gap", "pa_objective")

    def __init__(self, config: Any) -> None:
        super().__init__(config)
        #: B_k of Eq. 7 (None: r_k = 1, the fedsgd full-batch step); resolved in ``prepare``
        self.batch: int | None = config.batch_size

    @staticmethod
    def check_scenario(config: Any, scenario: Any, *, key: str) -> None:
        PresampledSelection.check_scenario(config, scenario, key=key)
        training = scenario.training
        if config.batch_size is None:
            return
        if training.mode == "fedsgd":
            raise ScenarioError(
                f"{key}.batch_size",
                config.batch_size,
                "must be left unset under training.mode fedsgd (each step uses the whole local "
                "set: r_k = 1)",
            )
        if config.batch_size != training.batch_size:
            raise ScenarioError(
                f"{key}.batch_size",
                config.batch_size,
                f"must equal training.batch_size ({training.batch_size}), the batch the clients "
                "sample, or be left unset (it then follows training.batch_size)",
            )

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        if self.config.batch_size is None:
            training = training_from(ctx)
            self.batch = None if training.mode == "fedsgd" else training.batch_size
        super().prepare(ctx, rng=rng)

    def probabilities(self, clients: Sequence[ClientView]) -> np.ndarray:
        sizes = np.array([max(c.dataset_size, 1) for c in clients], dtype=float)
        rates = np.ones_like(sizes) if self.batch is None else np.minimum(1.0, self.batch / sizes)
        v = pa.noise_factors(
            epsilons=[c.epsilon_total for c in clients],
            deltas=[c.delta for c in clients],
            sample_rates=rates,
            sizes=sizes,
        )
        p = pa.selection_probabilities(sizes=sizes, v=v, eta_d=self.config.eta_d)
        pu = pa.unbiased_probabilities(sizes)
        self._diag = {
            "pa_selection_gap": float(np.abs(p - pu).sum()),
            "pa_objective": pa.problem1_objective(p, pu=pu, c=self.config.eta_d * v),
        }
        return p
