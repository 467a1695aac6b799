"""Local Gaussian mechanism with heterogeneous budgets and three calibrations."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, PositiveFloat

from fedgame.privacy.accounting import check_supported
from fedgame.privacy.base import Charge, PrivacyPlan, clip_rows, gaussian_noise
from fedgame.privacy.calibrate import accountant_sigma, dpfl_bcs_gaussian_sigma
from fedgame.privacy.local_common import (
    ParticipationPlan,
    Participations,
    ReleaseSensitivity,
    ReleaseTally,
    adjacency_factor,
    check_sample_level,
    effective_epsilon,
    training_from,
)
from fedgame.registry import register
from fedgame.views import ClientView, Response, RoundInfo, SetupContext


def classic_epsilon(*, noise_multiplier: float, delta: float) -> float:
    """ε of one classic Gaussian release: ``sqrt(2 ln(1.25/delta)) / z``.

    Dwork & Roth (2014), Thm A.1 solved for ε (valid as a guarantee for ε < 1).
    """
    return math.sqrt(2.0 * math.log(1.25 / delta)) / noise_multiplier


def moments_closed_form_epsilon(*, sum_inv_z2: float, delta: float, c2: float = 1.0) -> float:
    """Paper 000 Thm 2 (after Abadi et al.) solved for ε: ``c2 sqrt(ln(1/delta) sum_t 1/z_t^2)``.

    With a constant multiplier ``z`` over ``T`` releases this is ``c2 sqrt(T ln(1/delta))/z``,
    the inverse of ``sigma = c2 Delta sqrt(T ln(1/delta)) / epsilon`` (note 000 §1.4).
    """
    return c2 * math.sqrt(math.log(1.0 / delta) * sum_inv_z2)


@register("privacy", "gaussian_local")
class LocalGaussian(ReleaseSensitivity):
    """Clip each update (or per-sample gradient, FedSGD) to L2 norm C, add N(0, σ_k² I) locally.

    Every client k has its own budget (ε_k, δ_k), spent over its T_k planned participations
    (``participations``: ``auto`` (default) reads the selection's per-client plan T_k and
    budget share s_k when it has one (``local_common.ParticipationPlan``), else the
    scenario-wide count (``scenario``: rounds × the selection's expected fraction); an integer
    fixes T for all). With s_k < 1 (DPFL-BCS stage 2) (ε_k, δ_k) below read (s_k ε_k, s_k δ_k).
    The noise multiplier z_k = σ_k/Δ_k comes from ``calibration``:

    * ``classic``: per participation at (ε_k/T_k, δ_k/T_k), z = sqrt(2 ln(1.25/δ_r))/ε_r
      (Dwork & Roth Thm A.1; a policy's response ε overrides ε_r); default accountant ``basic``.
    * ``dpfl_bcs``: paper 000 Lemma 1, z = c2 sqrt(T_k ln(1/δ_k))/ε_k (``bcs_split: analysis``)
      or Alg. 2's linear split (``per_round``). Not a proven guarantee: the accountant decides.
    * ``accountant`` (default): z solved (``calibrate.accountant_sigma``) so that T_k releases
      meet (ε_k, δ_k) under the client's own accountant; cached per distinct (ε, δ, T, s).

    ``level: sample`` needs FedSGD: the learner clips each per-sample gradient to C and the
    update -η·mean has sensitivity ``factor·η_t·C/D_k`` (``adjacency: replace`` gives the
    paper's 2ηB/D_n); in DPFL-BCS stage-1 rounds the selection's ``loss_bound`` Θ enlarges it
    to factor·η_t·(C + Θ)/D_k (paper 000 Eq. 13). Each charge carries z (RDP/PLD/zCDP) and
    the classic ε at δ_r (basic).
    ``epsilon_closed_form`` (clients table) is the paper's figure for what was released: basic
    composition for ``classic``/``per_round``, paper 000 Thm 2 with ``c2`` otherwise.
    """

    placement = "local"
    noise = "gaussian"
    client_columns = ("epsilon_closed_form",)

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        clip: PositiveFloat = 1.0
        calibration: Literal["classic", "dpfl_bcs", "accountant"] = "accountant"
        level: Literal["update", "sample"] = "update"
        adjacency: Literal["add_remove", "replace"] = "add_remove"
        participations: Participations = "auto"
        accountant: str | None = None
        c2: PositiveFloat = 1.0
        bcs_split: Literal["analysis", "per_round"] = "analysis"

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = config.accountant or (
            "basic" if config.calibration == "classic" else "rdp"
        )
        self.factor = adjacency_factor(config.adjacency)
        self.participation = ParticipationPlan(config.participations)
        self.planned = self.participation.scenario
        self.training: Any = None
        self.tally = ReleaseTally()
        self.deltas: dict[int, float] = {}
        self._z_cache: dict[tuple[float, float, int, float], float] = {}
        self._warned = False

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        acct = config.accountant or ("basic" if config.calibration == "classic" else "rdp")
        check_supported(acct, "gaussian", key=f"{key}.accountant")
        if config.level == "sample":
            check_sample_level(scenario, key=key, norm="l2")

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        del rng
        self.training = training_from(ctx) if self.config.level == "sample" else None
        self.tally.reset([c.client_id for c in ctx.clients])
        self.deltas = {c.client_id: c.delta for c in ctx.clients}
        self.participation.bind(ctx.components.get("selection"))

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        self.planned = self.participation.set_scenario(participations)
        return epsilon_total / self.planned, delta_total / self.planned

    def noise_multiplier(self, client: ClientView, *, epsilon_round: float | None = None) -> float:
        """z_k of ``client`` under the configured calibration, at its own T_k and share."""
        cal = self.config.calibration
        if cal == "classic":
            eps_r, delta_r = self.participation.round_budget(client)
            eps = eps_r if epsilon_round is None else epsilon_round
            return classic_epsilon(noise_multiplier=1.0, delta=delta_r) / eps
        eps, delta, t, share = self.participation.budget(client)
        if cal == "dpfl_bcs":
            return dpfl_bcs_gaussian_sigma(
                sensitivity=1.0,
                epsilon=eps,
                delta=delta,
                participations=t,
                c2=self.config.c2,
                calibration=self.config.bcs_split,
            )
        key = (client.epsilon_total, client.delta, t, share)
        if key not in self._z_cache:
            self._z_cache[key] = accountant_sigma(
                epsilon=eps, delta=delta, steps=t, accountant=self.accountant
            )
        return self._z_cache[key]

    def _charge(self, client: ClientView, z: float) -> Charge:
        delta_r = self.participation.round_budget(client)[1]
        eps = classic_epsilon(noise_multiplier=z, delta=delta_r)
        return Charge("gaussian", epsilon=eps, delta=delta_r, noise_multiplier=z)

    def next_charge(self, client: ClientView) -> Charge:
        z = self.noise_multiplier(client)
        self.participation.priced(client.client_id, z)
        return self._charge(client, z)

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        defaults = [self.participation.round_budget(c)[0] for c in clients]
        eps_r = effective_epsilon(responses, defaults, echoed=[c.epsilon_round for c in clients])
        z = np.array(
            [
                self.participation.floored(c.client_id, self.noise_multiplier(c, epsilon_round=e))
                for c, e in zip(clients, eps_r)
            ]
        )
        charges = tuple(self._charge(c, zk) for c, zk in zip(clients, z))
        self._warn_classic(charges)
        for c in clients:
            self.deltas[c.client_id] = c.delta
        sigma = z * self.sensitivities(clients, round_index=info.round - 1)
        sample = self.config.level == "sample"
        return PrivacyPlan(
            tuple(c.client_id for c in clients),
            charges,
            sigma,
            clip=None if sample else self.config.clip,
            per_sample_clip=self.config.clip if sample else None,
        )

    def _warn_classic(self, charges: Sequence[Charge]) -> None:
        eps_max = max((c.epsilon for c in charges), default=0.0)
        if self.config.calibration == "classic" and not self._warned and eps_max >= 1.0:
            self._warned = True
            warnings.warn(
                f"classic Gaussian calibration with per-round epsilon up to {eps_max:.3g} "
                "(the bound assumes epsilon < 1)",
                stacklevel=3,
            )

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        out = updates if plan.clip is None else clip_rows(updates, plan.clip)
        return out + gaussian_noise(
            updates.shape, plan.noise_std, like=updates, generator=generator
        )

    def record_release(self, client_id: int, charge: Charge) -> None:
        """The model reports each released (uploaded) update: feeds the closed-form column."""
        self.tally.add(client_id, eps=charge.epsilon, noise_multiplier=charge.noise_multiplier)

    def closed_form_epsilon(self, client_id: int) -> float:
        """The paper's own ε for what ``client_id`` released so far."""
        basic = self.config.calibration == "classic" or (
            self.config.calibration == "dpfl_bcs" and self.config.bcs_split == "per_round"
        )
        if basic:
            return self.tally.eps.get(client_id, 0.0)
        return moments_closed_form_epsilon(
            sum_inv_z2=self.tally.inv_z2.get(client_id, 0.0),
            delta=self.deltas[client_id],
            c2=self.config.c2,
        )

    def client_metrics(self) -> dict[str, dict[int, float]]:
        return {
            "epsilon_closed_form": {cid: self.closed_form_epsilon(cid) for cid in self.tally.eps}
        }
