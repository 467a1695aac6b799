"""``failed_links`` counts client-server links only; client-client edges are ``failed_edges``."""

from __future__ import annotations

from fedgame.run.single import simulate
from fedgame.scenario.load import validate


def test_failed_links_are_client_server_links_and_edges_have_their_own_column(tiny):
    tiny["rounds"] = 4
    tiny["network"] = {
        "topology": {"kind": "complete"},  # 66 client-client edges among 12 clients
        "faults": {"kind": "independent", "link_failure": 0.2, "edge_failure": 0.3},
    }
    result = simulate(validate(tiny))
    rounds, clients = result.rounds, result.clients
    down = (~clients["link_up"].astype(bool)).groupby(clients["round"]).sum()
    assert rounds.set_index("round")["failed_links"].to_dict() == down.to_dict()
    assert (rounds["failed_links"] <= 12).all() and rounds["failed_links"].sum() > 0
    assert (rounds["failed_edges"] > 5).all()  # about 0.3 x 66 edges, not in failed_links
    tiny["network"] = {"faults": {"kind": "independent", "link_failure": 0.2}}  # a star
    star = simulate(validate(tiny)).rounds
    assert (star["failed_edges"] == 0).all()
