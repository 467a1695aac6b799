"""The recovery policies of a secure sum, one model for ``aggregation: secure`` and smpc_dp."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.mechanisms.aggregation.recovery import (
    OK,
    TIMED_OUT,
    UNRECOVERABLE,
    recovery_status,
)

IDS = [3, 5, 8, 9]


def status(policy, uploaded, edges=(), threshold=None):
    return recovery_status(
        policy, ids=IDS, uploaded=np.array(uploaded), failed_edges=edges, threshold=threshold
    )


def test_always_recovers_and_none_fails_on_any_missing_upload():
    assert status("always", [True, False, False, True]) == OK
    assert status("none", [True, True, True, True]) == OK
    assert status("none", [True, False, True, True]) == UNRECOVERABLE


def test_p2p_needs_threshold_uploads_then_as_many_with_every_link_up():
    assert status("p2p", [True, False, True, True], threshold=3) == OK
    assert status("p2p", [True, False, False, True], threshold=3) == TIMED_OUT
    # a link down between two selected uploaders takes both out of the recovery
    assert status("p2p", [True, False, True, True], [(3, 8)], threshold=3) == UNRECOVERABLE
    # a link to a client that was not selected does not matter
    assert status("p2p", [True, False, True, True], [(3, 4)], threshold=3) == OK
    # links matter even when every upload arrived (the pair keys travel over them)
    assert status("p2p", [True] * 4, [(8, 9)], threshold=3) == UNRECOVERABLE


@pytest.mark.parametrize("recovery", ["always", "none", "p2p"])
def test_secure_aggregation_follows_its_recovery_policy(recovery):
    import torch

    from fedgame import registry
    from fedgame.mechanisms.base import FaultDraw

    extra = {"threshold": 3} if recovery == "p2p" else {}
    agg = registry.create("aggregation", "secure", {"inner": "mean", "recovery": recovery, **extra})
    n = 10
    faults = FaultDraw(np.ones(n, bool), np.zeros(n, bool), failed_edges=((0, 1),))
    views = [_View(i) for i in range(4)]
    updates = torch.ones(3, 5)
    out, metrics = agg.aggregate(
        updates, clients=views[:3], dropped=views[3:], rng=np.random.default_rng(0), faults=faults
    )
    want = {"always": OK, "none": UNRECOVERABLE, "p2p": UNRECOVERABLE}[recovery]
    assert metrics["secure_status"] == want
    assert (out is None) == (want != OK)


class _View:
    def __init__(self, cid: int) -> None:
        self.client_id, self.dataset_size = cid, 10


def test_p2p_threshold_tolerates_exactly_s_bar_missing_uploads():
    """Note 004 §5.2: K − S̄ uploads suffice; one more straggler than S̄ times the round out."""
    from fedgame.mechanisms.aggregation.recovery import p2p_threshold

    need = p2p_threshold(len(IDS), 1)
    assert need == 3 and p2p_threshold(2, 5) == 1
    assert status("p2p", [True, False, True, True], threshold=need) == OK
    assert status("p2p", [True, False, False, True], threshold=need) == TIMED_OUT


def _secure_p2p(*bounds, threshold=None):
    """A p2p secure mean prepared in a run whose components are ``bounds``; one of four
    selected clients (id 3) misses the deadline, no client-client link is down."""
    import torch

    from fedgame import registry
    from fedgame.mechanisms.base import FaultDraw
    from fedgame.views import SetupContext

    extra = {} if threshold is None else {"threshold": threshold}
    agg = registry.create("aggregation", "secure", {"inner": "mean", "recovery": "p2p", **extra})
    privacy, faults = (*bounds, None, None)[:2]
    agg.prepare(
        SetupContext(num_clients=4, rounds=1, clients=(), privacy=privacy, faults=faults),
        rng=np.random.default_rng(0),
    )
    views = [_View(i) for i in range(4)]
    out, metrics = agg.aggregate(
        torch.ones(3, 5),
        clients=views[:3],
        dropped=views[3:],
        rng=np.random.default_rng(0),
        faults=FaultDraw(np.ones(4, bool), np.zeros(4, bool)),
    )
    return agg, out, metrics


def test_p2p_default_threshold_is_k_minus_the_runs_straggler_bound():
    """Note 004 §5.2: SMPC+DP's noise is sized for S̄ missing uploads, so by default the sum
    unmasks with K − S̄ of K = 4 (S̄ = 1: 3 uploads suffice); the privacy mechanism's S̄
    comes before the fault model's; with no bound the default stays K (times out)."""
    from fedgame.mechanisms.faults.correlated import BoundedStragglers
    from fedgame.mechanisms.faults.independent import NoFaults

    one, two = (BoundedStragglers(BoundedStragglers.Config(max_stragglers=s)) for s in (1, 0))
    agg, out, metrics = _secure_p2p(None, one)
    assert agg.max_stragglers == 1 and agg.threshold(4) == 3
    assert metrics["secure_status"] == OK and out is not None
    agg, out, _ = _secure_p2p(one, two)  # the privacy's S̄ = 1 wins over the faults' 0
    assert agg.threshold(4) == 3 and out is not None
    agg, out, metrics = _secure_p2p(None, NoFaults(None))
    assert agg.max_stragglers is None and agg.threshold(4) is None
    assert metrics["secure_status"] == TIMED_OUT and out is None
    agg, out, _ = _secure_p2p(None, one, threshold=4)  # an explicit threshold is kept
    assert agg.threshold(4) == 4 and out is None
