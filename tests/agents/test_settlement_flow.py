"""How the round's incentive values flow through the model: the followers get the offer
without the leader's terms, a ``Settlement`` fills the incentive's declared columns, and a
third-party incentive of the older contract (a plain ``{id: payment}`` from ``settle``, its
own ``round_metrics()``) still runs and reports."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from fedgame import registry
from fedgame.mechanisms.base import Settlement
from fedgame.model import FedGameModel
from fedgame.scenario.load import validate
from fedgame.views import MarketView, Offer, Response, RoundInfo, ids_of


def run(tiny: dict[str, Any], rounds: int = 2, **sections: Any) -> FedGameModel:
    data = copy.deepcopy(tiny)
    data.update(rounds=rounds, **sections)
    model = FedGameModel(validate(data))
    for _ in range(rounds):
        model.step()
    return model


def test_the_followers_never_see_the_leaders_terms(tiny, monkeypatch):
    cls = registry.entry("policy", "best_response").cls
    seen: list[Offer] = []
    original = cls.respond_all

    def respond_all(self: Any, offer: Offer, **kwargs: Any) -> Any:
        seen.append(offer)
        return original(self, offer, **kwargs)

    monkeypatch.setattr(cls, "respond_all", respond_all)
    model = run(
        tiny,
        incentive={"kind": "qi_dpfl", "lam": 0.01},
        policy={"kind": "best_response"},
        selection={"kind": "all"},
        privacy={"kind": "zcdp_gaussian", "clip": 1.0},
    )
    assert seen and all(offer.terms is None for offer in seen)
    made = model.server.settlement.offer
    assert made.terms is not None  # the leader settled the offer with its terms
    assert made.public() == seen[-1] and made.public().terms is None


class SettlingLeader:
    """Pays 1 per delivered update; reports their count and flags them (a Settlement)."""

    round_columns = ("paid_count",)
    client_columns = ("paid_flag",)

    def __init__(self, config: object) -> None:
        del config

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        return Offer(reward=1.0)

    def settle(self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo) -> Settlement:
        ids = ids_of(delivered).tolist()
        return Settlement(
            dict.fromkeys(ids, 1.0),
            offer,
            round_metrics={"paid_count": float(len(ids))},
            client_metrics={"paid_flag": dict.fromkeys(ids, 1.0)},
        )


class OlderLeader:
    """The older contract: a plain ``{id: payment}`` and its own ``round_metrics()``."""

    round_columns = ("older_paid",)

    def __init__(self, config: object) -> None:
        del config
        self._paid = 0.0

    def offer(self, market: MarketView, *, info: RoundInfo) -> Offer:
        return Offer(reward=1.0)

    def settle(
        self, offer: Offer, delivered: Sequence[Response], *, info: RoundInfo
    ) -> dict[int, float]:
        paid = dict.fromkeys(ids_of(delivered).tolist(), 0.5)
        self._paid = sum(paid.values())
        return paid

    def round_metrics(self) -> dict[str, float]:
        return {"older_paid": self._paid}


@pytest.mark.parametrize("cls", [SettlingLeader, OlderLeader])
def test_the_incentives_columns_come_from_what_it_reports(tiny, scratch_registry, cls):
    scratch_registry.register("incentive", "_leader")(cls)
    model = run(tiny, rounds=3, incentive={"kind": "_leader"}, policy={"kind": "always"})
    rounds = model.datacollector.round_frame()
    clients = model.datacollector.client_frame()
    assert not [c for c in rounds.columns if c.startswith("econ_")]  # no outcome declared
    assert model.server.settlement.outcome is None
    assert model.server.settlement.payments == model.payments
    if cls is SettlingLeader:
        np.testing.assert_array_equal(rounds["paid_count"], rounds["uploaded"])
        np.testing.assert_allclose(rounds["reward_total"], rounds["uploaded"])
        paid = clients["reward"] > 0
        assert paid.any()
        np.testing.assert_array_equal(clients.loc[paid, "paid_flag"], 1.0)
        assert clients.loc[~paid, "paid_flag"].isna().all()
    else:
        np.testing.assert_allclose(rounds["older_paid"], 0.5 * rounds["uploaded"])
        np.testing.assert_allclose(rounds["reward_total"], rounds["older_paid"])
