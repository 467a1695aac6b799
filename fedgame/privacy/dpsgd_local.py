"""Local DP-SGD: per-sample clipping and Gaussian noise at every local step (paper 001)."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, PositiveFloat, field_validator

from fedgame import reads
from fedgame.privacy.accountants import check_describes, make_accountant
from fedgame.privacy.accountants.base import calibrate_targets, check_reachable
from fedgame.privacy.base import Charge, Charges, PerClientCharges, PrivacyPlan
from fedgame.privacy.calibrate import paper001_epsilon
from fedgame.privacy.calibration_base import (
    CalibrationName,
    Release,
    Target,
    check_calibration,
    make_calibration,
)
from fedgame.privacy.local_common import (
    ParticipationPlan,
    Participations,
    adjacency_factor,
    participations_field,
    training_from,
)
from fedgame.privacy.settings import ReleaseSettings
from fedgame.progress import report
from fedgame.registry import Example, register
from fedgame.scenario.planning import planned_participations
from fedgame.views import ClientValues, ClientView, Response, RoundInfo, SetupContext

if TYPE_CHECKING:
    import torch


def step_geometry(
    *, dataset_size: int, batch_size: int, local_steps: int, fedsgd: bool
) -> tuple[float, int, int, int]:
    """(sample rate q, batch B, steps per round, max copies of a sample in one batch).

    ``local_sgd`` reads a per-round shuffle cyclically, so a client with fewer samples than a
    batch repeats each sample up to ``ceil(B/D)`` times in a batch; ``fedsgd`` takes one step
    on the whole local set (q = 1, B = D).
    """
    d = max(int(dataset_size), 1)
    if fedsgd:
        return 1.0, d, 1, 1
    return min(1.0, batch_size / d), batch_size, local_steps, math.ceil(batch_size / d)


@register("privacy", "dpsgd_local", reads=reads.CHARGES)
class LocalDpSgd(PerClientCharges):
    """DP-SGD on each client: clip per-sample gradients to C, noise each step's mean gradient.

    The learner adds N(0, s_k² I) to the mean of the B per-sample-clipped gradients of every
    local step, s_k = z_k Δ_k with Δ_k = factor·m_k·C/B (m_k copies of a sample per batch when
    D_k < B; factor 2 for ``adjacency: replace``). Sampling rate q_k = min(1, B/D_k); one
    participation is ``local_steps`` subsampled Gaussian steps, charged as
    ``Charge("subsampled_gaussian", z_k, q_k, local_steps)``. The accountant treats the
    learner's per-round shuffle as Poisson sampling at rate q (standard DP-SGD practice).

    T_k planned participations: ``participations: auto`` (default) reads the selection's
    per-client plan when it has one (paper 001 realised T_k, Power-of-Choice caps; budget
    share s_k scales (ε_k, δ_k)), else the scenario-wide count (``scenario``); an integer
    fixes T for all. ``calibration``: any registered calibration that describes this release
    (subsampled Gaussian, local, sample level): ``accountant`` (default) solves z_k so that
    T_k participations (T_k·local_steps steps) meet (ε_k, δ_k) under the accountant
    (rdp/pld), for every client at once; ``privacy_aware`` uses paper 001 Eq. 6-7,
    s_k = C sqrt(V_k T_k T^l), exactly as written (note 001 §8.4: not a proven guarantee; the
    accountant reports what it really costs). ``paper``, its old name here, still works in
    this release with one deprecation line.
    ``epsilon_closed_form`` is paper 001's own figure for the steps released so far.
    """

    placement = "local"
    noise = "subsampled_gaussian"
    #: the noise is sized for the client's planned releases; a chosen level is not followed
    follows: frozenset[str] = frozenset()
    example = Example({"calibration": "privacy_aware"})
    #: what it releases, for the calibrations that can describe it
    release = Release("subsampled_gaussian", "local", "sample")
    client_columns = ("epsilon_closed_form",)

    class Config(ReleaseSettings):
        """The shared release knobs (:mod:`fedgame.privacy.settings`) at the per-sample level,
        and this mechanism's own calibrations."""

        clip: PositiveFloat = Field(1.0, description="per-sample L2 clipping norm C")
        level: Literal["sample"] = Field(
            "sample", description="sample: every per-sample gradient is clipped (DP-SGD)"
        )
        calibration: CalibrationName = Field(
            "accountant",
            description=(
                "a calibration that describes DP-SGD's release: accountant (noise solved under "
                "the accountant) or privacy_aware (paper 001 Eq. 6-7 as written; formerly paper)"
            ),
        )
        participations: Participations = participations_field()
        accountant: str = Field(
            "rdp",
            description="accountant plug-in that prices every release (fedgame list accountant)",
        )

        @field_validator("calibration", mode="before")
        @classmethod
        def _old_name(cls, value: Any) -> Any:
            if value == "paper":
                warnings.warn(
                    "privacy.calibration: paper is deprecated for dpsgd_local: write "
                    "privacy.calibration: privacy_aware (the same paper 001 Eq. 6-7); the old "
                    "name will be refused in the next release",
                    FutureWarning,
                    stacklevel=2,
                )
                return "privacy_aware"
            return value

    def __init__(self, config: Config) -> None:
        self.config = config
        self.accountant = make_accountant(config.accountant)
        self.calibration = make_calibration(config.calibration, config)
        self.factor = adjacency_factor(config.adjacency)
        self.participation = ParticipationPlan(config.participations)
        self.training: Any = None
        self._z_cache: dict[tuple[Any, ...], float] = {}
        self._released: dict[int, tuple[int, float, float, float, float]] = {}
        self._closed: dict[int, float] = {}

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_describes(config.accountant, "subsampled_gaussian", key=f"{key}.accountant")
        check_calibration(config.calibration, LocalDpSgd.release, kind="dpsgd_local", key=key)
        if config.calibration == "accountant":  # q = 1 needs the most noise: the worst case
            t = config.participations if isinstance(config.participations, int) else None
            check_reachable(
                config.accountant,
                scenario,
                releases=t or planned_participations(scenario),
                template=Charge("subsampled_gaussian", steps=scenario.training.local_steps),
                key=key,
            )

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        del rng
        self.training = training_from(ctx)
        self._closed = {c.client_id: 0.0 for c in ctx.clients}
        self.participation.bind(ctx.selection)

    def epsilon_per_round(
        self, epsilon_total: np.ndarray, delta_total: np.ndarray, *, participations: int
    ) -> tuple[np.ndarray, np.ndarray]:
        t = self.participation.set_scenario(participations)  # set-up: the scenario-wide T
        return epsilon_total / t, delta_total / t

    def geometry(self, client: ClientView) -> tuple[float, int, int, int]:
        t = self.training
        return step_geometry(
            dataset_size=client.dataset_size,
            batch_size=t.batch_size,
            local_steps=t.local_steps,
            fedsgd=t.mode == "fedsgd",
        )

    def _key(self, client: ClientView) -> tuple[Any, ...]:
        q, b, steps, _ = self.geometry(client)
        _, _, t, share = self.participation.budget(client)
        return (client.epsilon_total, client.delta, t, share, q, b, steps, client.dataset_size)

    def calibrate_clients(self, clients: Sequence[ClientView]) -> None:
        """Solve every uncached client's z at once: one ``calibrate_many`` per shared curve.

        Clients with the same (δ, T, q, steps) share the curve ε(z) and differ only in their
        ε target; set-up progress (:mod:`fedgame.progress`) counts the targets solved.
        """
        if self.config.calibration != "accountant":
            return
        groups: dict[tuple[Any, ...], dict[tuple[Any, ...], float]] = {}
        for client in clients:
            key = self._key(client)
            if key in self._z_cache:
                continue
            q, _, steps, _ = self.geometry(client)
            eps, delta, t, _ = self.participation.budget(client)
            groups.setdefault((delta, t, q, steps), {})[key] = eps
        total = sum(len(set(g.values())) for g in groups.values())
        done = 0
        for (delta, t, q, steps), targets in groups.items():
            before = done

            def tick(n: int, _: int, before: int = before) -> None:
                report("calibrating noise", min(before + n, total), total, "budgets")

            zs = calibrate_targets(
                self.accountant,
                epsilons=list(targets.values()),
                delta=delta,
                releases=t,
                template=Charge("subsampled_gaussian", sample_rate=q, steps=steps),
                progress=tick,
            )
            self._z_cache.update(zip(targets.keys(), zs.tolist()))
            done += len(set(targets.values()))

    def next_charges(self, clients: Sequence[ClientView]) -> Charges:
        self.calibrate_clients(clients)
        return Charges.of([self.next_charge(c) for c in clients])

    def terms(self, client: ClientView, *, release: bool = False) -> tuple[Charge, float]:
        """The charge of one participation and the per-step noise std (gradient units).

        ``release``: for an actual release (``plan``), not the budget check's pricing.
        """
        q, b, steps, copies = self.geometry(client)
        sens = self.factor * copies * self.config.clip / b
        eps, delta, t, _ = self.participation.budget(client)
        key = self._key(client)
        if key not in self._z_cache:
            if self.config.calibration != "accountant":
                eps_k, delta_k = np.array([eps]), np.array([delta])
                target = Target(
                    eps_k,
                    delta_k,
                    eps_k,
                    delta_k,
                    np.array([t], dtype=np.int64),
                    "subsampled_gaussian",
                    sample_rate=np.array([q]),
                    steps=np.array([steps], dtype=np.int64),
                    sample_size=np.array([b / q]),
                    sensitivity=np.array([sens]),
                    clip=self.config.clip,
                )
                zs = self.calibration.multipliers(target, accountant=self.accountant)
                self._z_cache[key] = float(zs[0])
            else:
                self._z_cache[key] = self.accountant.calibrate(
                    epsilon=eps,
                    delta=delta,
                    releases=t,
                    template=Charge("subsampled_gaussian", sample_rate=q, steps=steps),
                )
        z = self._z_cache[key]
        if release:
            z = self.participation.floored(client.client_id, z)
        else:
            self.participation.priced(client.client_id, z)
        charge = Charge("subsampled_gaussian", noise_multiplier=z, sample_rate=q, steps=steps)
        return charge, z * sens

    def next_charge(self, client: ClientView) -> Charge:
        return self.terms(client)[0]

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        self.calibrate_clients(clients)
        terms = [self.terms(c, release=True) for c in clients]
        for c, (_, std) in zip(clients, terms):
            q, b, _, _ = self.geometry(c)
            self._released.setdefault(c.client_id, (0, std, c.delta, q, b / q))
        stds = np.array([s for _, s in terms])
        return PrivacyPlan(
            tuple(c.client_id for c in clients),
            Charges.of([ch for ch, _ in terms]),
            stds,
            per_sample_clip=self.config.clip,
            step_noise_std=stds,
        )

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> torch.Tensor:
        """Noise was added during training; the released update passes unchanged."""
        del plan, generator
        return updates

    def record_releases(self, client_ids: np.ndarray, charges: Charges) -> None:
        """Count released steps and refresh paper 001's closed-form ε of the senders."""
        for client_id, charge in zip(client_ids.tolist(), charges):
            steps, std, delta, q, size = self._released[client_id]
            steps += charge.steps
            self._released[client_id] = (steps, std, delta, q, size)
            self._closed[client_id] = paper001_epsilon(
                sigma=std,
                clip=self.config.clip,
                delta=delta,
                sample_rate=q,
                dataset_size=size,
                steps=steps,
            )

    def client_metrics(self) -> dict[str, ClientValues]:
        """Every client's column (written without making the client active this round)."""
        ids = np.fromiter(self._closed.keys(), np.int64, len(self._closed))
        values = np.fromiter(self._closed.values(), float, len(ids))
        return {"epsilon_closed_form": ClientValues(ids, values)}
