"""Deadline stragglers: a client straggles when compute plus upload time passes the deadline."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, NonNegativeFloat, PositiveFloat, PositiveInt

from fedgame import reads
from fedgame.mechanisms.base import FaultDraw
from fedgame.mechanisms.faults.common import (
    LinkConfig,
    check_server_reachable,
    draw_links,
    poisson_binomial,
)
from fedgame.registry import register
from fedgame.views import ClientValues, ClientView, RoundInfo, column_of

_Z = np.linspace(-9.0, 9.0, 6001)
#: standard normal density on the grid times its step (scipy's ``norm.pdf`` formula, written
#: out so that importing this plug-in does not import scipy.stats, a second of start-up)
_PHI = np.exp(-(_Z**2) / 2.0) / np.sqrt(2 * np.pi) * (_Z[1] - _Z[0])


def deadline_miss_probability(
    *, work_time: float, compute_sigma: float, upload_latency: float, deadline: float
) -> float:
    """P(a X + L > D) with X = exp(sigma Z) (lognormal slowness) and L ~ Exp(mean lambda).

    Closed form without latency: 1 - Phi(ln(D/a)/sigma); with latency, E_X[exp(-(D - aX)+/lambda)]
    integrated numerically over Z on a fine grid. ``a`` = time per sample x work.
    """
    a, s, lam, d = work_time, compute_sigma, upload_latency, deadline
    if s == 0.0:
        if a >= d:
            return 1.0
        return 0.0 if lam == 0.0 else math.exp(-(d - a) / lam)
    if lam == 0.0:
        from scipy.stats import norm

        return float(norm.sf(math.log(d / a) / s))
    slack = d - a * np.exp(s * _Z)
    tail = np.where(slack <= 0, 1.0, np.exp(-np.clip(slack, 0, None) / lam))
    return float(np.sum(tail * _PHI))


@register("faults", "deadline", reads=reads.edges)
class DeadlineStragglers:
    """Per round, client i computes for ``time_per_sample`` x work_i x X_i seconds,
    X_i ~ LogNormal(0, ``compute_sigma``), then uploads in L_i ~ Exp(mean ``upload_latency``)
    seconds; it straggles when the total exceeds ``deadline``.

    work_i is its dataset size (``work="dataset"``) or ``work_samples`` for everyone
    (``work="constant"``, e.g. local_steps x batch_size). Per-client ``straggle_prob`` is
    ignored. Times go to ``details`` and to the client columns ``compute_time`` and
    ``finish_time`` (seconds of simulated time).
    """

    client_columns = ("compute_time", "finish_time")

    class Config(LinkConfig):
        time_per_sample: PositiveFloat = Field(
            0.001, description="seconds of simulated compute per training sample, > 0"
        )
        work: Literal["dataset", "constant"] = Field(
            "dataset", description="samples of work: the client's dataset size, or work_samples"
        )
        work_samples: PositiveInt = Field(
            100, description="samples of work per client when work is constant, >= 1"
        )
        compute_sigma: NonNegativeFloat = Field(
            0.5, description="lognormal slowness: compute time x exp(sigma Z), sigma >= 0"
        )
        upload_latency: NonNegativeFloat = Field(
            0.1, description="mean of the exponential upload time, seconds, >= 0"
        )
        deadline: PositiveFloat = Field(
            1.0, description="seconds after which a client's upload is a straggler, > 0"
        )

    def __init__(self, config: Config) -> None:
        self.config = config

    @staticmethod
    def check_scenario(config: Config, scenario: Any, *, key: str) -> None:
        check_server_reachable(config.link_failure, key=f"{key}.link_failure")

    def _work_time(self, clients: Sequence[ClientView]) -> np.ndarray:
        cfg = self.config
        if cfg.work == "dataset":
            work = column_of(clients, "dataset_size")
        else:
            work = np.full(len(clients), float(cfg.work_samples))
        return cfg.time_per_sample * work

    def miss_probabilities(self, clients: Sequence[ClientView]) -> np.ndarray:
        cfg = self.config
        return np.array(
            [
                deadline_miss_probability(
                    work_time=a,
                    compute_sigma=cfg.compute_sigma,
                    upload_latency=cfg.upload_latency,
                    deadline=cfg.deadline,
                )
                for a in self._work_time(clients)
            ]
        )

    def straggler_pmf(self, clients: Sequence[ClientView], *, graph: Any = None) -> np.ndarray:
        return poisson_binomial(self.miss_probabilities(clients))

    def draw(
        self,
        clients: Sequence[ClientView],
        *,
        graph: Any = None,
        info: RoundInfo,
        rng: np.random.Generator,
    ) -> FaultDraw:
        n, cfg = len(clients), self.config
        link_up, failed = draw_links(
            n, graph, link_failure=cfg.link_failure, edge_failure=cfg.edge_failure, rng=rng
        )
        compute = self._work_time(clients) * np.exp(cfg.compute_sigma * rng.standard_normal(n))
        upload = rng.exponential(cfg.upload_latency, n) if cfg.upload_latency > 0 else np.zeros(n)
        finish = compute + upload
        details = {"compute_time": compute, "upload_time": upload, "finish_time": finish}
        return FaultDraw(link_up, finish > cfg.deadline, failed, details)

    def draw_metrics(self, draw: FaultDraw) -> dict[str, ClientValues]:
        """Every client's compute and finish time of the round's ``draw`` (``ReportsDraw``:
        written without making the client active this round)."""
        if draw.details is None:
            return {}
        details = draw.details
        return {
            col: ClientValues(np.arange(len(details[col])), details[col])
            for col in self.client_columns
        }
