"""Baselines of paper 004: vanilla local DP, SMPC + DP, and an ideal secure aggregation.

``ldp``: each client adds N(0, σ_L² I), σ_L = cΔ/ε (note 004 §5.1), at its own per-round ε: a
preset of the local Gaussian core (:mod:`fedgame.privacy.gaussian_core`).

``smpc_dp``: uploads are hidden by secure aggregation, so each client adds only variance
σ_L²/(K − C_bar − S_bar) (K selected clients): with at most C_bar colluders and S_bar
stragglers the honest noise in the sum is still ≥ σ_L² (note 004 §5.2). It is local noise
wrapped around ``aggregation: {kind: secure, inner: mean, recovery: p2p}``: the secure sum
(real pairwise masks) and its recovery policy (:mod:`fedgame.mechanisms.aggregation.recovery`)
are the aggregator's, which reports ``secure_status``.

Deprecated for one release: with ``aggregation: mean`` the masks are ideal (they cancel
exactly) and only their failure is simulated here, in ``finalise``, by the same recovery
model, with the mechanism's own ``recovery``/``threshold`` keys: with
``recovery="p2p"`` (the paper's model for SecAgg / SwiftAgg+, Fig. 4) the server recovers the
sum only if at least ``threshold`` (default K − S_bar) selected clients both uploaded and kept
every client-client link to the other selected clients up this round; ``"none"`` fails on any
straggler (no unmasking phase); ``"always"`` never fails. A failed round returns ``None``
(the model keeps the global model and flags ``aggregation_failed``); round column
``smpc_status`` says 0 ok, 1 masks unrecoverable, 2 timed out (fewer than ``threshold``
uploads arrived before the deadline), -1 not decided here (no upload arrived, or, under
``aggregation: secure``, the aggregator decided: its ``secure_status``); always an integer.

``ideal_smpc``: ``smpc_dp`` whose secure aggregation never fails, for reference
(``aggregation: {kind: secure, inner: mean, recovery: always}``).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, PositiveInt

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.mechanisms.aggregation.recovery import (
    NOT_REPORTED,
    p2p_threshold,
    recovery_status,
)
from fedgame.mechanisms.aggregation.secure import SecureAggregation
from fedgame.mechanisms.base import BoundsStragglers
from fedgame.privacy.base import PrivacyPlan, gaussian_noise
from fedgame.privacy.distributed import (
    BoundsConfig,
    PerRoundGaussian,
    check_bounds,
    check_equal_weights,
    nbafl_sensitivity,
)
from fedgame.privacy.gaussian_core import GaussianCore, check_release
from fedgame.privacy.noise_report import ReportsNoise
from fedgame.privacy.settings import PrivacySettings
from fedgame.registry import Example, register
from fedgame.views import ClientView, Response, RoundInfo, SetupContext

if TYPE_CHECKING:
    import torch


class LdpSettings(PrivacySettings):
    """``ldp``'s reading of ``level``: paper 004's, as ``lightdp`` and ``smpc_dp`` read it."""

    level: Literal["update", "sample"] = Field(
        "update",
        description=(
            "update (client-level, sensitivity clip) or sample (NbAFL-style record level, "
            "2 clip / |D_min|); formerly sensitivity"
        ),
    )


@register("privacy", "ldp", reads=reads.DISTRIBUTED)
class LocalDP(ReportsNoise, GaussianCore):
    """Vanilla local Gaussian DP at each client's per-round (ε, δ) (paper 004 baseline).

    A preset of the local Gaussian core (:mod:`fedgame.privacy.gaussian_core`): σ_L = z·Δ
    with z from ``calibration`` (default ``analytic``) at the client's per-round (ε, δ)
    (its response's ε when it names one), Δ = factor·C for ``level: update``, or paper 004's
    NbAFL record level 2C/|D_min| over the round's selected clients for ``level: sample``
    (the whole update clipped, as ``lightdp`` reads it, so the schemes share one Δ). Adds
    paper 004's noise columns (:mod:`fedgame.privacy.noise_report`). A response that chooses
    a zCDP budget ρ is released at z = 1/sqrt(2ρ), σ = zΔ instead
    (:mod:`fedgame.privacy.levels`).
    """

    example = Example({"participations": 1}, needs={"aggregation": {"kind": "mean"}})
    Config = LdpSettings
    kind = "ldp"
    nbafl_sample = True

    @staticmethod
    def check_scenario(config: PrivacySettings, scenario: Any, *, key: str) -> None:
        check_release(config, scenario, key=key, per_sample=False)

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        super().prepare(ctx, rng=rng)
        self.prepare_report(ctx)

    def sensitivities(self, clients: Sequence[ClientView], *, round_index: int) -> np.ndarray:
        """One Δ for the round's clients: factor·C, or 2C/|D_min| (``level: sample``)."""
        base = self.config.clip * self.factor
        return np.full(len(clients), nbafl_sensitivity(self.config, clients, base=base))

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        noise = gaussian_noise(updates.shape, plan.noise_std, like=updates, generator=generator)
        clipped, metrics = self.clip_updates(updates, self.config.clip)
        return clipped + noise, metrics

    def residual_and_effective(
        self, plan: PrivacyPlan, late: np.ndarray, colluders: np.ndarray
    ) -> tuple[float, Any]:
        var = plan.noise_std**2
        up = int((~late).sum())
        residual = float(var[~late].sum() / up**2) if up else math.nan
        return residual, np.where(colluders, 0.0, var)


@register("privacy", "smpc_dp", reads=reads.DISTRIBUTED)
class SmpcDP(PerRoundGaussian):
    """Secure aggregation + DP noise scaled by 1/(K − C_bar − S_bar) (paper 004 baseline)."""

    round_columns = ("colluders", "residual_noise_var", "update_norm", "smpc_status")
    example = Example(
        {"max_colluders": 1, "max_stragglers": 1},
        needs={"aggregation": {"kind": "secure", "inner": "mean", "recovery": "p2p"}},
    )

    class Config(BoundsConfig):
        recovery: Literal["p2p", "none", "always"] = Field(
            "p2p",
            description=(
                "deprecated, with aggregation: mean only (ideal masks): how masks are "
                "recovered: p2p (SecAgg-style threshold), none, always; write "
                "aggregation.recovery instead"
            ),
        )
        threshold: PositiveInt | None = Field(
            None,
            description=(
                "deprecated, with aggregation: mean only: uploads needed to recover the sum "
                "(default: K - S_bar); write aggregation.threshold instead"
            ),
        )

    config: Config

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.wrapped = False

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        PerRoundGaussian.check_scenario(config, scenario, key=key)
        check_bounds(config, scenario, key=key, need_s_bar=True)
        kind = scenario.privacy.kind
        if scenario.aggregation.kind != "secure":
            check_equal_weights(scenario, why="the secure sum is calibrated for the plain average")
            rec = config.recovery
            warnings.warn(
                f"privacy {kind} with aggregation: mean (ideal masks) is deprecated: write "
                f"aggregation: {{kind: secure, inner: mean, recovery: {rec}}} (real masks, "
                "same recovery model); the old spelling will be refused in the next release",
                FutureWarning,
                stacklevel=2,
            )
            return
        inner = scenario.config("aggregation").inner.get("kind")
        if inner != "mean":
            raise ScenarioError(
                "aggregation.inner.kind",
                inner,
                f"must be 'mean' with privacy {kind}: the secure sum is calibrated for the "
                "plain average",
            )
        own = config.model_fields_set & {"recovery", "threshold"}
        if own:
            name = sorted(own)[0]
            raise ScenarioError(
                f"{key}.{name}",
                getattr(config, name),
                f"with aggregation: secure the recovery policy is aggregation.{name}'s; "
                f"remove {key}.{name}",
            )

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        super().prepare(ctx, rng=rng)
        self.wrapped = isinstance(ctx.aggregation, SecureAggregation)

    @property
    def max_stragglers(self) -> int:
        """S̄ the noise is sized for (``BoundsStragglers``: a secure sum around this mechanism
        unmasks with up to S̄ uploads missing by default)."""
        return self.s_bar()

    def s_bar(self) -> int:
        s = self.config.max_stragglers
        if s is None and isinstance(self.faults, BoundsStragglers):
            s = self.faults.max_stragglers
        return int(s or 0)

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        eps, delta = self.round_budget(clients, responses)
        eps_d, delta_d = float(eps.min()), float(delta.min())
        k = len(clients)
        sens = self.round_sensitivity(clients)
        honest = k - self.config.max_colluders - self.s_bar()
        sigma_l = float(self.multipliers(np.array([eps_d]), np.array([delta_d]))[0]) * sens
        sigma = np.full(k, sigma_l / math.sqrt(honest) if honest >= 1 else sigma_l)
        eps_k, delta_k = np.full(k, eps_d), np.full(k, delta_d)
        return self.make_plan(
            clients,
            multipliers=self.multipliers(eps_k, delta_k),
            delta=delta_k,
            sigma=sigma,
            info=info,
        )

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        noise = gaussian_noise(updates.shape, plan.noise_std, like=updates, generator=generator)
        clipped, metrics = self.clip_updates(updates, self.config.clip)
        return clipped + noise, metrics

    def recovery_status(self, plan: PrivacyPlan) -> int:
        """0 ok, 1 masks unrecoverable, 2 timed out (see the module docstring); 0 before the
        round's faults are known."""
        late = plan.stragglers()
        if plan.faults is None or late is None:
            return 0
        k = len(plan.client_ids)
        return recovery_status(
            self.config.recovery,
            ids=plan.client_ids,
            uploaded=~late,
            failed_edges=set(plan.faults.failed_edges),
            threshold=self.config.threshold or p2p_threshold(k, self.s_bar()),
        )

    def finalise(
        self,
        delta: torch.Tensor,
        plan: PrivacyPlan,
        *,
        num_received: int,
        generator: torch.Generator,
    ) -> torch.Tensor | None:
        if self.wrapped:  # the secure aggregator unmasked (or failed) the sum itself
            return delta
        return delta if self.recovery_status(plan) == 0 else None

    def release_metrics(
        self, plan: PrivacyPlan
    ) -> tuple[dict[str, float], dict[str, dict[int, float]]]:
        rounds, clients = super().release_metrics(plan)
        if rounds:
            late = plan.stragglers()
            unknown = self.wrapped or late is None or late.all()
            rounds["smpc_status"] = float(NOT_REPORTED if unknown else self.recovery_status(plan))
        return rounds, clients

    def residual_and_effective(
        self, plan: PrivacyPlan, late: np.ndarray, colluders: np.ndarray
    ) -> tuple[float, Any]:
        up = int((~late).sum())
        var = float(plan.noise_std[0]) ** 2
        residual = var / up if up else math.nan
        honest_up = int((~late & ~colluders).sum())
        return residual, np.where(colluders, 0.0, honest_up * var)


@register("privacy", "ideal_smpc", reads=reads.DISTRIBUTED)
class IdealSmpc(SmpcDP):
    """``smpc_dp`` with an ideal secure aggregation that never fails (reference)."""

    example = Example(
        {"max_colluders": 1, "max_stragglers": 1},
        needs={"aggregation": {"kind": "secure", "inner": "mean", "recovery": "always"}},
    )

    class Config(SmpcDP.Config):
        recovery: Literal["always"] = Field(
            "always",
            description="how masks are recovered: p2p (SecAgg-style threshold), none, always",
        )

    @staticmethod
    def check_scenario(config: SmpcDP.Config, scenario: Any, *, key: str) -> None:
        SmpcDP.check_scenario(config, scenario, key=key)
        if scenario.aggregation.kind == "secure":
            agg = scenario.config("aggregation")
            rec = agg.recovery or ("always" if agg.recover_dropouts else "none")
            if rec != "always":
                raise ScenarioError(
                    "aggregation.recovery",
                    rec,
                    "must be 'always' with privacy ideal_smpc (a secure sum that never fails); "
                    "privacy smpc_dp takes the others",
                )
