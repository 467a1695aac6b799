"""``lightdp``: LightDP-FL (paper 004), pairwise-cancelling plus individual Gaussian noise.

Selected client i uploads u_i + Σ_{a>i} r_ia − Σ_{b<i} r_bi + n_i (eq. 7), with n_i ~ N(0, σ_U² I)
private and one r_ij = r_ji ~ N(0, σ_K² I) per graph edge between two selected clients (added
by the lower id, subtracted by the higher). The server averages what arrives (aggregation
``mean``): terms between two uploaders cancel, terms shared with a straggler stay (eq. 9).
Stragglers are decided by the fault model in phase 1 but dropped in phase 7, after the noise
was committed in phase 6, which is exactly the LightDP case.

(σ_K, σ_U) come from Example 1 (``fedgame.game.lightdp.lightdp_design``, γ0 = 0 fallback when
no root exists) for the round's K selected clients, C_bar = ``max_colluders`` and the
straggler-count law g of the fault model (``straggler_pmf``; truncated to S <= S_bar when
S_bar is known, and always to S < K). Example 1 is the paper's complete-graph analysis:
on another topology a coalition may hold every neighbour of a client, leaving σ_U alone.
``incomplete_graph="reject"`` (default) refuses non-complete topologies at load;
``"ldp_floor"`` keeps the pairwise terms on the graph's edges but raises σ_U to the local-DP
level cΔ/ε, which is private on any graph (the pairwise terms are data-independent, so the
uploads are a post-processing of local-DP uploads).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from fedgame import reads
from fedgame.errors import ScenarioError
from fedgame.game import lightdp as ld
from fedgame.mechanisms.base import BoundsStragglers, FaultDraw, StragglerLaw  # noqa: F401 (pdoc)
from fedgame.privacy.base import Charge, PrivacyPlan  # noqa: F401 (pdoc reads the inherited fields here)
from fedgame.privacy.distributed import (
    BoundsConfig,
    PerRoundGaussian,
    check_bounds,
    check_equal_weights,
)
from fedgame.registry import Example, register
from fedgame.views import ClientView, Response, RoundInfo

if TYPE_CHECKING:
    import torch

#: pairwise draws are made in chunks of at most this many numbers (memory bound)
CHUNK = 1 << 23


@lru_cache(maxsize=256)
def _design(
    k: int, c_bar: int, pmf: tuple[float, ...], eps: float, delta: float, sens: float, c: float
) -> ld.LightDPNoise:
    """Paper 004's design, rescaled from its own constant to ``c`` = ε·z of the calibration."""
    d = ld.lightdp_design(
        n_clients=k,
        max_colluders=c_bar,
        straggler_pmf=np.array(pmf),
        epsilon=eps,
        delta=delta,
        sensitivity=sens,
    )
    scale = c / ld.tail_constant(delta)
    return ld.LightDPNoise(d.sigma_pairwise * scale, d.sigma_individual * scale, d.gamma0)


def pair_arrays(graph: Any, ids: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Row positions (lower id, higher id) of the graph edges among the selected ``ids``."""
    pos = {cid: k for k, cid in enumerate(ids)}
    lo, hi = [], []
    for i, j in graph.subgraph(ids).edges():
        a, b = (i, j) if i < j else (j, i)
        lo.append(pos[a])
        hi.append(pos[b])
    order = np.lexsort((hi, lo)) if lo else np.zeros(0, dtype=int)
    return np.asarray(lo, dtype=np.int64)[order], np.asarray(hi, dtype=np.int64)[order]


def pairwise_noise(
    lo: np.ndarray,
    hi: np.ndarray,
    *,
    rows: int,
    cols: int,
    sigma: float,
    like: torch.Tensor,
    generator: torch.Generator,
) -> torch.Tensor:
    """[rows, cols] Σ of ±r_e over edges e = (lo, hi): one batched draw per chunk, scatter-add."""
    import torch

    out = torch.zeros(rows, cols, dtype=like.dtype, device=like.device)
    if sigma == 0.0 or lo.size == 0:
        return out
    step = max(1, CHUNK // max(cols, 1))
    for start in range(0, lo.size, step):
        lo_c = torch.as_tensor(lo[start : start + step], device=like.device)
        hi_c = torch.as_tensor(hi[start : start + step], device=like.device)
        r = (
            torch.randn(
                (lo_c.numel(), cols), generator=generator, device=like.device, dtype=like.dtype
            )
            * sigma
        )
        out.index_add_(0, lo_c, r)
        out.index_add_(0, hi_c, r, alpha=-1.0)
    return out


_NO_PAIRS = np.zeros(0, np.int64)


@dataclass(frozen=True)
class PairwisePlan(PrivacyPlan):
    """A LightDP round's plan: the noise design and the graph edges among the selected
    clients (row positions, lower id first) whose pairwise terms ``privatise`` draws."""

    design: ld.LightDPNoise | None = None
    pairs: tuple[np.ndarray, np.ndarray] = (_NO_PAIRS, _NO_PAIRS)

    def adjacency(self) -> np.ndarray:
        """[K, K] mask of the pairs (symmetric)."""
        k = len(self.client_ids)
        adj = np.zeros((k, k), dtype=bool)
        lo, hi = self.pairs
        adj[lo, hi] = adj[hi, lo] = True
        return adj


@register("privacy", "lightdp", reads=(*reads.DISTRIBUTED, reads.GRAPH))
class LightDP(PerRoundGaussian):
    """LightDP-FL: pairwise-cancelling + individual Gaussian noise (paper 004, eq. 7)."""

    example = Example(
        {"max_colluders": 1},
        needs={"aggregation": {"kind": "mean"}, "network": {"topology": {"kind": "complete"}}},
    )

    class Config(BoundsConfig):
        incomplete_graph: Literal["reject", "ldp_floor"] = Field(
            "reject",
            description=(
                "reject a non-complete topology, or ldp_floor (raise individual noise to the "
                "local-DP level)"
            ),
        )

    config: Config

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        PerRoundGaussian.check_scenario(config, scenario, key=key)
        check_equal_weights(scenario, why="pairwise noise cancels only in the plain average")
        check_bounds(config, scenario, key=key, need_s_bar=False)
        topo = scenario.network.topology.kind
        if config.incomplete_graph == "reject" and topo != "complete":
            raise ScenarioError(
                "network.topology",
                topo,
                "lightdp's Example-1 design assumes the complete graph: use complete, or set "
                f"{key}.incomplete_graph: ldp_floor",
            )

    def straggler_law(self, clients: Sequence[ClientView]) -> np.ndarray:
        """g(s) for s < K from the fault model, truncated at S_bar when known."""
        k = len(clients)
        if isinstance(self.faults, StragglerLaw):
            pmf = np.asarray(self.faults.straggler_pmf(clients, graph=self.graph), float)
        else:
            pmf = np.zeros(k + 1)
            pmf[0] = 1.0
        s_bar = self.config.max_stragglers
        if s_bar is None and isinstance(self.faults, BoundsStragglers):
            s_bar = self.faults.max_stragglers
        top = k - 1 if s_bar is None else min(int(s_bar), k - 1)
        pmf = pmf[: top + 1]
        return pmf / pmf.sum() if pmf.sum() > 0 else np.eye(1, top + 1)[0]

    def plan(
        self, clients: Sequence[ClientView], responses: Sequence[Response], *, info: RoundInfo
    ) -> PrivacyPlan:
        import networkx as nx

        eps, delta = self.round_budget(clients, responses)
        eps_d, delta_d = float(eps.min()), float(delta.min())
        k = len(clients)
        ids = [c.client_id for c in clients]
        pmf = tuple(np.round(self.straggler_law(clients), 15).tolist())
        c_bar = min(self.config.max_colluders, k - 1)
        cfg = self.config
        sens = self.round_sensitivity(clients)
        z_d = float(self.multipliers(np.array([eps_d]), np.array([delta_d]))[0])
        d = _design(k, c_bar, pmf, eps_d, delta_d, sens, eps_d * z_d)
        sub = self.graph.subgraph(ids) if self.graph is not None else nx.complete_graph(ids)
        complete = sub.number_of_edges() == k * (k - 1) // 2
        if not complete and cfg.incomplete_graph == "ldp_floor":
            floor = z_d * sens
            d = ld.LightDPNoise(d.sigma_pairwise, max(d.sigma_individual, floor), d.gamma0)
        sigma = np.full(k, d.sigma_individual)
        eps_k, delta_k = np.full(k, eps_d), np.full(k, delta_d)
        return self.make_plan(
            clients,
            multipliers=self.multipliers(eps_k, delta_k),
            delta=delta_k,
            sigma=sigma,
            info=info,
            kind=PairwisePlan,
            design=d,
            pairs=pair_arrays(sub, ids),
        )

    def privatise(
        self, updates: torch.Tensor, plan: PrivacyPlan, *, generator: torch.Generator
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        import torch

        assert isinstance(plan, PairwisePlan) and plan.design is not None
        design = plan.design
        clipped, metrics = self.clip_updates(updates, self.config.clip)
        k, p = updates.shape
        individual = (
            torch.randn((k, p), generator=generator, device=updates.device, dtype=updates.dtype)
            * design.sigma_individual
        )
        lo, hi = plan.pairs
        pair = pairwise_noise(
            lo,
            hi,
            rows=k,
            cols=p,
            sigma=design.sigma_pairwise,
            like=updates,
            generator=generator,
        )
        return clipped + individual + pair, metrics

    def residual_and_effective(
        self, plan: PrivacyPlan, late: np.ndarray, colluders: np.ndarray
    ) -> tuple[float, Any]:
        assert isinstance(plan, PairwisePlan) and plan.design is not None
        k2, u2 = plan.design.sigma_pairwise, plan.design.sigma_individual
        adj, k = plan.adjacency(), len(plan.client_ids)
        residual = float("nan")
        if (~late).any():
            residual = ld.topology_residual_variance(
                adj,
                n_clients=k,
                stragglers=np.flatnonzero(late),
                sigma_pairwise=k2,
                sigma_individual=u2,
            )
        effective = ld.topology_colluder_residual_variance(
            adj,
            n_clients=k,
            colluders=np.flatnonzero(colluders),
            sigma_pairwise=k2,
            sigma_individual=u2,
        )
        return residual, effective
