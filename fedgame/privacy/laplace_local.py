"""Local Laplace mechanism: L1 clipping and per-coordinate Laplace noise (papers 000, 002)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, PositiveFloat

from fedgame import reads
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.base import Charge, Charges, PerClientCharges, PrivacyPlan, clip_rows
from fedgame.privacy.calibrate import laplace_scale
from fedgame.privacy.levels import chosen_rho, rho_laplace_epsilon
from fedgame.privacy.local_common import (
    ParticipationPlan,
    Participations,
    ReleaseSensitivity,
    adjacency_factor,
    check_sample_level,
    effective_epsilon,
    participations_field,
    training_from,
)
from fedgame.privacy.settings import ReleaseSettings
from fedgame.registry import Example, register
from fedgame.views import ClientView, Response, RoundInfo, SetupContext

if TYPE_CHECKING:
    import torch


def laplace_noise(
    shape: torch.Size, scale: np.ndarray, *, like: torch.Tensor, generator: torch.Generator
) -> torch.Tensor:
    """Rows of i.i.d. Laplace(0, b_k) noise, one batched draw from ``generator``.

    A Laplace(0, b) variable is ``b (E1 - E2)`` with E1, E2 i.i.d. Exp(1), and ``-log(1 - U)``
    is Exp(1) for U uniform on [0, 1) (finite because ``1 - U > 0``).
    """
    import torch

    b = torch.as_tensor(scale, dtype=like.dtype, device=like.device)
    u = torch.rand((2, *shape), generator=generator, device=like.device, dtype=like.dtype)
    e = -torch.log1p(-u)
    return (e[0] - e[1]) * b[:, None]


@register("privacy", "laplace_local", reads=reads.CHARGES)
class LocalLaplace(ReleaseSensitivity, PerClientCharges):
    """Clip each update (or per-sample gradient, FedSGD) to L1 norm C, add Laplace noise.

    Pure ε-DP per release with per-coordinate scale b_k = Δ1_k / ε_r,k (paper 000 Lemma 2 /
    Thm 4, paper 002 Thm 1): client k spends ε_r = s_k ε_k / T_k per participation (basic
    composition over its T_k planned participations), so b_k = T_k Δ1_k / (s_k ε_k).
    ``participations``: ``auto`` (default) takes T_k and the budget share s_k from the
    selection's per-client plan when it has one (paper 000 T_n, paper 002 reply counts n_i),
    else the scenario-wide count (``scenario``); an integer fixes T for all (s_k = 1).
    Δ1 = C (add/remove-one) or 2C (``adjacency: replace``, the papers' default here) for an
    update clipped to L1 norm C; at ``level: sample`` (FedSGD, per-sample L1 clipping,
    ``training.clip_norm: l1``) Δ1 = factor·η_t·C/D_k, the papers' 2ηξ1/D_n; DPFL-BCS stage-1
    rounds use factor·η_t·(C + Θ)/D_k with the selection's ``loss_bound`` Θ (Eq. 13). Each
    release is described by z = b/Δ1 = 1/ε_r (a ``dp_accounting`` LaplaceDpEvent); ``basic``
    (default, the papers' composition) adds ε_r up; ``rdp``, ``pld`` and ``zcdp`` also describe it.
    A response that chooses a zCDP budget ρ is released at ε_r = sqrt(2ρ), which is ρ-zCDP
    (:mod:`fedgame.privacy.levels`).
    """

    placement = "local"
    noise = "laplace"
    follows = frozenset({"epsilon", "rho"})
    example = Example({"participations": 1})

    class Config(ReleaseSettings):
        """The shared release knobs (:mod:`fedgame.privacy.settings`), L1 and the papers'
        defaults: replace-one adjacency, per-client plans."""

        clip: PositiveFloat = Field(
            1.0,
            description=(
                "L1 clipping norm C of each update (level update) or per-sample gradient (level "
                "sample)"
            ),
        )
        adjacency: Literal["add_remove", "replace"] = Field(
            "replace",
            description=(
                "neighbouring datasets: add_remove (factor 1) or replace (factor 2, the papers')"
            ),
        )
        participations: Participations = participations_field()
        accountant: str = Field(
            "basic",
            description="accountant plug-in that prices every release (fedgame list accountant)",
        )

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = make_accountant(config.accountant)
        self.factor = adjacency_factor(config.adjacency)
        self.training: Any = None
        self.participation = ParticipationPlan(config.participations)

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_describes(config.accountant, "laplace", key=f"{key}.accountant")
        if config.level == "sample":
            check_sample_level(scenario, key=key, norm="l1")

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        del rng
        self.training = training_from(ctx) if self.config.level == "sample" else None
        self.participation.bind(ctx.selection)

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        t = self.participation.set_scenario(participations)
        return epsilon_total / t, np.zeros_like(delta_total)

    def next_charge(self, client: ClientView) -> Charge:
        eps = self.participation.round_budget(client)[0]
        self.participation.priced(client.client_id, 1.0 / eps)
        return self._charge(eps)

    @staticmethod
    def _charge(epsilon: float) -> Charge:
        # scale b = Δ1/ε, so b/Δ1 = 1/ε is the Laplace "noise multiplier"
        return Charge("laplace", noise_multiplier=1.0 / epsilon)

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        defaults = [self.participation.round_budget(c)[0] for c in clients]
        eps = effective_epsilon(responses, defaults, echoed=[c.epsilon_round for c in clients])
        eps = np.array(
            [1.0 / self.participation.floored(c.client_id, 1.0 / e) for c, e in zip(clients, eps)]
        )
        rho = chosen_rho(responses)
        eps = np.where(np.isfinite(rho), rho_laplace_epsilon(rho), eps)
        sens = self.sensitivities(clients, round_index=info.round - 1)
        scale = np.array([laplace_scale(sensitivity=s, epsilon=e) for s, e in zip(sens, eps)])
        sample = self.config.level == "sample"
        return PrivacyPlan(
            tuple(c.client_id for c in clients),
            Charges("laplace", noise_multiplier=1.0 / eps),
            scale,
            clip=None if sample else self.config.clip,
            per_sample_clip=self.config.clip if sample else None,
        )

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        out = updates if plan.clip is None else clip_rows(updates, plan.clip, norm="l1")
        return out + laplace_noise(updates.shape, plan.noise_std, like=updates, generator=generator)
