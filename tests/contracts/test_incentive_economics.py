"""Economics contract of every registered incentive, drawn from the registry.

Every incentive reports its round (``ReportsOutcome``: its ``Settlement`` carries the
outcome) and measures deviations (``MeasuresDeviation``), so the economics columns are
written for every family. Run with its declared example, the outcome of each settlement
describes exactly what ``settle`` paid (delivered clients only, the same amounts), with
non-negative units and true costs, and its deviation gains are finite, one per client asked,
and never negative.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from contracts.test_behaviour import run_with, spy

from fedgame import registry
from fedgame.game.economics import RoundOutcome
from fedgame.game.economics_monitor import ECONOMICS_COLUMNS
from fedgame.mechanisms.base import MeasuresDeviation, Settlement

registry.ensure_loaded()
INCENTIVES = registry.names("incentive")


@pytest.mark.parametrize("name", INCENTIVES)
def test_every_incentive_declares_the_economics_capabilities(name):
    cls = registry.entry("incentive", name).cls
    assert getattr(cls, "reports_outcome", False) is True, f"{name} does not report its outcome"
    assert issubclass(cls, MeasuresDeviation), f"{name} does not measure deviations"


@pytest.mark.parametrize("name", INCENTIVES)
def test_the_outcome_is_what_settle_paid(tiny, monkeypatch, name):
    cls = registry.entry("incentive", name).cls
    settled = spy(monkeypatch, cls, "settle")
    asked = spy(monkeypatch, cls, "deviation_gains")
    model = run_with(tiny, "incentive", name)
    assert len(settled) == 3, f"{name}: one settle a round"
    for args, kwargs, settlement in settled:
        assert isinstance(settlement, Settlement)
        delivered = args[1] if len(args) > 1 else kwargs["delivered"]
        ids = {r.client_id for r in delivered}
        paid, out = settlement.payments, settlement.outcome
        if out is None:
            assert not any(paid.values()), f"{name} paid but reports that nothing was bought"
            continue
        assert isinstance(out, RoundOutcome)
        n = out.ids.size
        for field in ("units", "payments", "true_cost"):
            values = np.asarray(getattr(out, field), dtype=float)
            assert values.shape == (n,), f"{name}: {field} not aligned with ids"
            assert np.isfinite(values).all() and (values >= 0).all(), f"{name}: {field}"
        assert set(out.ids.tolist()) <= ids, f"{name}'s outcome names clients that did not deliver"
        mine = dict(zip(out.ids.tolist(), np.asarray(out.payments, dtype=float).tolist()))
        for cid, amount in paid.items():
            assert math.isclose(mine.get(cid, 0.0), amount, rel_tol=1e-12, abs_tol=1e-15)
    for args, kwargs, gains in asked:
        assert isinstance(kwargs["settlement"], Settlement)
        sample = np.asarray(args[0] if args else kwargs["ids"])
        gains = np.asarray(gains, dtype=float)
        assert gains.shape == sample.shape and np.isfinite(gains).all()
        assert (gains >= 0).all(), f"{name}: a negative deviation gain"
    rounds = model.datacollector.round_frame()
    assert set(ECONOMICS_COLUMNS) <= set(rounds.columns)
    assert rounds[[c for c in ECONOMICS_COLUMNS if c != "econ_fairness"]].notna().all().all()
    np.testing.assert_allclose(rounds["econ_server_cost"], rounds["reward_total"], rtol=1e-12)
