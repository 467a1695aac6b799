"""Local Gaussian mechanism with heterogeneous budgets and three calibrations."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.accountants.base import check_reachable
from fedgame.privacy.base import (
    Charge,
    Charges,
    PerClientCharges,
    PrivacyPlan,
    clip_rows,
    gaussian_noise,
)
from fedgame.privacy.calibrate import analytic_gaussian_sigma, dpfl_bcs_gaussian_sigma
from fedgame.privacy.gaussian import check_classic
from fedgame.privacy.levels import chosen_rho, following_rho
from fedgame.privacy.local_common import (
    ParticipationPlan,
    Participations,
    ReleaseSensitivity,
    ReleaseTally,
    adjacency_factor,
    check_sample_level,
    effective_epsilon,
    participations_field,
    training_from,
)
from fedgame.registry import Example, register
from fedgame.scenario.planning import planned_participations
from fedgame.views import ClientValues, ClientView, Response, RoundInfo, SetupContext

if TYPE_CHECKING:
    import torch


def _accountant_name(config: LocalGaussian.Config) -> str:
    """The configured accountant, else ``basic`` for per-release calibrations, else ``rdp``."""
    if config.accountant is not None:
        return config.accountant
    return "basic" if config.calibration in ("classic", "analytic") else "rdp"


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


@register("privacy", "gaussian_local", reads=reads.CHARGES)
class LocalGaussian(ReleaseSensitivity, PerClientCharges):
    """Clip each update (or per-sample gradient, FedSGD) to L2 norm C, add N(0, σ_k² I) locally.

    Every client k has its own budget (ε_k, δ_k), spent over its T_k planned participations
    (``participations``: ``auto`` (default) reads the selection's per-client plan T_k and
    budget share s_k when it has one (``local_common.ParticipationPlan``), else the
    scenario-wide count (``scenario``: rounds × the selection's expected fraction); an integer
    fixes T for all). With s_k < 1 (DPFL-BCS stage 2) (ε_k, δ_k) below read (s_k ε_k, s_k δ_k).
    The noise multiplier z_k = σ_k/Δ_k comes from ``calibration``:

    * ``analytic``: per participation at (ε_k/T_k, δ_k/T_k), the exact one-release σ of the
      analytic Gaussian mechanism (Balle & Wang 2018); default accountant ``basic``.
    * ``classic``: per participation at (ε_k/T_k, δ_k/T_k), z = sqrt(2 ln(1.25/δ_r))/ε_r
      (Dwork & Roth Thm A.1; a policy's response ε overrides ε_r); default accountant ``basic``.
      A theorem only for ε_r < 1: refused when per-round ε reaches 1 unless
      ``allow_loose_classic: true``.
    * ``dpfl_bcs``: paper 000 Lemma 1, z = c2 sqrt(T_k ln(1/δ_k))/ε_k (``bcs_split: analysis``)
      or Alg. 2's linear split (``per_round``). Not a proven guarantee: the accountant decides.
    * ``accountant`` (default): z solved (the accountant's ``calibrate``) so that T_k releases
      meet (ε_k, δ_k) under the client's own accountant; cached per distinct (ε, δ, T, s).

    ``level: sample`` needs FedSGD: the learner clips each per-sample gradient to C and the
    update -η·mean has sensitivity ``factor·η_t·C/D_k`` (``adjacency: replace`` gives the
    paper's 2ηB/D_n); in DPFL-BCS stage-1 rounds the selection's ``loss_bound`` Θ enlarges it
    to factor·η_t·(C + Θ)/D_k (paper 000 Eq. 13). Each release is described by z and its δ
    share δ_r; the accountant prices it (``basic`` charges the exact ε of that noise at δ_r).
    ``epsilon_closed_form`` (clients table) is the paper's figure for what was released: basic
    composition for ``classic``/``per_round``, paper 000 Thm 2 with ``c2`` otherwise. A
    response that chooses a zCDP budget ρ is released at z = 1/sqrt(2ρ) instead
    (:mod:`fedgame.privacy.levels`).
    """

    placement = "local"
    noise = "gaussian"
    follows = frozenset({"epsilon", "rho"})
    client_columns = ("epsilon_closed_form",)
    example = Example({"calibration": "dpfl_bcs", "c2": 0.3})

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        clip: PositiveFloat = Field(
            1.0,
            description=(
                "clipping norm C of each update (level update) or per-sample gradient (level "
                "sample)"
            ),
        )
        calibration: Literal["analytic", "classic", "dpfl_bcs", "accountant"] = Field(
            "accountant",
            description=(
                "how the noise multiplier is chosen: accountant, analytic, classic or dpfl_bcs "
                "(paper 000 Lemma 1)"
            ),
        )
        allow_loose_classic: bool = Field(
            False,
            description=(
                "allow the classic bound where a per-round epsilon reaches 1 (not a proven "
                "guarantee)"
            ),
        )
        level: Literal["update", "sample"] = Field(
            "update",
            description=(
                "update (clip and noise the whole update) or sample (FedSGD, per-sample clipping)"
            ),
        )
        adjacency: Literal["add_remove", "replace"] = Field(
            "add_remove",
            description="neighbouring datasets: add_remove (factor 1) or replace (factor 2)",
        )
        participations: Participations = participations_field()
        accountant: str | None = Field(
            None,
            description="accountant plug-in (default: basic for classic/analytic, rdp otherwise)",
        )
        c2: PositiveFloat = Field(
            1.0,
            description=(
                "the constant c2 of paper 000's analysis calibration (never given by the paper)"
            ),
        )
        bcs_split: Literal["analysis", "per_round"] = Field(
            "analysis",
            description=(
                "dpfl_bcs calibration: analysis (Thm 2) or per_round (Alg. 2's linear split)"
            ),
        )

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = make_accountant(_accountant_name(config))
        self.factor = adjacency_factor(config.adjacency)
        self.participation = ParticipationPlan(config.participations)
        self.planned = self.participation.scenario
        self.training: Any = None
        self.tally = ReleaseTally()
        self.deltas: dict[int, float] = {}
        self._z_cache: dict[tuple[float, float, int, float], float] = {}

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_describes(_accountant_name(config), "gaussian", key=f"{key}.accountant")
        participations = config.participations
        check_classic(
            config.calibration,
            config.allow_loose_classic,
            scenario,
            participations=participations if isinstance(participations, int) else None,
            key=key,
        )
        if config.level == "sample":
            check_sample_level(scenario, key=key, norm="l2")
        if config.calibration == "accountant":
            t = participations if isinstance(participations, int) else None
            check_reachable(
                _accountant_name(config),
                scenario,
                releases=t or planned_participations(scenario),
                template=Charge("gaussian"),
                key=key,
            )

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        del rng
        self.training = training_from(ctx) if self.config.level == "sample" else None
        self.tally.reset([c.client_id for c in ctx.clients])
        self.deltas = {c.client_id: c.delta for c in ctx.clients}
        self.participation.bind(ctx.selection)

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        self.planned = self.participation.set_scenario(participations)
        return epsilon_total / self.planned, delta_total / self.planned

    def noise_multiplier(self, client: ClientView, *, epsilon_round: float | None = None) -> float:
        """z_k of ``client`` under the configured calibration, at its own T_k and share."""
        cal = self.config.calibration
        if cal in ("classic", "analytic"):
            eps_r, delta_r = self.participation.round_budget(client)
            eps = eps_r if epsilon_round is None else epsilon_round
            if cal == "analytic":
                return analytic_gaussian_sigma(epsilon=eps, delta=delta_r)
            if eps >= 1.0 and not self.config.allow_loose_classic:
                raise ScenarioError(
                    "privacy.calibration",
                    cal,
                    f"a release asked for per-round epsilon {eps:.3g} >= 1, where the classic "
                    "bound does not hold; use calibration: analytic or allow_loose_classic: true",
                )
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
            self._z_cache[key] = self.accountant.calibrate(
                epsilon=eps, delta=delta, releases=t, template=Charge("gaussian", delta=delta / t)
            )
        return self._z_cache[key]

    def _charge(self, client: ClientView, z: float) -> Charge:
        delta_r = self.participation.round_budget(client)[1]
        return Charge("gaussian", noise_multiplier=z, delta=delta_r)

    def next_charge(self, client: ClientView) -> Charge:
        z = self.noise_multiplier(client)
        self.participation.priced(client.client_id, z)
        return self._charge(client, z)

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        defaults = [self.participation.round_budget(c)[0] for c in clients]
        eps_r = effective_epsilon(responses, defaults, echoed=[c.epsilon_round for c in clients])

        def planned(rows: np.ndarray) -> np.ndarray:
            pick = np.flatnonzero(rows).tolist()
            return np.array(
                [
                    self.participation.floored(
                        clients[i].client_id,
                        self.noise_multiplier(clients[i], epsilon_round=eps_r[i]),
                    )
                    for i in pick
                ]
            )

        z = following_rho(chosen_rho(responses), planned)
        charges = Charges.of([self._charge(c, zk) for c, zk in zip(clients, z)])
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

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        out = updates if plan.clip is None else clip_rows(updates, plan.clip)
        return out + gaussian_noise(
            updates.shape, plan.noise_std, like=updates, generator=generator
        )

    def record_releases(self, client_ids: np.ndarray, charges: Charges) -> None:
        """The budget reports each charged (sent) update: feeds the closed-form column.

        The classic per-release ε at the release's δ share is what the papers' basic
        composition adds up (paper 000 Alg. 2); the moments form adds 1/z².
        """
        for cid, charge in zip(client_ids.tolist(), charges):
            eps = classic_epsilon(noise_multiplier=charge.noise_multiplier, delta=charge.delta)
            self.tally.add(cid, eps=eps, noise_multiplier=charge.noise_multiplier)

    def closed_form_epsilon(self, client_id: int) -> float:
        """The paper's own ε for what ``client_id`` released so far."""
        basic = self.config.calibration in ("classic", "analytic") or (
            self.config.calibration == "dpfl_bcs" and self.config.bcs_split == "per_round"
        )
        if basic:
            return self.tally.eps.get(client_id, 0.0)
        return moments_closed_form_epsilon(
            sum_inv_z2=self.tally.inv_z2.get(client_id, 0.0),
            delta=self.deltas[client_id],
            c2=self.config.c2,
        )

    def client_metrics(self) -> dict[str, ClientValues]:
        """Every client's column (written without making the client active this round)."""
        ids = np.fromiter(self.tally.eps.keys(), np.int64, len(self.tally.eps))
        values = np.fromiter(map(self.closed_form_epsilon, ids.tolist()), float, len(ids))
        return {"epsilon_closed_form": ClientValues(ids, values)}
