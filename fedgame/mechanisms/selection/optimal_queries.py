"""Optimal numbers of queries and replies (paper 002) as a round-robin selection planner.

Before round 1 (``prepare``) the planner estimates the constants of paper 002's bound the
way the paper describes (§VI and note 002 §3.5), on the clients' data through the learner:

* local optima theta_i*, F_i*: ``probe_steps`` full-batch gradient steps per client from the
  initial model theta_0 (clients "solve locally");
* Y0 = sum_i (d_i/d) ||theta_0 - theta_i*||^2 and Gamma = max_i F_i* - sum_i (d_i/d) F_i*
  (the paper's estimators; note 002 §7.14: Gamma is underestimated);
* smoothness lambda and strong convexity mu from gradient-difference ratios between the
  probe points theta_0 and theta_i*: lambda = max_i ||g_i(a) - g_i(b)|| / ||a - b||,
  mu = min_i <g_i(a) - g_i(b), a - b> / ||a - b||^2;
* G^2 = max_i mean_zeta ||grad f(theta_0, zeta)||^2 over client i's samples.

``constants: given`` takes them from the config instead. Laplace: T* by eq. (6) for a fixed
``b`` or, with ``b: optimal``, the joint boundary optimum b in {1, N} (Sec. V-C), rounded to
the integer T with the smaller bound and capped at ``rounds``. Gaussian: b* = N, and T* =
``rounds`` when D = E1/N + E2 > 0 (Theorem 4, Solution 1: the bound falls in T) or 0 when
D <= 0 (Solution 2: training cannot lower the bound), from the same estimated constants.
The plan is then played as round robin: T* active rounds of b* clients, later rounds select
nobody (``queries_active`` = 0).
Estimated constants that are not positive are reported (warning, ``queries_invalid`` = 1) and
the planner falls back to b = 1 over all rounds.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.game import queries
from fedgame.mechanisms.selection.round_robin import RoundRobin
from fedgame.registry import Example, register
from fedgame.views import SetupContext

GIVEN = ("smoothness", "strong_convexity", "grad_bound_sq", "noniid", "initial_distance_sq")


def estimate_constants(learner: Any, sizes: np.ndarray, *, steps: int, lr: float) -> dict:
    """Paper 002's constants (lambda, mu, G^2, Gamma, Y0) by local solves and probes."""
    import torch

    from fedgame.mechanisms.selection.probe import client_gradients, client_losses, sample_grad_sq

    n = sizes.size
    ids = list(range(n))
    w = sizes / sizes.sum()
    theta0 = learner.global_params.expand(n, -1).clone()
    th = theta0.clone()
    for _ in range(steps):
        th = th - lr * client_gradients(learner, ids, th).detach()
    f_star = client_losses(learner, ids, th)
    diff = th - theta0
    dg = client_gradients(learner, ids, th).detach() - client_gradients(learner, ids, theta0)
    dn2 = (diff * diff).sum(dim=1).clamp_min(1e-30)
    lam = float(torch.max(torch.linalg.vector_norm(dg.detach(), dim=1) / dn2.sqrt()))
    mu = float(torch.min((dg.detach() * diff).sum(dim=1) / dn2))
    return {
        "smoothness": lam,
        "strong_convexity": mu,
        "grad_bound_sq": float(np.max(sample_grad_sq(learner, ids))),
        "noniid": float(np.max(f_star) - np.dot(w, f_star)),
        "initial_distance_sq": float(np.dot(w, dn2.cpu().numpy())),
    }


@register("selection", "optimal_queries", reads=reads.BUDGET)
class OptimalQueries(RoundRobin):
    """Round robin with paper 002's optimal queries T* and clients per query b*."""

    example = Example(
        {
            "b": 3,
            "constants": "given",
            "smoothness": 1.0,
            "strong_convexity": 0.1,
            "grad_bound_sq": 1.0,
            "noniid": 0.1,
            "initial_distance_sq": 1.0,
        }
    )

    class Config(RoundRobin.Config):
        mechanism: Literal["laplace", "gaussian"] = Field(
            "laplace",
            description="noise the plan is solved for: laplace (Thm 1) or gaussian (Thm 4)",
        )
        clip_l1: PositiveFloat = Field(
            300.0, description="L1 clip of the noised gradients (Laplace)"
        )
        b: PositiveInt | Literal["optimal"] = Field(  # type: ignore[assignment]
            "optimal", description="clients per query, or optimal (the joint optimum)"
        )
        constants: Literal["estimate", "given"] = Field(
            "estimate",
            description="estimate the bound's constants on the data, or take them as given",
        )
        smoothness: float | None = Field(None, description="lambda (given constants)")
        strong_convexity: float | None = Field(None, description="mu (given constants)")
        grad_bound_sq: float | None = Field(None, description="G^2 (given constants)")
        noniid: float | None = Field(None, description="Gamma (given constants)")
        initial_distance_sq: float | None = Field(None, description="Y0 (given constants)")
        probe_steps: PositiveInt = Field(
            100, description="full-batch steps each client takes to estimate its local optimum"
        )
        probe_lr: NonNegativeFloat = Field(0.5, description="learning rate of those probe steps")
        clip_l2: PositiveFloat = Field(
            1.0, description="L2 clip of the noised gradients (Gaussian)"
        )
        sample_rate: float = Field(
            1.0, gt=0, le=1, description="per-step sampling rate q (Gaussian)"
        )
        c2: PositiveFloat = Field(
            1.0, description="Abadi's noise constant (Gaussian; never given by the paper)"
        )

    round_columns = (*RoundRobin.round_columns, "queries_t_star", "queries_invalid")

    def __init__(self, config: Config) -> None:
        super().__init__(config)
        self.b = 1 if config.b == "optimal" else config.b
        self.t_star = float("nan")
        self.invalid = 0.0
        self.constants: dict[str, float] = {}

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        n = scenario.population.clients
        if n < 2:
            raise ScenarioError("population.clients", n, ">= 2 for the queries planner")
        if config.b != "optimal" and config.b > n:
            raise ScenarioError(f"{key}.b", config.b, f"'optimal' or <= population.clients ({n})")
        if config.constants == "given":
            for name in GIVEN:
                val = getattr(config, name)
                positive = name in GIVEN[:3]
                if val is None or not (val > 0 if positive else val >= 0):
                    need = "> 0" if positive else ">= 0"
                    raise ScenarioError(f"{key}.{name}", val, f"a number {need} (constants: given)")
            if config.strong_convexity > config.smoothness:  # type: ignore[operator]
                raise ScenarioError(
                    f"{key}.strong_convexity", config.strong_convexity, "<= smoothness"
                )

    def prepare(self, ctx: SetupContext, *, rng: np.random.Generator) -> None:
        from fedgame.mechanisms.selection.probe import learner_of

        super().prepare(ctx, rng=rng)
        cfg = self.config
        n = ctx.num_clients
        learner = learner_of(ctx)
        sizes = np.array([max(c.dataset_size, 1) for c in ctx.clients], dtype=float)
        if cfg.constants == "given":
            self.constants = {name: float(getattr(cfg, name)) for name in GIVEN}
        elif learner is None:
            raise ScenarioError("selection.constants", "estimate", "needs the learner; use given")
        else:
            self.constants = estimate_constants(
                learner, sizes, steps=cfg.probe_steps, lr=cfg.probe_lr
            )
        c = self.constants
        ok = c["smoothness"] > 0 and c["strong_convexity"] > 0 and c["grad_bound_sq"] > 0
        ok = ok and c["strong_convexity"] <= c["smoothness"]
        if not ok:
            warnings.warn(
                f"optimal_queries: non-positive constants {c}; using b=1, all rounds", stacklevel=2
            )
            self.invalid, self.b, self.active_rounds = 1.0, 1, ctx.rounds
            return
        p = learner.num_params if learner is not None else 1
        eps = [cl.epsilon_total for cl in ctx.clients]
        if cfg.mechanism == "gaussian":
            self._plan_gaussian(ctx, sizes=sizes, n_params=p, epsilons=eps)
            return
        common: dict[str, Any] = {"n_clients": n, "n_params": p, "n_samples": float(sizes.sum())}
        common |= {"clip_l1": cfg.clip_l1, "epsilons": eps}
        phys: dict[str, Any] = {k: max(v, 0.0) for k, v in c.items()}
        if cfg.b == "optimal":
            mu, lam = phys["strong_convexity"], phys["smoothness"]
            g2, gam = phys["grad_bound_sq"], 2 * lam / mu
            c1 = 8 * n * g2 / (mu**2 * (n - 1))
            c2 = (
                32
                * p
                * cfg.clip_l1**2
                * float(np.sum(np.asarray(eps) ** -2.0))
                / (mu**2 * n * sizes.sum() ** 2)
            )
            c3 = gam * phys["initial_distance_sq"] + 4 / mu**2 * (
                2 * lam * phys["noniid"] - 2 * g2 / (n - 1)
            )
            self.b = queries.laplace_joint_optimum(
                c1=c1, c2=c2, c3=c3, gamma=gam, n_clients=n
            ).clients_per_query
        k = queries.laplace_constants(clients_per_query=self.b, **common, **phys)
        kw = {"a1": k.a1, "a2": k.a2, "gamma": k.gamma, "y0": k.y0}
        self.t_star = queries.laplace_t_star(**kw)
        self.active_rounds = min(queries.round_queries(**kw), ctx.rounds)
        if self.t_star > ctx.rounds:
            warnings.warn(
                f"optimal_queries: T*={self.t_star:.1f} > rounds; capped at {ctx.rounds}",
                stacklevel=2,
            )

    def _plan_gaussian(
        self, ctx: SetupContext, *, sizes: np.ndarray, n_params: int, epsilons: list[float]
    ) -> None:
        """Theorem 4 (Sec. V-D): b* = N; T* = rounds when D = E1/N + E2 > 0, else 0.

        The per-client gradient variances Λ_i² are bounded by the estimated G² (conservative).
        With T* = 0 training cannot lower the bound: no round selects anyone.
        """
        cfg, n, c = self.config, ctx.num_clients, self.constants
        e1, e2, e3, gamma = queries.gaussian_constants(
            n_clients=n,
            n_params=n_params,
            samples_per_client=sizes,
            sample_rate=cfg.sample_rate,
            clip_l2=cfg.clip_l2,
            epsilons=epsilons,
            deltas=[cl.delta for cl in ctx.clients],
            c2=cfg.c2,
            grad_bound_sq=c["grad_bound_sq"],
            grad_variances=[c["grad_bound_sq"]] * n,
            smoothness=c["smoothness"],
            strong_convexity=c["strong_convexity"],
            noniid=max(c["noniid"], 0.0),
            initial_distance_sq=max(c["initial_distance_sq"], 0.0),
        )
        plan = queries.gaussian_optimum(
            e1=e1, e2=e2, e3=e3, gamma=gamma, n_clients=n, max_queries=ctx.rounds
        )
        self.b, self.t_star = plan.clients_per_query, float(plan.queries)
        self.active_rounds = int(min(plan.queries, ctx.rounds))

    def plan_metrics(self) -> dict[str, float]:
        return super().plan_metrics() | {
            "queries_t_star": self.t_star,
            "queries_invalid": self.invalid,
        }
