"""fedgame.analysis.guarantee: the kind of guarantee an ε column stands for."""

from __future__ import annotations

import pytest

from fedgame.analysis.guarantee import epsilon_header, epsilon_kind
from fedgame.errors import ScenarioError


@pytest.mark.parametrize(
    ("privacy", "kind"),
    [
        (None, "no DP"),
        ({"kind": "none"}, "no DP"),
        ({"kind": "zcdp_gaussian", "clip": 1.0}, "record-level, 2C/|D| heuristic, zCDP"),
        (
            {"kind": "lightdp", "clip": 4.0, "sensitivity": "sample"},
            "record-level, 2C/|D_min| heuristic, basic composition",
        ),
        ({"kind": "ldp", "clip": 4.0}, "user-level, exact (C), basic composition"),
        (
            {"kind": "smpc_dp", "sensitivity": "update", "adjacency": "replace"},
            "user-level, exact (2C), basic composition",
        ),
        ({"kind": "gaussian", "clip": 1.0}, "user-level, exact (C), basic composition"),
        (
            {
                "kind": "gaussian_local",
                "level": "sample",
                "adjacency": "replace",
                "calibration": "dpfl_bcs",
            },
            "record-level, exact (2C·η/D per FedSGD step), RDP",
        ),
        (
            {"kind": "laplace_local", "level": "sample"},
            "record-level, exact (L1 2C·η/D per FedSGD step), basic composition",
        ),
        ({"kind": "laplace_local"}, "user-level, exact (2C), basic composition"),
        (
            {"kind": "dpsgd_local", "accountant": "pld"},
            "record-level, exact (DP-SGD steps; shuffle accounted as Poisson sampling), PLD",
        ),
    ],
)
def test_epsilon_kind_reads_unit_sensitivity_and_accountant(privacy, kind):
    assert epsilon_kind(privacy) == kind


def test_the_header_names_every_kind_once_and_skips_no_dp():
    blocks = [
        {"kind": "none"},
        {"kind": "lightdp", "sensitivity": "sample"},
        {"kind": "ldp", "sensitivity": "sample"},
        {"kind": "ldp", "sensitivity": "update"},
    ]
    assert epsilon_header("ε", blocks) == (
        "ε (record-level, 2C/|D_min| heuristic, basic composition; "
        "user-level, exact (C), basic composition)"
    )
    assert epsilon_header("ε", [{"kind": "none"}]) == "ε"


def test_an_unknown_mechanism_is_a_scenario_error():
    with pytest.raises(ScenarioError, match="privacy"):
        epsilon_kind({"kind": "nope"})
