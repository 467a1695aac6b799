"""Central Gaussian mechanism: clip every update, the server noises the aggregate (DP-FedAvg)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, PositiveFloat, PositiveInt

import fedgame.registry as registry
from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.mechanisms.base import FaultDraw, WeightedSumAggregator  # noqa: F401 (pdoc)
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.accountants.base import check_reachable
from fedgame.privacy.base import Charge, Charges, PrivacyPlan, clip_rows
from fedgame.privacy.settings import ReleaseSettings, fixed_participations
from fedgame.registry import Example, register
from fedgame.scenario.planning import planned_participations
from fedgame.views import ClientView, Response, RoundInfo, SetupContext, column_of, ids_of

if TYPE_CHECKING:
    import torch


def max_weight_share(weights: np.ndarray, *, num_received: int) -> float:
    """Largest share ``w_k / sum_{j in R} w_j`` any client can have when |R| = ``num_received``.

    The aggregate is ``sum_k w_k u_k / sum_{j in R} w_j`` over the received set R, a subset of
    the planned clients; one client's clipped update moves it by at most C times its share.
    The worst case pairs the heaviest client with the ``num_received - 1`` lightest others
    (McMahan et al. 2018, DP-FedAvg: a plain mean gives ``1/num_received``).
    """
    w = np.sort(np.asarray(weights, dtype=float))
    if num_received <= 1 or w.size <= 1:
        return 1.0
    heaviest, rest = w[-1], w[:-1]
    return float(heaviest / (heaviest + rest[: num_received - 1].sum()))


@dataclass(frozen=True)
class CentralPlan(PrivacyPlan):
    """A central round's plan: the aggregation weights of the planned clients."""

    weights: np.ndarray = field(default_factory=lambda: np.ones(0))


@register("privacy", "central_gaussian", reads=reads.CHARGES)
class CentralGaussian:
    """DP-FedAvg (user-level, McMahan et al. 2018): clip updates to C, noise the aggregate.

    Each client clips its update to L2 norm C (``privatise`` only clips); after aggregation
    the server adds N(0, (z·C·s)² I) with s the largest weight share a single client can have
    among the ``num_received`` updates (1/num_received for a plain mean; for FedAvg weights the
    bound uses the heaviest client, see :func:`max_weight_share`). Assumes the aggregate is a
    weighted mean of the received rows (the aggregator must be a weighted sum; a median is
    refused at validation) and a trusted server. Every released update is charged a Gaussian
    of multiplier z under the client's accountant (rdp default); no subsampling credit is
    taken. ``noise_multiplier`` fixes z; if unset, z is solved so that the strictest client's
    (ε, δ) holds over T planned participations (then every client can afford T).
    """

    placement = "central"
    noise = "gaussian"
    #: the server's noise on the aggregate: a level chosen per client is not followed
    follows: frozenset[str] = frozenset()
    example = Example({"noise_multiplier": 0.3})
    round_columns = ("central_noise_std",)
    client_columns: tuple[str, ...] = ()

    class Config(ReleaseSettings):
        """The shared release knobs (:mod:`fedgame.privacy.settings`) of a user-level update
        clipped before aggregation, and the fixed multiplier."""

        clip: PositiveFloat = Field(
            1.0, description="L2 norm C each update is clipped to before aggregation"
        )
        adjacency: Literal["add_remove"] = Field(
            "add_remove", description="add_remove: one client's update added or removed"
        )
        level: Literal["update"] = Field("update", description="update: user-level DP")
        noise_multiplier: PositiveFloat | None = Field(
            None,
            description=(
                "fixed noise multiplier z (default: solved so the strictest client's budget lasts"
                " T releases)"
            ),
        )
        participations: Literal["scenario"] | PositiveInt = Field(
            "scenario",
            description=(
                "planned releases T: scenario (rounds x expected selected fraction) or a fixed "
                "integer"
            ),
        )
        accountant: str = Field(
            "rdp",
            description="accountant plug-in that prices every release (fedgame list accountant)",
        )

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = make_accountant(config.accountant)
        #: z of every release: fixed, or solved once in ``prepare`` (set-up state)
        self.z = config.noise_multiplier or math.nan
        self.weights_of: Any = None

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_describes(config.accountant, "gaussian", key=f"{key}.accountant")
        kind = scenario.component("aggregation").kind
        aggregator = registry.create("aggregation", kind, scenario.config("aggregation"))
        if not isinstance(aggregator, WeightedSumAggregator):
            raise ScenarioError(
                "aggregation.kind",
                kind,
                "central_gaussian needs a weighted-sum aggregator (e.g. fedavg, mean, secure)",
            )
        if config.noise_multiplier is None:
            check_reachable(
                config.accountant,
                scenario,
                releases=fixed_participations(config.participations)
                or planned_participations(scenario),
                template=Charge("gaussian"),
                key=key,
            )

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        t = fixed_participations(self.config.participations) or participations
        return epsilon_total / t, delta_total / t

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        del rng
        aggregator = ctx.aggregation
        self.weights_of = (
            aggregator.weights if isinstance(aggregator, WeightedSumAggregator) else None
        )
        if self.config.noise_multiplier is None and ctx.clients:
            fixed = fixed_participations(self.config.participations)
            planned = fixed or ctx.planned_participations
            self.z = self.strictest_z(ctx.clients, releases=planned)

    def strictest_z(self, clients: Sequence[ClientView], *, releases: int) -> float:
        """The multiplier meeting every client's (ε, δ) over ``releases`` (z falls in ε: per
        δ, the smallest ε decides; the largest of those z wins)."""
        strictest: dict[float, float] = {}
        for c in clients:
            strictest[c.delta] = min(c.epsilon_total, strictest.get(c.delta, math.inf))
        return max(self.solve_z(e, d, releases=releases) for d, e in strictest.items())

    def solve_z(self, epsilon: float, delta: float, *, releases: int) -> float:
        """Multiplier meeting (ε, δ) over ``releases`` planned participations."""
        template = Charge("gaussian", delta=delta / releases)
        return self.accountant.calibrate(
            epsilon=epsilon, delta=delta, releases=releases, template=template
        )

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        return Charges("gaussian", noise_multiplier=self.z, delta=column_of(clients, "delta_round"))

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        w = self.weights_of(clients) if self.weights_of is not None else np.ones(len(clients))
        return CentralPlan(
            tuple(ids_of(clients).tolist()),
            self.next_charges(clients),
            np.zeros(len(clients)),
            clip=self.config.clip,
            weights=np.asarray(w, dtype=float),
        )

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        del generator
        return clip_rows(updates, self.config.clip)

    def finalise(
        self,
        delta: torch.Tensor,
        plan: PrivacyPlan,
        *,
        num_received: int,
        generator: torch.Generator,
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """Add N(0, (z C s)^2 I) to the aggregate, s = :func:`max_weight_share`; the metric
        ``central_noise_std`` is that std."""
        import torch

        assert isinstance(plan, CentralPlan)
        share = max_weight_share(plan.weights, num_received=num_received)
        std = self.z * self.config.clip * share
        noise = torch.randn(
            delta.shape, generator=generator, device=delta.device, dtype=delta.dtype
        )
        return delta + std * noise, {"central_noise_std": std}

    def release_metrics(self, plan: PrivacyPlan) -> tuple[dict[str, float], dict[str, Any]]:
        """None from the plan: ``central_noise_std`` comes with ``finalise``'s result (NaN
        in a round whose aggregate was not noised)."""
        del plan
        return {}, {}
