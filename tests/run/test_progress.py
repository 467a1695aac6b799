"""The progress bar of ``fedgame run`` shows the round it has just finished."""

from __future__ import annotations

import re
import sys

from tqdm import tqdm

from fedgame.run import single
from fedgame.scenario.load import load_scenario


def test_postfix_shows_the_round_just_finished(capsys, monkeypatch):
    """Every drawn frame ``k/N ... eps=X`` has X = mean ε spent after round k (no lag)."""

    def bar(scenario, *, enabled):  # every update drawn (no minimum interval between frames)
        return tqdm(total=scenario.rounds, mininterval=0, file=sys.stderr, ascii=True)

    monkeypatch.setattr(single, "_progress_bar", bar)
    scenario = load_scenario(
        "scenarios/quickstart.yaml",
        ["rounds=4", "population.clients=12", "training.local_steps=2"],
    )
    result = single.simulate(scenario, progress=True)
    frames = re.split(r"[\r\n]", capsys.readouterr().err)
    shown = {}
    for frame in frames:
        match = re.search(r" (\d+)/4 .*acc=([0-9.]+), eps=([0-9.]+)", frame)
        if match:
            shown[int(match.group(1))] = (match.group(2), match.group(3))
    assert sorted(shown) == [1, 2, 3, 4]
    for k, (acc, eps) in shown.items():
        row = result.rounds.iloc[k - 1]
        assert (acc, eps) == (f"{row['test_accuracy']:.3f}", f"{row['epsilon_spent_mean']:.2f}")
