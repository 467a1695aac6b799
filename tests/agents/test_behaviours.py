"""Mixed populations: each behaviour is a Mesa agent type; a user's subclass decides itself."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from fedgame import registry
from fedgame.agents.client import ClientAgent
from fedgame.errors import ScenarioError
from fedgame.model import FedGameModel
from fedgame.scenario.behaviours import counts
from fedgame.scenario.load import validate
from fedgame.views import MarketView, Offer, Response

MIX = [
    {"kind": "always", "share": 0.6},
    {"kind": "fixed", "share": 0.3, "rho": 0.05},
    {"kind": "always", "share": 0.1, "name": "loyal"},
]


def test_shares_become_agent_types_and_a_behaviour_column(tiny):
    tiny["population"]["clients"] = 10
    tiny["population"]["behaviours"] = MIX
    model = FedGameModel(validate(tiny))
    labels = model.table.behaviour.tolist()
    assert sorted(labels) == sorted(["always_0"] * 6 + ["fixed"] * 3 + ["loyal"])
    for group in model.groups:
        agents = model.agents_by_type[group.agent_type]
        assert len(agents) == len(group.ids)
        assert {a.client_id for a in agents} == set(group.ids.tolist())
        assert all(a.behaviour == group.agent_type.behaviour for a in agents)
    names = {t.__name__ for t in model.agent_types if issubclass(t, ClientAgent)}
    assert names == {"Always0Client", "FixedClient", "LoyalClient"}
    model.run_model()
    clients = model.datacollector.client_frame()
    assert set(clients["behaviour"]) == {"always_0", "fixed", "loyal"}
    fixed = model.datacollector.get_agenttype_vars_dataframe(model.groups[1].agent_type)
    assert set(fixed["behaviour"]) == {"fixed"}


def test_assignment_is_seeded_and_an_explicit_list_is_followed(tiny):
    tiny["population"]["behaviours"] = MIX
    a, b = FedGameModel(validate(tiny)), FedGameModel(validate(tiny))
    assert a.table.behaviour.tolist() == b.table.behaviour.tolist()
    tiny["population"]["behaviours"] = [{"kind": "always"}, {"kind": "fixed"}]
    tiny["population"]["assign"] = [1, 0] * 6
    model = FedGameModel(validate(tiny))
    assert model.table.behaviour.tolist() == ["fixed", "always"] * 6


def test_largest_remainder_counts_sum_to_n() -> None:
    assert counts([0.6, 0.3, 0.1], 10).tolist() == [6, 3, 1]
    assert counts([1 / 3] * 3, 10).sum() == 10


class Contrarian(ClientAgent):
    """Takes part exactly in the rounds its id parity says (a user's own decision rule)."""

    def respond(self, offer: Offer, market: MarketView) -> Response:
        mine = (self.client_id + market.info.round) % 2 == 0
        return Response(self.client_id, participate=mine, reason="" if mine else "parity")


@pytest.fixture
def contrarian_registered() -> Iterator[None]:
    """Registers the user's policy for one test and removes it again (the registry is global)."""
    registry.register("policy", "contrarian_test")(Contrarian)
    try:
        yield
    finally:
        registry._REGISTRY["policy"].pop("contrarian_test", None)


@pytest.mark.usefixtures("contrarian_registered")
def test_a_user_subclass_registered_as_a_policy_decides_for_its_clients(tiny):
    tiny["population"]["behaviours"] = [
        {"kind": "contrarian_test", "share": 0.5},
        {"kind": "always", "share": 0.5},
    ]
    tiny["network"]["faults"]["link_failure"] = 0.0
    model = FedGameModel(validate(tiny))
    mine = next(g for g in model.groups if issubclass(g.agent_type, Contrarian))
    assert not mine.batched  # its own respond: asked agent by agent
    model.step()
    ids = mine.ids
    expect = (ids + 1) % 2 == 0
    np.testing.assert_array_equal(model.table.participating[ids], expect)
    assert set(model.table.decline_reason[ids[~expect]]) == {"parity"}


@pytest.mark.parametrize(
    ("population", "key"),
    [
        ({"behaviours": [{"kind": "always", "share": 0.5}]}, "population.behaviours"),
        ({"behaviours": [{"kind": "nope", "share": 1.0}]}, "population.behaviours.0.kind"),
        (
            {"behaviours": [{"kind": "always"}, {"kind": "fixed"}], "assign": [0, 1]},
            "population.assign",
        ),
        ({"behaviours": [{"kind": "always"}], "assign": [0] * 11 + [3]}, "population.assign"),
        (
            {"behaviours": [{"kind": "fixed", "share": 1.0, "rho": -1}]},
            "population.behaviours.0.rho",
        ),
        ({"behaviours": [{"kind": "always", "share": 1.5}]}, "population.behaviours.0.share"),
    ],
)
def test_bad_behaviours_are_refused_naming_the_key(tiny, population, key):
    tiny["population"].update(population)
    with pytest.raises(ScenarioError) as err:
        validate(tiny)
    assert err.value.key == key


def test_policy_and_behaviours_together_are_refused(tiny):
    tiny["policy"] = {"kind": "always"}
    tiny["population"]["behaviours"] = [{"kind": "fixed", "share": 1.0}]
    with pytest.raises(ScenarioError, match="not both"):
        validate(tiny)
