"""The model's per-round economics: what the incentive bought and paid, measured every round.

``FedGameModel`` builds an :class:`EconomicsMonitor` when its incentive declares
:class:`~fedgame.mechanisms.base.ReportsOutcome` and calls :meth:`EconomicsMonitor.measure`
in phase 10 (collect), after the game monitor. It reads the
:class:`~fedgame.game.economics.RoundOutcome` of the round's
:class:`~fedgame.mechanisms.base.Settlement` (``model.server.settlement``), asks an incentive
that declares :class:`~fedgame.mechanisms.base.MeasuresDeviation` for the deviation gains of a
sample of the round's clients (``game.economics.regret_sample``, drawn from the seed plan's
``economics`` stream, so no other draw moves) given that settlement and the round's fault
draw, and computes the rounds-table columns
:data:`ECONOMICS_COLUMNS` with the pure functions of :mod:`fedgame.game.economics`.

Every column is a number in every round: a round in which nothing was bought (no outcome, or
an empty one) writes zeros, except ``econ_fairness`` (NaN without a contribution estimate in
``model.state.contributions``, or when nobody was paid or valued) and the regret columns of an
incentive that does not measure deviations (NaN: not measured). Definitions and units:
docs/economics.md.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from fedgame.game import economics as econ
from fedgame.game.rules import EconomicsRules
from fedgame.mechanisms.base import MeasuresDeviation, ReportsOutcome

ECONOMICS_COLUMNS = (
    "econ_units",
    "econ_sellers",
    "econ_server_cost",
    "econ_true_cost",
    "econ_client_surplus",
    "econ_value",
    "econ_welfare",
    "econ_ir_violations",
    "econ_regret_max",
    "econ_regret_mean",
    "econ_regret_sampled",
    "econ_fairness",
    "econ_accuracy_per_cost",
    "econ_cost_to_date",
    "econ_accuracy_per_cost_to_date",
)


class EconomicsMonitor:
    """Writes :data:`ECONOMICS_COLUMNS` each round for an incentive that reports its outcome.

    Args:
        rules: the scenario's ``game.economics`` settings (value of accuracy, sample size).
        incentive: the incentive plug-in (declares ``ReportsOutcome``; ``MeasuresDeviation``
            optionally).

    The to-date figures start from the test accuracy the first round was played at (the model
    as built). With ``training.eval_every`` k > 1 a round between evaluations has no accuracy:
    its accuracy value and gain are 0, and the round that next measures the model books
    everything gained since the last measurement, so sums over rounds and the to-date
    figures are those of k = 1 at every measured round (at k = 1 each round books its own).
    """

    round_columns: tuple[str, ...] = ECONOMICS_COLUMNS

    def __init__(self, rules: EconomicsRules, *, incentive: ReportsOutcome) -> None:
        self.rules = rules
        self.incentive = incentive
        self.deviations: MeasuresDeviation | None = (
            incentive if isinstance(incentive, MeasuresDeviation) else None
        )
        self.start_accuracy = math.nan
        self.last_measured = math.nan  # the latest measured test accuracy
        self.cost_to_date = 0.0
        self._round: dict[str, float] = {}

    @classmethod
    def of(cls, rules: EconomicsRules, *, incentive: Any) -> EconomicsMonitor | None:
        """The monitor for ``incentive``, or None when it does not report outcomes."""
        reports = isinstance(incentive, ReportsOutcome) and bool(incentive.reports_outcome)
        return cls(rules, incentive=incentive) if reports else None

    def measure(self, model: Any) -> None:
        """The round's economics (module doc), from the outcome of the round's settlement."""
        state = model.state
        outcome = model.server.settlement.outcome or econ.RoundOutcome.empty()
        if math.isnan(self.start_accuracy):  # the first round: the model as built
            self.start_accuracy = self.last_measured = float(state.info.test_accuracy)
        before, after = self.last_measured, float(model.test_accuracy)
        if not math.isnan(after):
            self.last_measured = after
        value = econ.accuracy_value(before, after, value_per_point=self.rules.value_per_point)
        cost = econ.server_cost(outcome)
        self.cost_to_date += cost
        gain_points = 100.0 * (after - before)
        to_date = 100.0 * (self.last_measured - self.start_accuracy)
        units = np.asarray(outcome.units, dtype=float)
        regret_max, regret_mean, sampled = self._regret(outcome.ids, model)
        self._round = {
            "econ_units": float(units.sum()),
            "econ_sellers": int(np.count_nonzero(units > 0)),
            "econ_server_cost": cost,
            "econ_true_cost": float(np.sum(outcome.true_cost)),
            "econ_client_surplus": float(econ.surplus(outcome).sum()),
            "econ_value": value,
            "econ_welfare": econ.social_welfare(value, outcome),
            "econ_ir_violations": econ.ir_violations(outcome),
            "econ_regret_max": regret_max,
            "econ_regret_mean": regret_mean,
            "econ_regret_sampled": sampled,
            "econ_fairness": econ.payment_fairness(
                outcome.ids, outcome.payments, state.contributions
            ),
            "econ_accuracy_per_cost": econ.accuracy_per_cost(gain_points, cost),
            "econ_cost_to_date": self.cost_to_date,
            "econ_accuracy_per_cost_to_date": econ.accuracy_per_cost(to_date, self.cost_to_date),
        }

    def _regret(self, ids: np.ndarray, model: Any) -> tuple[float, float, int]:
        """(max, mean, sample size) of the sampled clients' deviation gains (NaN: the incentive
        does not measure deviations; zeros: nobody to sample)."""
        if self.deviations is None:
            return math.nan, math.nan, 0
        size = self.rules.regret_sample
        if not ids.size or size == 0:
            return 0.0, 0.0, 0
        rng = model.plan.rng("economics", model.state.info.round)
        sample = econ.deviation_sample(ids, size, rng=rng)
        gains = self.deviations.deviation_gains(
            sample, settlement=model.server.settlement, faults=model.state.faults, rng=rng
        )
        gains = np.asarray(gains, dtype=float)
        if gains.shape != sample.shape or not np.all(np.isfinite(gains)):
            raise RuntimeError(
                f"incentive {type(self.incentive).__name__}.deviation_gains returned "
                f"{gains.tolist()[:10]} for {sample.size} clients: one finite gain each"
            )
        top, mean = econ.regret_summary(np.maximum(gains, 0.0))
        return top, mean, int(sample.size)

    def round_metrics(self) -> dict[str, float]:
        return dict(self._round)
