"""Bad game input is refused before anything runs: exit code 2, one line naming the key."""

from __future__ import annotations

import pytest

from fedgame.cli import main


def _set(raw: dict, dotted: str, value: object) -> None:
    *parents, last = dotted.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


NAN = float("nan")
CASES = [
    (
        "population.behaviours",
        [{"kind": "always", "share": 0.6}, {"kind": "fixed", "share": 0.3}],
        "population.behaviours",
    ),
    (
        "population.behaviours",
        [{"kind": "no_such_policy", "share": 1.0}],
        "population.behaviours.0.kind",
    ),
    ("population.assign", [0] * 5, "population.assign"),
    ("population.colluders", 40, "population.colluders"),
    ("game.cartel", True, "game.cartel"),  # no colluders: no cartel
    ("game.degeneracy.reward_jump", 0.5, "game.degeneracy.reward_jump"),
    ("game.degeneracy.max_share", 0.2, "game.degeneracy.max_share"),
    ("game.stop_on_degenerat", True, "game"),
    (
        "incentive",
        {"kind": "qi_dpfl", "belief": {"prior": {"kind": "lognormal", "sd": -1.0}}},
        "incentive.belief.prior.lognormal.sd",
    ),
    (
        "incentive",
        {
            "kind": "qi_dpfl",
            "belief": {"prior": {"kind": "discrete", "values": [1, 2], "weights": [0.5, 0.6]}},
        },
        "incentive.belief.prior.discrete.weights",
    ),
    (
        "incentive",
        {
            "kind": "qi_dpfl",
            "belief": {"prior": {"kind": "discrete", "values": [1, 2], "weights": [1, NAN]}},
        },
        "incentive.belief.prior.weights",
    ),
    ("incentive", {"kind": "qi_dpfl", "belief": {"kind": "no_such"}}, "incentive.belief.kind"),
]


@pytest.mark.parametrize(
    ("key", "value", "named"), CASES, ids=[c[2] + str(i) for i, c in enumerate(CASES)]
)
def test_bad_game_input_exits_2_naming_the_key(
    tiny, write_scenario, tmp_path, capsys, key, value, named
):
    if key == "population.assign":
        tiny["population"]["behaviours"] = [{"kind": "always"}, {"kind": "fixed"}]
    _set(tiny, key, value)
    path = write_scenario(tiny)
    out = tmp_path / "out"
    assert main(["run", str(path), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and named in err[0], err
    assert "Traceback" not in err[0]
    assert not out.exists() or not any(out.rglob("*.parquet"))
