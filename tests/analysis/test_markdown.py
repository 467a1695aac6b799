"""Report text: noise printed as 0, clipped intervals, plurals, mechanisms named and merged."""

from __future__ import annotations

import doctest

import numpy as np
import pandas as pd
import pytest

from fedgame.analysis import encoding, markdown, quantities
from fedgame.analysis.markdown import denoise, grid_text, md_table, mechanism_table, with_ci
from fedgame.analysis.quantities import format_number, plural, quantity


@pytest.mark.parametrize("module", [quantities, encoding, markdown])
def test_doctests(module):
    assert doctest.testmod(module).failed == 0


def test_float_noise_prints_as_zero_relative_to_its_column():
    frame = pd.DataFrame({"gap": [2.168e-18, 0.001037], "tiny": [1e-18, 3e-18]})
    lines = md_table(frame).splitlines()
    assert lines[2] == "| 0 | 0 |"
    assert lines[3] == "| 0.001037 | 0 |"
    assert format_number(-1e-13, scale=0.5) == "0" and format_number(1e-9) == "1e-09"
    assert format_number(float("nan")) == "–"


def test_denoise_keeps_slopes_and_elasticities_off_noise():
    frame = pd.DataFrame({"x": [1.0, 2.0], "gap": [1.9e-18, 3.2e-18], "k": ["a", "b"]})
    clean = denoise(frame, ["gap", "k", "absent"])
    assert clean["gap"].tolist() == [0.0, 0.0] and clean["x"].tolist() == [1.0, 2.0]
    assert frame["gap"].iloc[0] == 1.9e-18  # the input is left alone


def test_intervals_are_clipped_to_the_quantitys_range():
    table = pd.DataFrame(
        {
            "k": [1, 2],
            "n": [2, 2],
            "final_accuracy": [0.55, 0.9],
            "final_accuracy_lo": [-0.16, 0.8],
            "final_accuracy_hi": [1.25, 1.0],
            "reward": [0.1, 0.2],
            "reward_lo": [-0.3, 0.1],
            "reward_hi": [0.5, 0.3],
        }
    )
    out = with_ci(table, ["k"], ["final_accuracy", "reward"])
    assert out["final_accuracy"].tolist() == ["0.55 [0, 1]", "0.9 [0.8, 1]"]
    assert out["reward"].tolist() == ["0.1 [0, 0.5]", "0.2 [0.1, 0.3]"]
    assert quantity("test_accuracy").clip(np.array([-1.0, 2.0])).tolist() == [0.0, 1.0]


def test_plurals():
    assert plural(1, "replicate") == "1 replicate"
    assert plural(2, "replicate") == "2 replicates"
    assert plural(0, "run") == "0 runs"


def test_mechanisms_are_named_and_swept_settings_merged():
    base = {
        "incentive": {"kind": "none"},
        "policy": {"kind": "always"},
        "privacy": {"kind": "gaussian", "clip": 1.0, "participations": None},
        "aggregation": {"kind": "fedavg"},
        "network": {"topology": {"kind": "star"}, "faults": {"kind": "independent"}},
    }
    scenarios = [
        {**base, "selection": {"kind": "uniform", "k": 10}},
        {**base, "selection": {"kind": "uniform", "k": 5}},
        {**base, "selection": {"kind": "all"}},
    ]
    table = mechanism_table(scenarios)
    rows = {(r.family, r.kind): r.settings for r in table.itertuples()}
    assert rows[("selection", "uniform")] == "k ∈ {5, 10}"
    assert rows[("selection", "all")] == "–"
    assert rows[("privacy", "gaussian")] == "clip=1"  # null knobs left out
    assert [f for f, _ in rows] == [
        "incentive",
        "policy",
        "selection",
        "selection",
        "privacy",
        "aggregation",
        "topology",
        "faults",
    ]


def test_nested_settings_are_listed_as_dotted_keys():
    belief = {"kind": "lognormal", "prior": {"kind": "lognormal", "median": 2.0}, "obs_sd": None}
    scenarios = [{"incentive": {"kind": "qi_dpfl", "lam": 0.01, "belief": belief}}]
    rows = {(r.family, r.kind): r.settings for r in mechanism_table(scenarios).itertuples()}
    assert rows[("incentive", "qi_dpfl")] == (
        "lam=0.01, belief.kind=lognormal, belief.prior.kind=lognormal, belief.prior.median=2"
    )


def test_a_population_of_behaviours_is_listed_instead_of_the_policy():
    behaviours = [
        {"kind": "best_response", "share": 0.6, "name": None},
        {"kind": "learning", "share": 0.3, "name": None, "rule": "hedge"},
        {"kind": "always", "share": 0.1, "name": "loyal"},
    ]
    mixed = {"population": {"behaviours": behaviours}, "policy": {"kind": "always"}}
    plain = {"population": {"behaviours": None}, "policy": {"kind": "fixed", "rho": 0.05}}
    table = mechanism_table([mixed, plain])
    rows = {(r.family, r.kind): r.settings for r in table.itertuples()}
    assert rows == {
        ("behaviour", "best_response"): "share=0.6",
        ("behaviour", "learning"): "share=0.3, rule=hedge",
        ("behaviour", "loyal (always)"): "share=0.1",
        ("policy", "fixed"): "rho=0.05",  # the run without behaviours keeps its policy
    }


def test_grid_text():
    grid = {"population.clients": [20, 40], "population.straggle_prob": [0.0, 0.30000000000000004]}
    assert grid_text(grid) == (
        "`population.clients` ∈ {20, 40} × `population.straggle_prob` ∈ {0, 0.3}"
    )
    assert grid_text({}) == "no swept key"
