"""Bad privacy input is refused at validation: exit 2, one line naming the key."""

from __future__ import annotations

import pytest
from helpers_dp import scenario

BAD = [
    ({"population": {"clients": 12, "budget": {"epsilon": 0.0}}}, "population.budget.epsilon"),
    (
        {"population": {"clients": 12, "budget": {"epsilon": 1.0, "delta": 1.0}}},
        "population.budget.delta",
    ),
    ({"privacy": {"kind": "gaussian_local", "clip": 0.0}}, "privacy.clip"),
    ({"privacy": {"kind": "laplace_local", "clip": -1.0}}, "privacy.clip"),
    # accountants that cannot describe the mechanism's releases
    ({"privacy": {"kind": "dpsgd_local", "accountant": "basic"}}, "privacy.accountant"),
    ({"privacy": {"kind": "dpsgd_local", "accountant": "zcdp"}}, "privacy.accountant"),
    ({"privacy": {"kind": "gaussian", "accountant": "moments"}}, "privacy.accountant"),
    # the classic bound where per-round epsilon reaches 1
    ({"privacy": {"kind": "ldp", "calibration": "lightdp"}}, "privacy.calibration"),
    # a calibration target no noise multiplier reaches (with δ > 0 every finite ε > 0 is
    # reachable, down to (0, δ)-DP: the unreachable targets are the non-finite ones)
    (
        {
            "population": {"clients": 12, "budget": {"epsilon": float("inf")}},
            "privacy": {"kind": "gaussian_local"},
        },
        "population.budget.epsilon",
    ),
    ({"privacy": {"kind": "gaussian_local", "level": "sample"}}, "privacy.level"),
    ({"aggregation": {"kind": "secure", "inner": {"kind": "median"}}}, "aggregation.inner.kind"),
    (
        {"aggregation": {"kind": "median"}, "privacy": {"kind": "central_gaussian"}},
        "aggregation.kind",
    ),
    ({"aggregation": {"kind": "secure", "bits": 4}}, "aggregation.bits"),
]


@pytest.mark.parametrize(("override", "key"), BAD, ids=[k for _, k in BAD])
def test_bad_input_exits_2_naming_the_key(tiny, write_scenario, capsys, override, key):
    from fedgame.cli import main

    data = scenario(tiny, **override)
    if data["privacy"]["kind"] in ("ldp",):
        data["aggregation"] = {"kind": "mean"}
    path = write_scenario(data)
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"'{key}'" in err and len(err.strip().splitlines()) == 1


def test_rdp_describes_laplace_releases(tiny, write_scenario, capsys):
    """dp_accounting's RDP accountant accounts Laplace releases, so rdp + laplace_local is a
    valid (and, over many releases, tighter) choice than basic composition."""
    from fedgame.cli import main

    data = scenario(tiny, privacy={"kind": "laplace_local", "accountant": "rdp"})
    assert main(["validate", str(write_scenario(data))]) == 0
