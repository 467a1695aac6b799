"""Shared base of the per-round Gaussian mechanisms of paper 004 (LightDP-FL and baselines).

Each round a client that uploads releases its update under noise designed to be worth, against
the server and up to C_bar colluders, at least the local-DP Gaussian σ_L = c·Δ/ε of its
per-round (ε, δ) (paper 004, Prop. 1 and Example 1). The release is described to the accountant
as that Gaussian (z = σ_L/Δ, δ share δ): with the default ``basic`` accountant T uploads cost
T·ε and T·δ (basic composition, Dwork & Roth Thm 3.16). The per-round budget is the client's
total split over its planned participations, as for ``gaussian``; paper 004 states ε per
round, so a scenario reproducing it sets the total to ε·T (and δ·T). ``calibration``:
``analytic`` (default, exact for every ε: Balle & Wang 2018), or the paper's constants
``lightdp`` (sqrt(2 ln(2/δ))) and ``classic`` (sqrt(2 ln(1.25/δ))), tail bounds proven only for
ε < 1 and refused where per-round ε reaches 1 unless ``allow_loose_classic: true``.
Updates (model deltas) are clipped to L2 norm ``clip``. ``level="update"``: Δ = clip
(add/remove one client's update) or 2·clip (replace), client-level DP. ``"sample"``: the
NbAFL-style record-level Δ = 2·clip/|D_min| (Wei et al. 2020, used by paper 004's lineage;
|D_min| the smallest local dataset among the round's selected clients): a heuristic that
treats the clipped local model like a regularised ERM solution, not a proof for local SGD.
One calibration constant for every scheme compared (``calibration``, note 004 §5).

Tables: paper 004's noise columns (:mod:`fedgame.privacy.noise_report`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, NonNegativeInt, PositiveInt

import fedgame.registry as registry
from fedgame.errors import ScenarioError
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.base import Charges, PrivacyPlan
from fedgame.privacy.calibrations import (
    Release,
    check_calibration,
    make_calibration,
    per_release_target,
)
from fedgame.privacy.gaussian_core import check_classic
from fedgame.privacy.noise_report import ReportsNoise
from fedgame.privacy.settings import PrivacySettings, fixed_participations
from fedgame.views import ClientView, Response, RoundInfo, SetupContext


class PerRoundConfig(PrivacySettings):
    """The shared privacy knobs, as lightdp, ldp, smpc_dp and ideal_smpc read them."""

    participations: Literal["scenario"] | PositiveInt = Field(
        "scenario",
        description=(
            "planned releases T per-round budgets are split over: scenario (rounds x expected "
            "selected fraction) or a fixed integer"
        ),
    )
    accountant: str = Field(
        "basic",
        description="accountant plug-in that prices every release (fedgame list accountant)",
    )
    level: Literal["update", "sample"] = Field(
        "update",
        description=(
            "update (client-level, sensitivity clip) or sample (NbAFL-style record level, "
            "2 clip / |D_min|); formerly sensitivity"
        ),
    )


class BoundsConfig(PerRoundConfig):
    """Adds the coalition and straggler bounds C_bar, S_bar of paper 004."""

    max_colluders: NonNegativeInt = Field(
        0, description="C_bar: at most this many colluding clients"
    )
    max_stragglers: NonNegativeInt | None = Field(
        None,
        description=(
            "S_bar: at most this many stragglers a round (default: the fault model's bound)"
        ),
    )


def scenario_s_bar(config: BoundsConfig, scenario: Any) -> int | None:
    """S_bar: the mechanism's own, else the fault model's ``max_stragglers``, else None."""
    if config.max_stragglers is not None:
        return config.max_stragglers
    faults = scenario.config("network.faults")
    return faults.max_stragglers if "max_stragglers" in type(faults).model_fields else None


def check_bounds(config: BoundsConfig, scenario: Any, *, key: str, need_s_bar: bool) -> None:
    """C_bar < N, and C_bar + S_bar < N (the issue's rule: some honest client must upload)."""
    n = scenario.population.clients
    if config.max_colluders >= n:
        raise ScenarioError(
            f"{key}.max_colluders", config.max_colluders, f"must be < population.clients ({n})"
        )
    s_bar = scenario_s_bar(config, scenario)
    if s_bar is None:
        if need_s_bar:
            raise ScenarioError(
                f"{key}.max_stragglers",
                None,
                "set S_bar: the fault model "
                f"'{scenario.network.faults.kind}' does not bound the straggler count",
            )
        return
    if config.max_colluders + s_bar >= n:
        raise ScenarioError(
            f"{key}.max_colluders",
            config.max_colluders,
            f"C_bar + S_bar must be < population.clients ({n}); S_bar = {s_bar}: in the worst "
            "case no honest client uploads",
        )


def check_equal_weights(scenario: Any, *, why: str) -> None:
    """Pairwise noise / secure sums assume the equal-weight mean of paper 004 (Sec. IV-C)."""
    kind = scenario.aggregation.kind
    if kind != "mean":
        raise ScenarioError("aggregation", kind, f"must be 'mean' with this privacy: {why}")


class PerRoundGaussian(ReportsNoise):
    """Common plumbing: budget split, charges, and paper 004's noise columns."""

    placement = "distributed"
    noise = "gaussian"
    #: one noise design for every selected client: a level chosen per client is not followed
    follows: frozenset[str] = frozenset()

    def __init__(self, config: PerRoundConfig) -> None:
        self.config = config
        self.accountant = make_accountant(config.accountant)
        self.sensitivity = config.clip * (2.0 if config.adjacency == "replace" else 1.0)
        self.calibration = make_calibration(config.calibration, config)
        self.graph: Any = None
        self.faults: Any = None

    @staticmethod
    def check_scenario(config: Any, scenario: Any, *, key: str) -> None:
        """Cross-section checks; ``config`` is the plug-in's own ``Config`` (a PerRoundConfig)."""
        check_describes(config.accountant, "gaussian", key=f"{key}.accountant")
        kind = scenario.privacy.kind
        cls: Any = registry.entry("privacy", kind).cls
        placement = cls.placement
        release = Release("gaussian", placement, config.level)
        check_calibration(config.calibration, release, kind=kind, key=key)
        check_classic(
            config.calibration,
            config.allow_loose_classic,
            scenario,
            participations=fixed_participations(config.participations),
            key=key,
        )

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        self.graph = ctx.graph
        self.faults = ctx.faults
        self.prepare_report(ctx)

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        t = fixed_participations(self.config.participations) or participations
        return epsilon_total / t, delta_total / t

    def multipliers(self, eps: np.ndarray, delta: np.ndarray) -> np.ndarray:
        """z = σ_L/Δ = c(ε, δ)/ε of the local-DP Gaussian each release is worth."""
        target = per_release_target(eps, delta)
        return self.calibration.multipliers(target, accountant=self.accountant)

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        eps = np.array([c.epsilon_round for c in clients], dtype=float)
        delta = np.array([c.delta_round for c in clients], dtype=float)
        return Charges("gaussian", noise_multiplier=self.multipliers(eps, delta), delta=delta)

    def round_sensitivity(self, clients: Sequence[ClientView]) -> float:
        """Δ for this round's selected clients (see the module docstring)."""
        return nbafl_sensitivity(self.config, clients, base=self.sensitivity)

    @staticmethod
    def round_budget(
        clients: Sequence[ClientView], responses: Sequence[Response]
    ) -> tuple[np.ndarray, np.ndarray]:
        """Each selected client's per-round (ε, δ): its response's ε, else its default."""
        eps = [
            r.epsilon if r is not None and math.isfinite(r.epsilon) else c.epsilon_round
            for c, r in zip(clients, responses)
        ]
        return np.array(eps, dtype=float), np.array([c.delta_round for c in clients])

    def make_plan(
        self,
        clients: Sequence[ClientView],
        *,
        multipliers: np.ndarray,
        delta: np.ndarray,
        sigma: np.ndarray,
        info: RoundInfo,
        kind: type[PrivacyPlan] = PrivacyPlan,
        **design: Any,
    ) -> PrivacyPlan:
        """The round's plan (a ``kind``, with its ``design`` fields), one charge per client (a
        Gaussian release of noise multiplier ``multipliers`` at δ share ``delta``)."""
        ids = tuple(c.client_id for c in clients)
        charges = Charges("gaussian", noise_multiplier=multipliers, delta=delta)
        return kind(ids, charges, np.asarray(sigma, float), self.config.clip, **design)


def nbafl_sensitivity(config: Any, clients: Sequence[ClientView], *, base: float) -> float:
    """Δ of a round: ``base`` (level update), or NbAFL's record-level 2C/|D_min| over the
    round's selected clients (level sample; Wei et al. 2020, paper 004's lineage)."""
    if config.level == "update":
        return base
    return 2.0 * config.clip / max(min(c.dataset_size for c in clients), 1)
