"""Shared builders for the heterogeneous-DP mechanism tests."""

from __future__ import annotations

import copy
from typing import Any

# the plug-in modules register themselves on import (until fedgame.plugins lists them)
import fedgame.mechanisms.aggregation.robust
import fedgame.mechanisms.aggregation.secure
import fedgame.privacy.central_gaussian
import fedgame.privacy.dpsgd_local
import fedgame.privacy.gaussian_local
import fedgame.privacy.laplace_local  # noqa: F401
from fedgame.views import ClientView


def oracle_epsilon(kind: str, charge: Any, times: int, delta: float = 1e-5) -> float:
    """ε of ``times`` releases ``charge`` from a fresh dp_accounting accountant (independent)."""
    import dp_accounting as dpa

    acc = dpa.rdp.RdpAccountant() if kind == "rdp" else dpa.pld.PLDAccountant()
    return float(acc.compose(charge.event(), times).get_epsilon(delta))


def view(
    cid: int,
    *,
    eps_total: float = 8.0,
    delta: float = 1e-5,
    participations: int = 4,
    dataset_size: int = 100,
) -> ClientView:
    """A client view whose default per-round budget is its total split over ``participations``."""
    return ClientView(
        client_id=cid,
        dataset_size=dataset_size,
        emd=0.0,
        privacy_value=1.0,
        epsilon_total=eps_total,
        delta=delta,
        epsilon_spent=0.0,
        epsilon_round=eps_total / participations,
        delta_round=delta / participations,
        straggle_prob=0.0,
        colluder=False,
    )


def scenario(base: dict[str, Any], **sections: Any) -> dict[str, Any]:
    """A copy of ``base`` with top-level ``sections`` replaced."""
    out = copy.deepcopy(base)
    out.update(copy.deepcopy(sections))
    return out
