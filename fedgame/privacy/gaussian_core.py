"""The one local clip-and-noise core: clip to C, add N(0, σ_k² I), σ_k = z_k·Δ_k.

``gaussian``, ``gaussian_local``, ``zcdp_gaussian`` and ``ldp`` are presets of
:class:`GaussianCore` (registered names whose ``Config`` changes defaults of
:class:`~fedgame.privacy.settings.PrivacySettings` and which may add a column: ``ldp`` reads
``level: sample`` as paper 004's NbAFL record level, ``nbafl_sample``). Per client k and
release:

* the budget: T_k planned releases and a share s_k of (ε_k, δ_k) from the participation plan
  (:class:`~fedgame.privacy.local_common.ParticipationPlan`); per release (ε_r, δ_r) =
  s_k·(ε_k, δ_k)/T_k, a response's own ε replacing ε_r;
* the multiplier z_k from the configured calibration (:mod:`fedgame.privacy.calibrations`),
  or z_k = 1/sqrt(2ρ) when the response chose a zCDP budget ρ (:mod:`fedgame.privacy.levels`);
* the sensitivity Δ_k by ``level`` (:mod:`fedgame.privacy.local_common`): factor·(C + Θ) for
  the whole update, factor·η_t·(C + Θ)/D_k per sample (FedSGD), factor·C/D_k at the record
  level (paper 003), factor 2 for replace-one adjacency, Θ the selection's stage-1 loss bound
  (0 without);
* σ_k = z_k·Δ_k, or the σ a calibration's paper states itself (``StatesNoiseStd``: paper 003
  Eq. 10 for ``qi_dpfl``, the same number up to the last bits, kept so the shipped QI-DPFL
  tables stay bit-identical);
* the release: a Gaussian of multiplier z_k at δ share δ_r, priced by the accountant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from fedgame.errors import ScenarioError
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.accountants.base import check_reachable
from fedgame.privacy.base import Charge, Charges, PrivacyPlan, clip_rows, gaussian_noise
from fedgame.privacy.calibration_base import StatesNoiseStd
from fedgame.privacy.calibrations import (
    Release,
    Target,
    calibration_class,
    check_calibration,
    make_calibration,
    proven_below,
)
from fedgame.privacy.levels import chosen_rho, following_rho
from fedgame.privacy.local_common import (
    ParticipationPlan,
    ReleaseSensitivity,
    adjacency_factor,
    check_sample_level,
    training_from,
)
from fedgame.privacy.settings import PrivacySettings, fixed_participations
from fedgame.scenario.planning import max_round_epsilon, planned_participations
from fedgame.views import ClientView, Response, RoundInfo, SetupContext, column_of, ids_of

if TYPE_CHECKING:
    import torch


def check_classic(
    calibration: str, allow_loose: bool, scenario: Any, *, participations: int | None, key: str
) -> None:
    """Refuse a tail-bound calibration where per-round ε reaches the end of its proven range.

    A calibration declares ``proven_below``; the classic σ = Δ·sqrt(2 ln(1.25/δ))/ε (Dwork &
    Roth 2014, Thm A.1) is a theorem only for ε < 1; above it the guarantee is not proven
    (and fails for large ε). The accountant still reports the exact ε of the noise actually
    added, so budgets hold either way.
    """
    limit = proven_below(calibration)
    if allow_loose or limit == math.inf:
        return
    eps = max_round_epsilon(scenario, participations)
    if eps >= limit:
        raise ScenarioError(
            f"{key}.calibration",
            calibration,
            f"its bound holds only for per-round epsilon < {limit:g}, and it reaches {eps:.3g} "
            "here (epsilon_total / planned participations); use calibration: analytic (exact "
            f"for every epsilon) or set {key}.allow_loose_classic: true",
        )


def check_release(config: PrivacySettings, scenario: Any, *, key: str, per_sample: bool) -> None:
    """The accountant and calibration describe the local Gaussian release; a tail bound stays
    in its proven range; per-sample clipping has FedSGD; an accountant target is reachable."""
    account = accountant_name(config)
    check_describes(account, "gaussian", key=f"{key}.accountant")
    release = Release("gaussian", "local", config.level)
    check_calibration(config.calibration, release, kind=scenario.privacy.kind, key=key)
    fixed = fixed_participations(config.participations)
    check_classic(
        config.calibration, config.allow_loose_classic, scenario, participations=fixed, key=key
    )
    if per_sample:
        check_sample_level(scenario, key=key, norm="l2")
    if config.calibration == "accountant":
        check_reachable(
            account,
            scenario,
            releases=fixed or planned_participations(scenario),
            template=Charge("gaussian"),
            key=key,
        )


def accountant_name(config: PrivacySettings) -> str:
    """The configured accountant, else ``basic`` for per-release calibrations, else ``rdp``."""
    if config.accountant is not None:
        return config.accountant
    return "basic" if calibration_class(config.calibration).scope == "release" else "rdp"


class GaussianCore(ReleaseSensitivity):
    """Local Gaussian mechanism: every preset's behaviour (see the module docstring)."""

    placement = "local"
    noise = "gaussian"
    follows = frozenset({"epsilon", "rho"})
    Config = PrivacySettings
    #: the registered name (set by each preset) that validation messages name
    kind = "gaussian_local"
    #: ``level: sample`` means paper 004's NbAFL record level (the whole update clipped,
    #: Δ = 2C/|D_min| of the round's selected clients; ``ldp``), not per-sample clipping
    nbafl_sample: ClassVar[bool] = False

    def __init__(self, config: PrivacySettings) -> None:
        self.config = config
        self.accountant = make_accountant(accountant_name(config))
        self.calibration = make_calibration(config.calibration, config)
        self.factor = adjacency_factor(config.adjacency)
        self.participation = ParticipationPlan(config.participations)
        self.training: Any = None

    @staticmethod
    def check_scenario(config: PrivacySettings, scenario: Any, *, key: str) -> None:
        check_release(config, scenario, key=key, per_sample=config.level == "sample")

    @property
    def per_sample(self) -> bool:
        """Whether the learner clips each per-sample gradient (``level: sample``, FedSGD)."""
        return self.config.level == "sample" and not self.nbafl_sample

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        del rng
        self.training = training_from(ctx) if self.per_sample else None
        self.participation.bind(ctx.selection)

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        t = self.participation.set_scenario(participations)  # set-up: the scenario-wide T
        return epsilon_total / t, delta_total / t

    def target(self, clients: Sequence[ClientView], asked: np.ndarray | None = None) -> Target:
        """Each client's release budget (ε_r, δ_r) and run budget (s·ε, s·δ over T).

        ``asked``: the responses' ε per round (NaN: none); an ε equal to the view's own
        ``epsilon_round`` merely echoes the default and asks for the plan's own level.
        """
        plan = self.participation
        if not plan.hooked:
            eps_r, delta_r = column_of(clients, "epsilon_round"), column_of(clients, "delta_round")
            eps, delta = column_of(clients, "epsilon_total"), column_of(clients, "delta")
            t = np.full(len(clients), plan.scenario, dtype=np.int64)
        else:
            t_share = [plan.of(c.client_id) for c in clients]
            t = np.array([x[0] for x in t_share], dtype=np.int64)
            share = np.array([x[1] for x in t_share], dtype=float)
            eps = column_of(clients, "epsilon_total") * share
            delta = column_of(clients, "delta") * share
            eps_r, delta_r = eps / t, delta / t
        if asked is not None:
            echoed = column_of(clients, "epsilon_round")
            eps_r = np.where(np.isfinite(asked) & (asked != echoed), asked, eps_r)
        return Target(eps_r, delta_r, eps, delta, t)

    def multipliers(self, target: Target) -> np.ndarray:
        """z of each release under the configured calibration."""
        return self.calibration.multipliers(target, accountant=self.accountant)

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        target = self.target(clients)
        z = self.multipliers(target)
        if self.participation.hooked:
            for c, zk in zip(clients, z.tolist()):
                self.participation.priced(c.client_id, zk)
        return Charges("gaussian", noise_multiplier=z, delta=target.delta_round)

    def next_charge(self, client: ClientView) -> Charge:
        """``next_charges`` of one client."""
        return self.next_charges([client])[0]

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        target = self.target(clients, column_of(responses, "epsilon"))

        def planned(rows: np.ndarray) -> np.ndarray:
            z = self.multipliers(target.take(rows))
            if not self.participation.hooked:
                return z
            ids = ids_of(clients)[rows].tolist()
            return np.array([self.participation.floored(i, zk) for i, zk in zip(ids, z)])

        rho = chosen_rho(responses)
        z = following_rho(rho, planned)
        charges = Charges("gaussian", noise_multiplier=z, delta=target.delta_round)
        sigma = self.noise_std(z, target, clients, rho=rho, round_index=info.round - 1)
        sample = self.per_sample
        return PrivacyPlan(
            tuple(ids_of(clients).tolist()),
            charges,
            sigma,
            clip=None if sample else self.config.clip,
            per_sample_clip=self.config.clip if sample else None,
        )

    def noise_std(
        self,
        z: np.ndarray,
        target: Target,
        clients: Sequence[ClientView],
        *,
        rho: np.ndarray,
        round_index: int,
    ) -> np.ndarray:
        """σ_k = z_k·Δ_k, or the σ the calibration's paper states itself (``StatesNoiseStd``,
        e.g. ``qi_dpfl``'s Eq. 10), which is z_k·Δ_k of the release it describes."""
        if isinstance(self.calibration, StatesNoiseStd):
            sizes = column_of(clients, "dataset_size")
            return self.calibration.noise_std(
                target, rho=rho, clip=self.config.clip, dataset_sizes=sizes
            )
        return z * self.sensitivities(clients, round_index=round_index)

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor | tuple[torch.Tensor, dict[str, Any]]:
        """Clip to ``plan.clip`` and add N(0, σ_k² I) (a preset may add its metrics)."""
        out = updates if plan.clip is None else clip_rows(updates, plan.clip)
        return out + gaussian_noise(
            updates.shape, plan.noise_std, like=updates, generator=generator
        )
