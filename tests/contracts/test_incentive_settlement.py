"""Settlement contract of every registered incentive: the round lives in values, not on the leader.

Run with its declared example, every ``settle`` returns a ``Settlement`` that pays exactly the
delivered ids and names the offer it settled. What a later phase needs travels in the offer's
``terms``, the cleared offer and the valuation, so the same inputs give the same result:

* settling the round again on the same instance gives the same settlement;
* a fresh instance (prepared as the model prepares it, never offered) settles it the same;
* an instance that played other rounds first (a model two rounds ahead) settles it the same,
  measures the same deviation gains from it, and clears the round's answers the same;
* that instance's offer on the round's market is the model's, but for the leaders' declared
  cross-round memory: the previous round's Σρ in a contest's plan (``sum_rho_prev``) and the
  reward of ``random``, drawn from the leader's own stream.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from contracts.test_behaviour import build_with

from fedgame import registry
from fedgame.mechanisms.base import Cleared, Settlement
from fedgame.views import Offer, Responses

registry.ensure_loaded()
INCENTIVES = registry.names("incentive")

#: plan keys that carry a leader's cross-round memory (the previous round's Σρ)
MEMORY_PLAN_KEYS = frozenset({"sum_rho_prev"})
#: incentives whose reward is drawn from their own random stream (prepared once, then advanced)
DRAWN_REWARD = frozenset({"random"})


def differences(a: Any, b: Any, where: str = "") -> list[str]:
    """Where ``a`` and ``b`` differ (NaN equals NaN; arrays, mappings, dataclasses, sequences
    compared element by element); empty when they are the same."""
    if isinstance(a, Responses) and isinstance(b, Responses):
        names = ("ids", "participate", "epsilon", "rho", "bid", "reason")
        return [d for n in names for d in differences(a.column(n), b.column(n), f"{where}.{n}")]
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        if type(a) is not type(b):
            return [f"{where}: {type(a).__name__} != {type(b).__name__}"]
        return [
            d
            for f in dataclasses.fields(a)
            for d in differences(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
        ]
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return [f"{where}: shape {a.shape} != {b.shape}"]
        nan_aware = a.dtype.kind == "f" and b.dtype.kind == "f"
        same = np.array_equal(a, b, equal_nan=nan_aware)
        return [] if same else [f"{where}: {a.tolist()[:8]} != {b.tolist()[:8]}"]
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        if set(a) != set(b):
            return [f"{where}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in differences(a[k], b[k], f"{where}[{k!r}]")]
    if isinstance(a, Sequence) and not isinstance(a, str) and isinstance(b, Sequence):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{where}[{i}]")]
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return []
    return [] if a == b else [f"{where}: {a!r} != {b!r}"]


def without_memory(offer: Offer, name: str) -> Offer:
    """``offer`` less what declared cross-round memory may change (module doc)."""
    plan = {k: v for k, v in offer.plan.items() if k not in MEMORY_PLAN_KEYS}
    reward = math.nan if name in DRAWN_REWARD else offer.reward
    return dataclasses.replace(offer, plan=plan, reward=reward)


def check_settled_from_inputs(tiny: dict[str, Any], monkeypatch: Any, name: str) -> None:
    """Run incentive ``name``'s example three rounds, probing each call (module doc)."""
    cls = registry.entry("incentive", name).cls
    model = build_with(tiny, "incentive", name)
    ahead = build_with(tiny, "incentive", name)  # has played other rounds when probed
    for _ in range(2):
        ahead.step()
    fresh = build_with(tiny, "incentive", name).server.incentive  # prepared, never offered
    other = ahead.server.incentive
    offer, clear, settle = cls.offer, getattr(cls, "clear", None), cls.settle
    gains = cls.deviation_gains
    seen = dict.fromkeys(("offer", "clear", "settle", "deviation_gains", "bought"), 0)

    def probed_offer(self: Any, market: Any, *, info: Any) -> Offer:
        made = offer(self, market, info=info)
        if self is model.server.incentive:
            seen["offer"] += 1
            again = offer(other, market, info=info)
            assert isinstance(made, Offer)
            found = differences(without_memory(made, name), without_memory(again, name))
            assert not found, f"{name}: round {info.round}'s offer differs: {found[:3]}"
        return made

    def probed_clear(self: Any, made: Offer, responses: Responses, *, info: Any) -> Cleared:
        assert clear is not None
        cleared = clear(self, made, responses, info=info)
        if self is model.server.incentive:
            seen["clear"] += 1
            assert isinstance(cleared, Cleared)
            found = differences(cleared, clear(other, made, responses, info=info))
            assert not found, f"{name}: round {info.round}'s clearing differs: {found[:3]}"
        return cleared

    def probed_settle(self: Any, made: Offer, delivered: Any, **kwargs: Any) -> Settlement:
        settled = settle(self, made, delivered, **kwargs)
        if self is model.server.incentive:
            seen["settle"] += 1
            assert isinstance(settled, Settlement)
            ids = {r.client_id for r in delivered}
            assert set(settled.payments) == ids, f"{name} pays other ids than the delivered"
            assert settled.offer is made
            seen["bought"] += settled.outcome is not None and settled.outcome.ids.size > 0
            for probe, who in ((self, "again"), (fresh, "fresh"), (other, "ahead")):
                found = differences(settled, settle(probe, made, delivered, **kwargs))
                assert not found, f"{name}: settled {who}, the settlement differs: {found[:3]}"
        return settled

    def probed_gains(self: Any, ids: np.ndarray, **kwargs: Any) -> np.ndarray:
        got = gains(self, ids, **kwargs)
        if self is model.server.incentive:
            seen["deviation_gains"] += 1
            kwargs["rng"] = np.random.default_rng(0)
            again = gains(other, ids, **kwargs)
            assert not differences(np.asarray(got), np.asarray(again)), f"{name}: gains differ"
        return got

    monkeypatch.setattr(cls, "offer", probed_offer)
    if clear is not None:
        monkeypatch.setattr(cls, "clear", probed_clear)
    monkeypatch.setattr(cls, "settle", probed_settle)
    monkeypatch.setattr(cls, "deviation_gains", probed_gains)
    for _ in range(3):
        model.step()
    assert seen["offer"] == seen["settle"] == 3
    assert seen["clear"] == (3 if clear is not None else 0)
    if seen["bought"]:  # the economics monitor samples the clients of a round's outcome
        assert seen["deviation_gains"] >= 1, f"{name}: no deviation gains measured"


@pytest.mark.parametrize("name", INCENTIVES)
def test_the_round_is_settled_from_its_inputs_alone(tiny, monkeypatch, name):
    check_settled_from_inputs(tiny, monkeypatch, name)


def test_the_probe_finds_state_kept_between_phases(tiny, monkeypatch, scratch_registry):
    """The contract can fail: a leader that reports what it noted at its last offer (the
    round, kept on ``self``) settles a round of another model's differently."""
    from fedgame.mechanisms.incentive.qi_dpfl import FixedReward

    class Noting(FixedReward):
        """``fixed``, reporting the round of the last offer it made, kept on ``self``."""

        noted = 0
        round_columns = (*FixedReward.round_columns, "offered_in")

        def offer(self, market: Any, *, info: Any) -> Offer:
            self.noted = info.round
            return super().offer(market, info=info)

        def settle(self, made: Offer, delivered: Any, *, info: Any) -> Settlement:
            settled = super().settle(made, delivered, info=info)
            metrics = {**settled.round_metrics, "offered_in": float(self.noted)}
            return dataclasses.replace(settled, round_metrics=metrics)

    scratch_registry.register("incentive", "_noting")(Noting)
    with pytest.raises(AssertionError, match=r"settled (fresh|ahead)"):
        check_settled_from_inputs(tiny, monkeypatch, "_noting")
