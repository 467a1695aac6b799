"""DPFL-BCS selection (paper 000): a two-stage biased schedule of exactly K clients per round.

Stage 1 (rounds 1..T_0): integer Prop.-1 counts T_{n,0} (exact greedy optimum of P1 with
Gamma = 0, cap T) over all T rounds; the first T_0 rounds of that schedule are played, and
each selected client reports two noisy losses (Eq. 13, clipped to [0, Theta]). At the end
of round T_0 the server estimates Gamma_hat (Eq. 8), rho_hat_min (Eq. 9) and (L, mu, gamma)
by P2 (Eq. 10), then solves P1 exactly in integers (note 000 §4.5) for the remaining
T - T_0 rounds with the remaining budgets (eps_n (1 - C_n / T_{n,0}), same for delta; note
000 §5) and cap T - T_0.

Scheduling (fedgame's choice; the paper's "sample K clients based on p_n" is unspecified,
note 000 §8.9): systematic. The multiset with T_n copies of client n is laid out with each
client's copies contiguous (clients in random order) and dealt column-wise into a K x R grid;
since T_n <= R a client's copies fall in distinct rounds, every round gets exactly K clients,
realised counts equal T_n exactly, and the rounds are shuffled. A scheduled client that is
not a candidate (declined, unreachable) is skipped and counted in ``bcs_missing``.

Hooks for the privacy mechanism (read each round via ``ctx.selection``):
``planned_participations(cid)`` = T_n of the current stage, ``budget_fraction(cid)`` = share
of (eps_total, delta) those releases split (1 in stage 1), ``loss_bound(round)`` = Theta in
stage-1 rounds when losses are reported (sensitivity 2 eta (B + Theta)/D_n), else 0.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, NonNegativeInt, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.game import bcs
from fedgame.privacy.calibrate import dpfl_bcs_gaussian_sigma, laplace_scale
from fedgame.registry import Example, register
from fedgame.views import ClientValues, ClientView, RoundInfo, Selection, SetupContext

log = logging.getLogger(__name__)


def systematic_schedule(counts: np.ndarray, *, rounds: int, rng: np.random.Generator) -> list:
    """Rounds' client sets with exactly ``sum(counts)/rounds`` distinct clients each.

    Needs ``sum(counts)`` divisible by ``rounds`` and ``counts <= rounds``.
    """
    counts = np.asarray(counts, dtype=int)
    total = int(counts.sum())
    if rounds < 1 or total % rounds or np.any(counts > rounds) or np.any(counts < 0):
        raise ScenarioError("counts", counts.tolist(), f"0 <= T_n <= {rounds}, sum divisible")
    order = rng.permutation(counts.size)
    seq = np.repeat(order, counts[order])
    grid = seq.reshape(total // rounds, rounds)
    perm = rng.permutation(rounds)
    return [np.sort(grid[:, perm[r]]) for r in range(rounds)]


@register("selection", "bcs", reads=reads.BUDGET)
class BcsSelection:
    """DPFL-BCS: two-stage biased selection of K clients per round (Ma et al., paper 000)."""

    example = Example({"k": 3, "t0": 0})

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)
        k: PositiveInt = Field(20, description="clients per round K")
        t0: NonNegativeInt | float = Field(
            10,
            ge=0,
            description=(
                "stage-1 rounds T_0 (0: no estimation stage); a float below 1 is a share of rounds"
            ),
        )
        mechanism: Literal["gaussian", "laplace"] = Field(
            "gaussian", description="noise the allocation is solved for: gaussian or laplace"
        )
        calibration: Literal["analysis", "per_round"] = Field(
            "analysis",
            description="Gaussian noise law of the allocation: analysis (Thm 2) or per_round",
        )
        c2: PositiveFloat = Field(1.0, description="the constant c2 of the analysis calibration")
        clip: PositiveFloat = Field(
            1.0, description="per-sample clipping norm B in the allocation's noise terms"
        )
        clip_norm: Literal["l2", "l1"] = Field(
            "l2", description="norm of the per-sample clipping: l2 (Gaussian) or l1 (Laplace)"
        )
        loss_bound: PositiveFloat = Field(
            math.log(10.0), description="Theta: stage-1 loss reports are clipped to [0, Theta]"
        )
        estimate: Literal["losses", "none"] = Field(
            "losses", description="losses (estimate the non-IID degree in stage 1) or none"
        )
        restarts: NonNegativeInt = Field(4, description="random restarts of the P2 constant fit")

    round_columns = (
        "bcs_stage",
        "bcs_missing",
        "bcs_infeasible",
        "bcs_rho_min",
        "bcs_L",
        "bcs_mu",
        "bcs_gamma",
        "bcs_p2_residual",
        "bcs_p2_at_bound",
    )
    client_columns = ("bcs_planned", "bcs_gamma_hat")

    def __init__(self, config: Config) -> None:
        self.config = config
        self.k = config.k
        z = bcs.noise_exponent(config.mechanism)
        self.z = 2 if config.calibration == "per_round" else z
        #: the stage-1 fit of P2 (cross-round: reported every round once stage 2 is planned)
        self._fit: dict[str, float] = {}
        self._planned = np.zeros(0, dtype=int)
        self._share = np.zeros(0)
        self._gamma_hat = np.zeros(0)

    @staticmethod
    def stage1_rounds(config: Config, rounds: int) -> int:
        """T_0: an integer, or a fraction in (0, 1) of ``rounds`` (at least 2 when estimating)."""
        if isinstance(config.t0, int) or (float(config.t0).is_integer() and config.t0 >= 1):
            return int(config.t0)
        if not 0 < config.t0 < 1:
            raise ScenarioError("t0", config.t0, "an integer >= 0 or a fraction in (0, 1)")
        least = 2 if config.estimate == "losses" else 1
        return max(least, round(config.t0 * rounds))

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        n, rounds = scenario.population.clients, scenario.rounds
        try:
            t0 = BcsSelection.stage1_rounds(config, rounds)
        except ScenarioError as err:
            raise ScenarioError(f"{key}.t0", config.t0, err.allowed) from None
        if config.k > n:
            raise ScenarioError(f"{key}.k", config.k, f"must be <= population.clients ({n})")
        if t0 >= rounds:
            raise ScenarioError(f"{key}.t0", config.t0, f"must be < rounds ({rounds})")
        if config.estimate == "losses" and t0 == 1:
            raise ScenarioError(f"{key}.t0", 1, "0 (no stage 1) or >= 2 to estimate Gamma")

    def expected_fraction(self, num_clients: int) -> float:
        return min(self.k / num_clients, 1.0)

    # ---------------------------------------------------------------- planning
    def _phi(self, eps: np.ndarray, delta: np.ndarray, idx: np.ndarray | None = None) -> np.ndarray:
        sizes = self._sizes if idx is None else self._sizes[idx]
        mech = self.config.mechanism
        return bcs.noise_factor(mechanism=mech, epsilons=eps, samples=sizes, deltas=delta)

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        from fedgame.mechanisms.selection.probe import learner_of

        views = ctx.clients
        self.n, self.rounds = ctx.num_clients, ctx.rounds
        self.t0 = self.stage1_rounds(self.config, ctx.rounds)
        self.learner = learner_of(ctx)
        self._sizes = np.array([max(c.dataset_size, 1) for c in views], dtype=float)
        self._eps = np.array([c.epsilon_total for c in views], dtype=float)
        self._delta = np.array([c.delta for c in views], dtype=float)
        phi = self._phi(self._eps, self._delta)
        total = self.k * self.rounds
        self._planned = bcs.greedy_allocation(
            phi=phi, gamma_n=np.zeros(self.n), omega_a=1.0, omega_b=1.0, z=self.z,
            total=total, cap=self.rounds,
        )  # fmt: skip
        self._stage1_plan = self._planned.copy()
        self._share = np.ones(self.n)
        self._gamma_hat = np.zeros(self.n)
        self._schedule = systematic_schedule(self._planned, rounds=self.rounds, rng=rng)
        self._stage = 1 if self.t0 > 0 else 2
        self._counts = np.zeros(self.n, dtype=int)
        self._counts_before_last = np.zeros(self.n, dtype=int)
        self._reports: dict[int, list[tuple[float, float]]] = {}
        self._last: dict[int, float] = {}
        if self.t0 == 0:
            self._schedule_stage2(rng)

    def _loss_reports(self, ids: list[int], info: RoundInfo, rng: np.random.Generator) -> None:
        """Stage-1 noisy losses of the selected clients (paper 000 §1.5, Alg. 1 line 18-19)."""
        from fedgame.mechanisms.selection.probe import local_step_losses

        cfg = self.config
        seed = int(rng.integers(2**31))
        before, after = local_step_losses(
            self.learner, ids, round_index=info.round - 1, clip=cfg.clip,
            norm=cfg.clip_norm, seed=seed,
        )  # fmt: skip
        self._last = {}
        for i, cid in enumerate(ids):
            sens = 2.0 * (cfg.clip + cfg.loss_bound) / self._sizes[cid]
            t_n = max(int(self._planned[cid]), 1)
            if cfg.mechanism == "laplace":
                scale = laplace_scale(sensitivity=sens, epsilon=self._eps[cid], participations=t_n)
                noise = rng.laplace(0.0, scale, size=2)
            else:
                sd = dpfl_bcs_gaussian_sigma(
                    sensitivity=sens, epsilon=self._eps[cid], delta=self._delta[cid],
                    participations=t_n, c2=cfg.c2, calibration=cfg.calibration,
                )  # fmt: skip
                noise = rng.normal(0.0, sd, size=2)
            pair = (float(before[i] + noise[0]), float(after[i] + noise[1]))
            self._reports.setdefault(cid, []).append(pair)
            self._last[cid] = pair[0]

    def _estimate(self, rng: np.random.Generator) -> tuple[np.ndarray, float, float]:
        """Gamma_hat (Eq. 8), rho_hat (Eq. 9), P2 fit (Eq. 10) -> (Gamma_hat, Omega_A, Omega_B)."""
        cfg = self.config
        theta = cfg.loss_bound
        gam = bcs.estimate_noniid(self._reports, num_clients=self.n, loss_bound=theta)
        rho = bcs.estimate_rho_min(
            counts=self._counts_before_last, last_losses=self._last, k=self.k, loss_bound=theta
        )
        assert self.learner is not None  # _schedule_stage2 estimates only with a learner
        lam = bcs.noise_constant(
            mechanism=cfg.mechanism, clip=cfg.clip, dim=self.learner.num_params, c2=cfg.c2
        )
        observed = float(np.mean(np.clip(list(self._last.values()), 0.0, theta)))
        fit = bcs.fit_p2(
            observed_loss=observed, t0=self.t0, k=self.k, counts=self._counts_before_last,
            phi=self._phi(self._eps, self._delta), gamma_hat=gam, rho_min=rho, lam=lam,
            z=self.z, restarts=cfg.restarts, rng=rng,
        )  # fmt: skip
        self._fit = {
            "bcs_rho_min": rho,
            "bcs_L": fit.smoothness,
            "bcs_mu": fit.strong_convexity,
            "bcs_gamma": fit.gamma,
            "bcs_p2_residual": fit.residual,
            "bcs_p2_at_bound": float(fit.at_bound),
        }
        log.info("DPFL-BCS P2 fit at T0=%d: %s (rho_min=%.4g)", self.t0, fit, rho)
        if fit.at_bound:
            warnings.warn(
                "bcs: the stage-1 fit of P2 ran to the optimiser's bound "
                f"(L = {fit.smoothness:.3g}, mu = {fit.strong_convexity:.3g}, "
                f"gamma = {fit.gamma:.3g}): the noisy loss "
                "reports did not determine the constants, and stage 2's plan rests on the bound "
                "(rounds flagged bcs_p2_at_bound)",
                stacklevel=2,
            )
        omega_a, omega_b = bcs.p1_weights(
            smoothness=fit.smoothness, strong_convexity=fit.strong_convexity, gamma=fit.gamma,
            k=self.k, rounds=self.rounds - self.t0, lam=lam,
        )  # fmt: skip
        return gam, omega_a, omega_b

    def _schedule_stage2(self, rng: np.random.Generator) -> None:
        cfg = self.config
        left = self.rounds - self.t0
        base = np.maximum(self._stage1_plan, 1)
        share = np.where(self._stage1_plan > 0, 1.0 - self._counts / base, 1.0)
        avail = np.flatnonzero(share > 1e-12)
        gam, omega_a, omega_b = np.zeros(self.n), 1.0, 1.0
        if self.t0 >= 2 and cfg.estimate == "losses" and self.learner is not None:
            if self._counts_before_last.sum() > 0 and self._last:
                gam, omega_a, omega_b = self._estimate(rng)
            else:
                warnings.warn(
                    "bcs: no stage-1 loss reports (no client took part); stage 2 uses Gamma = 0",
                    stacklevel=2,
                )
        total = self.k * left
        if avail.size < self.k:
            warnings.warn(
                f"bcs: only {avail.size} clients have budget left for K={self.k} per round; "
                "stage 2 selects all of them (rounds flagged bcs_infeasible)",
                stacklevel=2,
            )
            total = avail.size * left
        self._share = np.where(share > 1e-12, share, 0.0)
        self._gamma_hat = gam
        self._stage = 2
        self._planned = np.zeros(self.n, dtype=int)
        empty = [np.zeros(0, dtype=int)] * self.t0
        if avail.size == 0:
            self._schedule = empty + [np.zeros(0, dtype=int)] * left
            return
        phi = self._phi(self._eps[avail] * share[avail], self._delta[avail] * share[avail], avail)
        alloc = bcs.greedy_allocation(
            phi=phi, gamma_n=gam[avail], omega_a=omega_a, omega_b=omega_b, z=self.z,
            total=total, cap=left,
        )  # fmt: skip
        self._planned[avail] = alloc
        self._schedule = empty + systematic_schedule(self._planned, rounds=left, rng=rng)

    # ---------------------------------------------------------------- the round
    def select(
        self, candidates: Sequence[ClientView], *, info: RoundInfo, rng: np.random.Generator
    ) -> tuple[Selection, dict[str, float]]:
        """The round's scheduled clients that are candidates, with ``bcs_stage``,
        ``bcs_missing`` (scheduled but not candidates), ``bcs_infeasible`` and the stage-1
        fit's ``bcs_*`` constants once stage 2 is planned."""
        cfg = self.config
        if self._stage == 1 and info.round > self.t0:
            self._schedule_stage2(rng)
        if info.round > len(self._schedule):
            return Selection(()), {}
        planned = self._schedule[info.round - 1]
        avail = {c.client_id for c in candidates}
        ids = [int(i) for i in planned if int(i) in avail]
        metrics = {
            "bcs_stage": float(self._stage),
            "bcs_missing": float(len(planned) - len(ids)),
            "bcs_infeasible": float(self._infeasible()),
            **self._fit,
        }
        if self._stage == 1:
            if info.round == self.t0:
                self._counts_before_last = self._counts.copy()
            if cfg.estimate == "losses" and self.learner is not None and ids:
                self._loss_reports(ids, info, rng)
        self._counts[ids] += 1
        p = self._planned / max(self._planned.sum(), 1)
        chosen = Selection(
            tuple(ids), {int(c.client_id): float(p[c.client_id]) for c in candidates}
        )
        return chosen, metrics

    def _infeasible(self) -> bool:
        left = self.rounds - self.t0
        return self._stage == 2 and int(self._planned.sum()) < self.k * left

    # ---------------------------------------------------------------- hooks + metrics
    def planned_participations(self, client_id: int) -> int:
        """T_n of the current stage (the releases the client's remaining budget is split over)."""
        return int(self._planned[client_id])

    def budget_fraction(self, client_id: int) -> float:
        """Share of (eps_total, delta) the current stage's releases split (1 in stage 1)."""
        return float(self._share[client_id])

    def loss_bound(self, round_index: int) -> float:
        """Theta while stage-1 losses are reported (round_index 1-based), else 0."""
        cfg = self.config
        return cfg.loss_bound if cfg.estimate == "losses" and round_index <= self.t0 else 0.0

    def client_metrics(self) -> dict[str, ClientValues]:
        """Every client's column (written without making the client active this round)."""
        return {
            "bcs_planned": ClientValues(np.arange(len(self._planned)), self._planned),
            "bcs_gamma_hat": ClientValues(np.arange(len(self._gamma_hat)), self._gamma_hat),
        }
