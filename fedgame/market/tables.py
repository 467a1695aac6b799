"""The market's tables: one rounds row per round and server, one clients row per round and
client (whom it served, its budget and pay per server).

Rounds columns (besides the incentive's own: reward, sum_rho, players, server_cost_*,
payments_total, welfare, ...): ``server``; ``participants`` (clients that answered its
offer), ``selected`` and ``uploaded`` (clients whose update it received);
``market_share`` = Σρ delivered to the server / Σρ delivered to all servers (the clients'
privacy supply it won); ``client_share`` its share of the (client, server) deliveries;
``hhi`` = Σ_s market_share_s² (Herfindahl-Hirschman index on [1/S, 1], the same on each
server's row of a round); ``leaders_converged``/``leaders_iterations`` (the leaders' best
responses), ``followers_converged``/``followers_iterations`` (the clients' joint play);
``withdrawn_budget``; ``epsilon_spent_mean``/``epsilon_spent_max`` over all clients (one
ledger); ``test_accuracy``/``test_loss`` of the server's own global model; ``wall_time_s``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from fedgame.columns import cast_columns
from fedgame.mechanisms.base import ReportsRounds

if TYPE_CHECKING:
    from fedgame.market.model import MarketModel


def herfindahl(shares: np.ndarray) -> float:
    """Σ shares² of shares that sum to 1 (NaN when nobody supplied anything)."""
    shares = np.asarray(shares, dtype=float)
    return float(np.sum(shares**2)) if np.isfinite(shares).all() else math.nan


class MarketRecorder:
    """Rows of both tables, round by round; ``frames`` gives them as DataFrames."""

    def __init__(self, servers: Sequence[str]) -> None:
        self.servers = tuple(servers)
        self.rounds: list[dict[str, Any]] = []
        self.clients_rows: list[pd.DataFrame] = []
        self.clients = "all"  # every client every round (the manifest's clients_table)

    def record(self, model: MarketModel, *, spent_before: np.ndarray) -> None:
        t = model.steps
        servers = model.servers
        metrics = [  # the round's settlement's (an incentive of the older contract: its own)
            srv.incentive.round_metrics()
            if isinstance(srv.incentive, ReportsRounds)
            else srv.now.settlement.round_metrics
            for srv in servers
        ]
        supply = np.array([float(m.get("sum_rho", 0.0) or 0.0) for m in metrics])
        delivered = [
            srv.now.selected[srv.now.sent] if srv.now.plan is not None else np.zeros(0, np.int64)
            for srv in servers
        ]
        counts = np.array([len(d) for d in delivered], dtype=float)
        total = supply.sum()
        share = supply / total if total > 0 else np.full(len(servers), math.nan)
        cshare = counts / counts.sum() if counts.sum() > 0 else np.full(len(servers), math.nan)
        hhi = herfindahl(share)
        spent = model.budget.spent
        for s, srv in enumerate(servers):
            row: dict[str, Any] = {"round": t, "server": srv.name}
            row.update({k: float(v) for k, v in metrics[s].items()})
            row.update(
                reward=float(srv.now.offer.reward),
                participants=int(srv.table.participating.sum()),
                selected=len(srv.now.selected),
                uploaded=int(counts[s]),
                market_share=float(share[s]),
                client_share=float(cshare[s]),
                hhi=hhi,
                leaders_converged=bool(model.leaders.converged),
                leaders_iterations=int(model.leaders.iterations),
                followers_converged=bool(model.followers.converged),
                followers_iterations=int(model.followers.iterations),
                withdrawn_budget=int(srv.now.withdrawn),
                epsilon_spent_mean=float(spent.mean()),
                epsilon_spent_max=float(spent.max()),
                test_accuracy=float(srv.test_accuracy),
                test_loss=float(srv.test_loss),
                wall_time_s=float(model.round_wall_time),
            )
            self.rounds.append(row)
        n = len(spent)
        ids = np.arange(n)
        table = servers[0].table
        cols: dict[str, Any] = {"round": np.full(n, t), "client_id": ids}
        served = np.zeros((len(servers), n), dtype=bool)
        rho_total, pay_total = np.zeros(n), np.zeros(n)
        for s, srv in enumerate(servers):
            served[s, delivered[s]] = True
            rho = np.where(served[s], np.nan_to_num(srv.table.response_rho), 0.0)
            pay = np.zeros(n)
            if srv.now.payments:
                keys = np.fromiter(srv.now.payments.keys(), np.int64, len(srv.now.payments))
                pay[keys] = np.fromiter(srv.now.payments.values(), float, len(keys))
            cols[f"rho_{srv.name}"], cols[f"payment_{srv.name}"] = rho, pay
            rho_total += rho
            pay_total += pay
        names = np.array(self.servers, dtype=object)
        cols["served"] = [",".join(names[served[:, i]]) for i in range(n)]
        cols["servers_served"] = served.sum(axis=0)
        charged = spent - spent_before
        cols.update(
            rho=rho_total,
            payment=pay_total,
            epsilon_charged=charged,
            epsilon_spent=spent.copy(),
            epsilon_total=table.epsilon_total.copy(),
            privacy_value=table.privacy_value.copy(),
            utility=pay_total - table.privacy_value * charged,
        )
        self.clients_rows.append(pd.DataFrame(cols))

    def frames(self, last_step: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
        """The rounds and clients tables (up to ``last_step``), each count and flag column
        in the dtype the column dictionary gives it (:func:`fedgame.columns.cast_columns`)."""
        rounds = pd.DataFrame(self.rounds)
        clients = (
            pd.concat(self.clients_rows, ignore_index=True) if self.clients_rows else pd.DataFrame()
        )
        if last_step is not None and len(rounds):
            rounds = rounds[rounds["round"] <= last_step].reset_index(drop=True)
            clients = clients[clients["round"] <= last_step].reset_index(drop=True)
        return cast_columns(rounds, "rounds"), cast_columns(clients, "clients")
