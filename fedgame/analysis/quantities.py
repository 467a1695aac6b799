"""What the result columns measure: display names, units and the range each value can take.

Figures and reports use :func:`quantity` for axis labels and titles, and clip confidence
intervals to :attr:`Quantity.low`/:attr:`Quantity.high`: the true mean of an accuracy lies in
[0, 1], so intersecting a t-interval with that range keeps its coverage while dropping the
impossible part (with two replicates, t_{0.975,1} = 12.7 makes raw bands run far outside it).
Columns not listed get their own name and no bounds. :func:`key_label` turns a dotted grid key
into a short readable name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

INF = math.inf


@dataclass(frozen=True)
class Quantity:
    """A measured quantity: ``name`` (sentence case), ``unit`` ("" if none), value range."""

    name: str
    unit: str = ""
    low: float = -INF
    high: float = INF

    @property
    def label(self) -> str:
        """Axis label: ``name (unit)``."""
        return f"{self.name} ({self.unit})" if self.unit else self.name

    @property
    def range_text(self) -> str:
        """``[0, 1]``, ``[0, ∞)``; empty for an unbounded quantity."""
        if math.isinf(self.low) and math.isinf(self.high):
            return ""
        lo = "(-∞" if math.isinf(self.low) else f"[{self.low:g}"
        hi = "∞)" if math.isinf(self.high) else f"{self.high:g}]"
        return f"{lo}, {hi}"

    def clip(self, values: np.ndarray) -> np.ndarray:
        """``values`` clipped to [low, high] (NaN stays NaN)."""
        return np.clip(np.asarray(values, dtype=float), self.low, self.high)


_CLIENTS = "fraction of clients"

QUANTITIES: dict[str, Quantity] = {
    "test_accuracy": Quantity("Test accuracy", "fraction correct", 0.0, 1.0),
    "final_accuracy": Quantity("Final test accuracy", "fraction correct", 0.0, 1.0),
    "test_loss": Quantity("Test loss", "cross-entropy, nats", 0.0),
    "train_loss": Quantity("Mean training loss", "cross-entropy, nats", 0.0),
    "participation": Quantity("Participation", _CLIENTS, 0.0, 1.0),
    "participation_rate": Quantity("Mean participation", _CLIENTS, 0.0, 1.0),
    "upload_rate": Quantity("Mean upload rate", _CLIENTS, 0.0, 1.0),
    "participants": Quantity("Participants", "clients", 0.0),
    "selected": Quantity("Selected clients", "clients", 0.0),
    "uploaded": Quantity("Delivered updates", "clients", 0.0),
    "stragglers": Quantity("Stragglers", "clients", 0.0),
    "rounds_to_target": Quantity("Rounds to target accuracy", "rounds", 1.0),
    "rounds_run": Quantity("Rounds run", "rounds", 0.0),
    "stretch_accuracy": Quantity(
        "Test accuracy, converged-stretch mean", "fraction correct", 0.0, 1.0
    ),
    "noise_norm_over_clip": Quantity(
        "Noise norm of the released average", "clipping bounds C", 0.0
    ),
    "knife_edge_impact": Quantity(
        "Change of R* without the marginal player", "fraction of R*", 0.0
    ),
    "failed_links": Quantity("Failed client-server links", "links", 0.0),
    "failed_edges": Quantity("Failed client-client links", "links", 0.0),
    "trend": Quantity("Growth of the settled play", "fraction per round"),
    "epsilon_spent": Quantity("ε spent per client", "privacy loss ε", 0.0),
    "epsilon_spent_mean": Quantity("Mean ε spent", "privacy loss ε", 0.0),
    "epsilon_spent_max": Quantity("Largest ε spent", "privacy loss ε", 0.0),
    "final_epsilon_mean": Quantity("Final mean ε spent", "privacy loss ε", 0.0),
    "final_epsilon_max": Quantity("Final largest ε spent", "privacy loss ε", 0.0),
    "epsilon_p10": Quantity("ε spent, 10th percentile", "privacy loss ε", 0.0),
    "epsilon_p50": Quantity("ε spent, median", "privacy loss ε", 0.0),
    "epsilon_p90": Quantity("ε spent, 90th percentile", "privacy loss ε", 0.0),
    "reward": Quantity("Leader's reward R_t", "payment units", 0.0),
    "reward_total": Quantity("Payments in the round", "payment units", 0.0),
    "total_reward": Quantity("Total payments", "payment units", 0.0),
    "server_cost": Quantity("Server cost", "cost units"),
    "sum_rho": Quantity("Σρ, the clients' zCDP levels", "ρ per round", 0.0),
    "welfare": Quantity("Welfare", "utility units"),
    "nash_gap_max": Quantity("Largest Nash gap", "utility units", 0.0),
    "nash_gap_mean": Quantity("Mean Nash gap", "utility units", 0.0),
    # the incentive families' own columns (fedgame.analysis.mechanism)
    "price": Quantity("Posted price", "reward per unit ρ", 0.0),
    "nu_error": Quantity("Belief error", "mean |log ν̂ − log ν|", 0.0),
    "bids": Quantity("Bids received", "bids", 0.0),
    "winners": Quantity("Units bought", "winners", 0.0),
    "clearing_price": Quantity("Clearing price", "reward per unit ρ", 0.0),
    "shading": Quantity("Bid shading", "mean b/κ − 1", -1.0),
    "menu_items": Quantity("Menu items", "items", 0.0),
    "menu_rho_low": Quantity("Smallest menu ρ_k", "ρ", 0.0),
    "menu_rho_high": Quantity("Largest menu ρ_k", "ρ", 0.0),
    "menu_pay_low": Quantity("Smallest menu payment r_k", "reward units", 0.0),
    "menu_pay_high": Quantity("Largest menu payment r_k", "reward units", 0.0),
    "shapley_sum": Quantity("Σ Shapley estimates", "coalition value v"),
    "shapley_evals": Quantity("Coalitions evaluated", "coalitions", 0.0),
    # the economics columns and the report's per-run economics (fedgame.analysis.economics)
    "econ_cost_to_date": Quantity("Server cost to date", "reward units", 0.0),
    "econ_welfare": Quantity("Welfare of the round", "reward units"),
    "econ_regret_max": Quantity("Largest sampled regret", "reward units", 0.0),
    "econ_fairness": Quantity("Payment fairness", "1 − ½·L1", 0.0, 1.0),
    "econ_total_cost": Quantity("Server cost, Σ payments over the run", "reward units", 0.0),
    "econ_total_surplus": Quantity("Clients' surplus over the run", "reward units"),
    "econ_total_welfare": Quantity("Welfare over the run", "reward units"),
    "econ_ir_total": Quantity("IR violations over the run", "client-rounds", 0.0),
    "econ_regret_worst": Quantity("Largest per-round regret", "reward units", 0.0),
    "econ_regret_typical": Quantity("Mean of the rounds' largest regret", "reward units", 0.0),
    "econ_fairness_mean": Quantity("Mean payment fairness", "", 0.0, 1.0),
    "econ_points_per_cost": Quantity("Accuracy gained per unit cost", "points per reward unit"),
    # a market's columns and the sweep report's per-server figures (fedgame.analysis.market)
    "market_share": Quantity("Market share", "fraction of the ρ delivered", 0.0, 1.0),
    "client_share": Quantity("Client share", "fraction of the deliveries", 0.0, 1.0),
    "hhi": Quantity("Herfindahl index", "Σ share²", 0.0, 1.0),
    "hhi_mean": Quantity("Mean Herfindahl index", "Σ share², rounds with trade", 0.0, 1.0),
    "payments_total": Quantity("Payments in the round", "payment units", 0.0),
    "server_payments": Quantity("Server's payments over the run", "payment units", 0.0),
    "server_cost_bought": Quantity("Server cost, rounds it bought", "cost units"),
    "rounds_bought": Quantity("Rounds the server bought in", "rounds", 0.0),
    "total_payments": Quantity("Payments over the run, all servers", "payment units", 0.0),
    "leaders_converged_share": Quantity(
        "Rounds whose leaders' best responses converged", "fraction of rounds", 0.0, 1.0
    ),
    "rounds_traded": Quantity("Rounds with trade", "rounds", 0.0),
}


def quantity(column: str) -> Quantity:
    """The :class:`Quantity` of a column (its own name, unbounded, when not listed)."""
    return QUANTITIES.get(column, Quantity(column.replace("_", " ")))


def key_label(key: str) -> str:
    """A short name for a dotted grid key: its last part (the family for ``X.kind``).

    >>> key_label("population.straggle_prob"), key_label("incentive.kind"), key_label("seed")
    ('straggle_prob', 'incentive', 'seed')
    """
    parts = key.split(".")
    if len(parts) > 1 and parts[-1] == "kind":
        return parts[-2]
    return parts[-1]


def key_labels(keys: list[str] | tuple[str, ...]) -> dict[str, str]:
    """Short names for several keys, falling back to the full key where two would clash."""
    short = {k: key_label(k) for k in keys}
    clashes = {s for s in short.values() if list(short.values()).count(s) > 1}
    return {k: (k if s in clashes else s) for k, s in short.items()}


def is_noise(value: float, scale: float, *, rel: float = 1e-12) -> bool:
    """Whether ``value`` is floating-point noise: ``|value| < rel · max(1, |scale|)``.

    >>> is_noise(2e-18, 0.3), is_noise(1e-6, 0.3)
    (True, False)
    """
    return abs(value) < rel * max(1.0, abs(scale))


def format_number(value: float, *, scale: float = 1.0, digits: int = 4) -> str:
    """``value`` to ``digits`` significant digits; noise (see :func:`is_noise`) prints as 0,
    NaN as a dash.

    >>> format_number(2.168e-18, scale=0.002), format_number(0.123456), format_number(-0.0)
    ('0', '0.1235', '0')
    """
    if math.isnan(value):
        return "–"
    if is_noise(value, scale):
        return "0"
    return f"{value:.{digits}g}"


def plural(n: int, word: str) -> str:
    """``1 replicate``, ``2 replicates``.

    >>> plural(1, "replicate"), plural(3, "run")
    ('1 replicate', '3 runs')
    """
    return f"{n} {word}" if n == 1 else f"{n} {word}s"
