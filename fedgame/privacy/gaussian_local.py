"""``gaussian_local``: the local Gaussian core with per-client plans (a preset), and the
closed-form ε column of papers 000/001."""

from __future__ import annotations

import math

import numpy as np
from pydantic import Field

from fedgame import reads
from fedgame.privacy.base import Charges
from fedgame.privacy.calibrate import gaussian_tail_constant
from fedgame.privacy.calibrations import CalibrationName
from fedgame.privacy.gaussian_core import GaussianCore
from fedgame.privacy.local_common import ReleaseTally
from fedgame.privacy.settings import Participations, PrivacySettings
from fedgame.registry import Example, register
from fedgame.views import ClientValues, SetupContext


def classic_epsilon(*, noise_multiplier: float, delta: float) -> float:
    """ε of one classic Gaussian release: ``sqrt(2 ln(1.25/delta)) / z``.

    Dwork & Roth (2014), Thm A.1 solved for ε (valid as a guarantee for ε < 1).
    """
    return float(gaussian_tail_constant(delta) / noise_multiplier)


def moments_closed_form_epsilon(*, sum_inv_z2: float, delta: float, c2: float = 1.0) -> float:
    """Paper 000 Thm 2 (after Abadi et al.) solved for ε: ``c2 sqrt(ln(1/delta) sum_t 1/z_t^2)``.

    With a constant multiplier ``z`` over ``T`` releases this is ``c2 sqrt(T ln(1/delta))/z``,
    the inverse of ``sigma = c2 Delta sqrt(T ln(1/delta)) / epsilon`` (note 000 §1.4).
    """
    return c2 * math.sqrt(math.log(1.0 / delta) * sum_inv_z2)


class LocalSettings(PrivacySettings):
    """``gaussian_local``'s defaults: per-client plans, the accountant's own curve."""

    participations: Participations = Field(
        "auto",
        description=(
            "planned releases T per client: auto (the selection's per-client plan, else "
            "scenario), scenario (rounds x expected selected fraction) or a fixed integer"
        ),
    )
    calibration: CalibrationName = Field(
        "accountant",
        description=(
            "how the noise multiplier is chosen (fedgame list calibration): accountant, "
            "analytic, classic, lightdp or dpfl_bcs (paper 000 Lemma 1)"
        ),
    )
    accountant: str | None = Field(
        None,
        description=(
            "accountant plug-in (default: basic for per-release calibrations, rdp otherwise)"
        ),
    )


@register("privacy", "gaussian_local", reads=reads.CHARGES)
class LocalGaussian(GaussianCore):
    """Clip each update (or per-sample gradient, FedSGD) to L2 norm C, add N(0, σ_k² I) locally.

    The local Gaussian core (:mod:`fedgame.privacy.gaussian_core`) with per-client plans and
    the ``accountant`` calibration by default, plus the paper's closed-form ε column.
    Every client k has its own budget (ε_k, δ_k), spent over its T_k planned participations
    (``participations``: ``auto`` (default) reads the selection's per-client plan T_k and
    budget share s_k when it has one (``local_common.ParticipationPlan``), else the
    scenario-wide count (``scenario``: rounds × the selection's expected fraction); an integer
    fixes T for all). With s_k < 1 (DPFL-BCS stage 2) (ε_k, δ_k) below read (s_k ε_k, s_k δ_k).
    The noise multiplier z_k = σ_k/Δ_k comes from ``calibration`` (any registered calibration
    describing a local Gaussian release; ``fedgame list calibration``), among them:

    * ``analytic``: per participation at (ε_k/T_k, δ_k/T_k), the exact one-release σ of the
      analytic Gaussian mechanism (Balle & Wang 2018); default accountant ``basic``.
    * ``classic``: per participation at (ε_k/T_k, δ_k/T_k), z = sqrt(2 ln(1.25/δ_r))/ε_r
      (Dwork & Roth Thm A.1; a policy's response ε overrides ε_r); default accountant ``basic``.
      A theorem only for ε_r < 1: refused when per-round ε reaches 1 unless
      ``allow_loose_classic: true``.
    * ``dpfl_bcs``: paper 000 Lemma 1, z = c2 sqrt(T_k ln(1/δ_k))/ε_k (``bcs_split: analysis``)
      or Alg. 2's linear split (``per_round``). Not a proven guarantee: the accountant decides.
    * ``accountant`` (default): z solved (the accountant's ``calibrate``) so that T_k releases
      meet (ε_k, δ_k) under the client's own accountant; cached per distinct (ε, δ, T).

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

    client_columns = ("epsilon_closed_form",)
    example = Example({"calibration": "dpfl_bcs", "c2": 0.3})
    Config = LocalSettings
    kind = "gaussian_local"

    def __init__(self, config: LocalSettings) -> None:
        super().__init__(config)
        self.tally = ReleaseTally()
        self.deltas: dict[int, float] = {}

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        super().prepare(ctx, rng=rng)
        self.tally.reset([c.client_id for c in ctx.clients])
        self.deltas = {c.client_id: c.delta for c in ctx.clients}

    def plan(self, clients, responses, *, info):  # type: ignore[no-untyped-def]
        for c in clients:
            self.deltas[c.client_id] = c.delta
        return super().plan(clients, responses, info=info)

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
        cfg = self.config
        basic = self.calibration.scope == "release" or (
            cfg.calibration == "dpfl_bcs" and cfg.bcs_split == "per_round"
        )
        if basic:
            return self.tally.eps.get(client_id, 0.0)
        return moments_closed_form_epsilon(
            sum_inv_z2=self.tally.inv_z2.get(client_id, 0.0),
            delta=self.deltas[client_id],
            c2=cfg.c2,
        )

    def client_metrics(self) -> dict[str, ClientValues]:
        """Every client's column (written without making the client active this round)."""
        ids = np.fromiter(self.tally.eps.keys(), np.int64, len(self.tally.eps))
        values = np.fromiter(map(self.closed_form_epsilon, ids.tolist()), float, len(ids))
        return {"epsilon_closed_form": ClientValues(ids, values)}
