"""``training.eval_every``: the global model is evaluated every k-th round and at the last."""

from __future__ import annotations

import copy
import math

import numpy as np
import pandas as pd
import pytest

from fedgame.errors import ScenarioError
from fedgame.run.single import simulate
from fedgame.scenario.load import validate

EVAL = ["test_accuracy", "test_loss"]
#: economics columns that value the round's accuracy gain (an unmeasured accuracy gains nothing)
FROM_ACCURACY = ["econ_value", "econ_welfare", "econ_accuracy_per_cost"]
FROM_ACCURACY += ["econ_accuracy_per_cost_to_date"]
NONDETERMINISTIC = ["wall_time_s"]


def run(scenario: dict, *, rounds: int, every: int | None) -> pd.DataFrame:
    tiny = copy.deepcopy(scenario)
    tiny["rounds"] = rounds
    if every is not None:
        tiny.setdefault("training", {})["eval_every"] = every
    return simulate(validate(tiny)).rounds.set_index("round")


def test_every_third_round_and_the_last_are_measured_the_rest_nan(tiny):
    every, each = run(tiny, rounds=7, every=3), run(tiny, rounds=7, every=None)
    assert (each["uploaded"] > 0).all()  # every round changes the model
    measured = [3, 6, 7]
    assert every.loc[measured, EVAL].notna().all().all()
    assert every.drop(index=measured)[EVAL].isna().all().all()
    # evaluation draws no randomness: the same models, so the same figures where measured
    pd.testing.assert_frame_equal(every.loc[measured, EVAL], each.loc[measured, EVAL])
    others = [c for c in each.columns if c not in EVAL + NONDETERMINISTIC + FROM_ACCURACY]
    assert len(others) > 20
    pd.testing.assert_frame_equal(every[others], each[others])


def test_eval_every_one_is_the_default(tiny):
    one, default = run(tiny, rounds=3, every=1), run(tiny, rounds=3, every=None)
    pd.testing.assert_frame_equal(
        one.drop(columns=NONDETERMINISTIC), default.drop(columns=NONDETERMINISTIC)
    )
    assert np.isfinite(one[EVAL].to_numpy()).all()


def test_eval_every_beyond_the_run_measures_the_last_round_only(tiny):
    rounds = run(tiny, rounds=4, every=100)
    assert rounds[EVAL].isna().to_numpy().tolist() == [[True, True]] * 3 + [[False, False]]
    assert math.isfinite(rounds.loc[4, "test_accuracy"])


@pytest.mark.parametrize("bad", [0, -2, 1.5, "often"])
def test_eval_every_must_be_a_positive_whole_number(tiny, bad):
    tiny.setdefault("training", {})["eval_every"] = bad
    with pytest.raises(ScenarioError, match=r"training\.eval_every"):
        validate(tiny)


def test_a_measured_round_books_the_accuracy_gained_since_the_last_measurement(tiny):
    """Economics under k > 1: a round between evaluations gains nothing (its accuracy is
    unknown), the next measured round books all that was gained since the last measurement,
    so sums over rounds and the to-date figures at measured rounds are those of k = 1."""
    every, each = run(tiny, rounds=7, every=3), run(tiny, rounds=7, every=None)
    assert each["econ_value"].ne(0).sum() >= 3  # the rounds gain (and lose) accuracy
    unmeasured = [1, 2, 4, 5]
    assert (every.loc[unmeasured, ["econ_value", "econ_accuracy_per_cost"]] == 0).all().all()
    for rounds in ([1, 2, 3], [4, 5, 6], [7]):  # each measured round books its stretch
        booked = every.loc[rounds, "econ_value"].sum()
        assert booked == pytest.approx(each.loc[rounds, "econ_value"].sum(), rel=1e-9, abs=1e-9)
    measured = [3, 6, 7]
    for column in ("econ_accuracy_per_cost_to_date", "econ_cost_to_date"):
        np.testing.assert_allclose(every.loc[measured, column], each.loc[measured, column])
    welfare_gap = every["econ_welfare"].sum() - each["econ_welfare"].sum()
    assert welfare_gap == pytest.approx(0.0, abs=1e-9)
