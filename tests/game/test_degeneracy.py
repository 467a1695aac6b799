"""Degenerate play is never silent: the per-round check, the run's record, the CLI line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from fedgame.cli import main
from fedgame.game.degeneracy import KINDS, DegeneracyLog, degenerate_kinds
from fedgame.game.rules import DegeneracyThresholds
from fedgame.run.single import simulate
from fedgame.scenario.load import load_scenario, validate

TH = DegeneracyThresholds()
SOUND = {
    "reward": 1.0,
    "previous_reward": 0.95,
    "rho": [0.3, 0.35, 0.4],
    "payments": [0.3, 0.33, 0.37],
    "noise_norm": 0.5,
    "thresholds": TH,
    "market": True,
    "players": 3,
    "knife_edge_impact": 0.01,
}


def kinds(**changes):
    return degenerate_kinds(**{**SOUND, **changes})


def test_a_sound_round_is_not_degenerate():
    assert kinds() == ()
    assert kinds(previous_reward=math.nan) == ()
    assert kinds(noise_norm=math.nan) == ()  # unknown noise (central DP) never fires


IDLE = {"reward": 0.0, "previous_reward": math.nan, "market": False}

#: (kind, the round that must fire it alone, the nearest round that must not), thresholds at
#: their defaults (docs: fedgame/game/degeneracy.py and the README's table)
BOTH_WAYS = [
    (
        "nobody_trained",
        {**IDLE, "rho": [], "payments": []},
        {**IDLE, "rho": [0.0], "payments": [0.0]},
    ),
    (
        "no_market",
        {"reward": 0.0, "previous_reward": math.nan, "players": 5},
        {"players": 2},
    ),
    (
        "no_market",
        {"players": 1, "reward": 0.0, "previous_reward": math.nan, "rho": [0.0], "payments": [0.0]},
        {"players": 2, "rho": [0.3, 0.35], "payments": [0.45, 0.55]},
    ),
    (
        "no_players",
        {"rho": [0.0, 0.0], "payments": [0.0, 0.0]},
        {"rho": [0.0, 0.3, 0.35], "payments": [0.0, 0.46, 0.54]},
    ),
    (
        "lone_player",
        {"rho": [0.3, 0.0], "payments": [1.0, 0.0]},
        {"rho": [0.3, 0.01], "payments": [0.85, 0.15]},
    ),
    ("near_lone", {"payments": [0.01, 0.01, 0.98]}, {"payments": [0.05, 0.06, 0.89]}),
    # the marginal player holds 3.5 % of the largest budget and moves R* by 30 % ...
    (
        "knife_edge",
        {"rho": [0.3, 0.014, 0.4], "knife_edge_impact": 0.3},
        {"rho": [0.3, 0.014, 0.4], "knife_edge_impact": 0.24},  # ... not: 24 % < 25 %
    ),
    (
        "knife_edge",
        {"rho": [0.3, 0.014, 0.4], "knife_edge_impact": 0.3},
        {"rho": [0.3, 0.021, 0.4], "knife_edge_impact": 0.3},  # 5.25 % is not marginal
    ),
    (  # without an impact (an incentive that does not price): the budget ratio, 1e-3
        "knife_edge",
        {"rho": [0.3, 3.9e-4, 0.4], "knife_edge_impact": math.nan},
        {"rho": [0.3, 4.1e-4, 0.4], "knife_edge_impact": math.nan},
    ),
    ("noise", {"noise_norm": 1.01}, {"noise_norm": 0.99}),
    ("reward_jump", {"previous_reward": 0.099}, {"previous_reward": 0.101}),
    ("reward_jump", {"previous_reward": 10.1}, {"previous_reward": 9.9}),
]


@pytest.mark.parametrize(("kind", "fires", "quiet"), BOTH_WAYS)
def test_each_kind_fires_alone_and_not_just_inside_its_threshold(kind, fires, quiet):
    assert kinds(**fires) == (kind,)
    assert kinds(**quiet) == ()


def test_every_kind_is_tested_both_ways():
    assert {kind for kind, _, _ in BOTH_WAYS} == set(KINDS)


def test_thresholds_move_the_line():
    assert kinds(previous_reward=0.2) == ()
    strict = DegeneracyThresholds(reward_jump=2.0, noise_norm_over_clip=0.4)
    assert kinds(previous_reward=0.2, thresholds=strict) == ("noise", "reward_jump")
    lax = DegeneracyThresholds(knife_edge_impact=0.5)
    assert kinds(rho=[0.3, 0.014, 0.4], knife_edge_impact=0.3, thresholds=lax) == ()


def test_log_keeps_first_round_and_counts():
    log = DegeneracyLog()
    log.record(3, ("noise",))
    log.record(4, ())
    log.record(5, ("noise", "lone_player"))
    assert log.rounds == 2
    warned = log.warnings()
    assert warned["noise"]["first_round"] == 3 and warned["noise"]["rounds"] == 2
    assert warned["lone_player"]["first_round"] == 5
    assert "lone_player from round 5" in log.summary(6)


def collapse(rounds: int = 8) -> dict:
    """The collapse of the issue, small: ``budget_aware`` followers, QI-DPFL reward, zCDP, and
    budgets that run out for all but one client (ε = 0.4 for 19 clients, 1000 for one)."""
    n = 20
    return {
        "name": "collapse",
        "seed": 3,
        "rounds": rounds,
        "population": {
            "clients": n,
            "privacy_value": {"dist": "uniform", "low": 0.98, "high": 1.02},
            "budget": {"epsilon": {"dist": "list", "values": [1000.0] + [0.4] * (n - 1)}},
            "straggle_prob": 0.0,
        },
        "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "iid"}},
        "model": {"kind": "logreg"},
        "training": {"local_steps": 1, "batch_size": 8, "lr": 0.1, "device": "cpu"},
        "selection": {"kind": "all"},
        "incentive": {"kind": "qi_dpfl"},
        "policy": {"kind": "budget_aware"},
        "privacy": {"kind": "zcdp_gaussian", "clip": 1.0},
        "network": {"faults": {"kind": "independent", "link_failure": 0.0}},
    }


def test_collapse_is_flagged_in_rounds_and_manifest():
    result = simulate(validate(collapse()))
    rounds, manifest = result.rounds, result.manifest
    assert manifest["status"] == "completed"
    assert rounds["degenerate"].any()
    flagged = rounds[rounds["degenerate"]]
    assert (flagged["degenerate_reason"] != "").all()
    assert (rounds.loc[~rounds["degenerate"], "degenerate_reason"] == "").all()
    warned = manifest["warnings"]
    assert warned and manifest["degenerate_rounds"] == int(rounds["degenerate"].sum())
    first = min(w["first_round"] for w in warned.values())
    assert first == int(flagged["round"].min())


def test_stop_on_degenerate_keeps_the_rounds(write_scenario, tmp_path, capsys):
    raw = collapse()
    raw["game"] = {"stop_on_degenerate": True}
    path = write_scenario(raw)
    code = main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 4
    assert "fedgame: warning: degenerate play in" in err
    assert "run stopped on degenerate play" in err
    manifest = json.loads(next((tmp_path / "out").rglob("manifest.json")).read_text())
    assert manifest["status"] == "degenerate"
    assert manifest["rounds_completed"] < raw["rounds"]
    assert manifest["warnings"]


def test_a_run_stopped_on_degenerate_play_measures_its_last_model():
    """With ``training.eval_every`` the stopping round is measured, as a run's last round is
    (it would otherwise end on an unmeasured model)."""
    raw = collapse()
    raw["game"] = {"stop_on_degenerate": True}
    raw["training"]["eval_every"] = 100
    result = simulate(validate(raw))
    rounds = result.rounds
    assert result.manifest["status"] == "degenerate" and len(rounds) < raw["rounds"]
    accuracy = rounds["test_accuracy"].to_numpy()
    assert np.isfinite(accuracy[-1]) and np.isnan(accuracy[:-1]).all()


def test_quiet_run_names_degenerate_play_in_one_line(write_scenario, tmp_path, capsys):
    path = write_scenario(collapse())
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "degenerate" in ln]
    assert len(lines) == 1 and lines[0].startswith("fedgame: warning: degenerate play in")


def test_a_sweep_keeps_each_runs_degenerate_play_and_says_so(write_scenario, tmp_path, capsys):
    """Each run's manifest keeps its degeneracy ``warnings`` (Python warnings go under
    ``runtime_warnings``), sweep.json counts the runs by kind, and the CLI names them in one
    line, also under --quiet."""
    raw = collapse()
    raw["sweep"] = {"grid": {"population.privacy_value": [1.0, 2.0]}, "replicates": 1}
    path = write_scenario(raw)
    args = ["sweep", str(path), "--out", str(tmp_path), "--executor", "serial", "--quiet"]
    assert main(args) == 0
    lines = [ln for ln in capsys.readouterr().err.splitlines() if "degenerate" in ln]
    assert len(lines) == 1 and lines[0].startswith("fedgame: warning: degenerate play in 2 of 2")
    manifests = [json.loads(p.read_text()) for p in tmp_path.rglob("runs/*/manifest.json")]
    assert len(manifests) == 2
    for manifest in manifests:
        assert manifest["warnings"] and isinstance(manifest["warnings"], dict)
        assert isinstance(manifest["runtime_warnings"], list)
        assert manifest["degenerate_rounds"] > 0
    summary = json.loads(next(tmp_path.rglob("sweep.json")).read_text())["summary"]
    assert summary["degenerate_runs"] == 2
    kinds = set().union(*(m["warnings"] for m in manifests))
    assert set(summary["degenerate"]) == kinds and all(
        summary["degenerate"][k] == sum(k in m["warnings"] for m in manifests) for k in kinds
    )
    assert main(args) == 0  # resumed: nothing run now, nothing to say
    assert "degenerate" not in capsys.readouterr().err
    sweep_dir = next(tmp_path.rglob("sweep.json")).parent
    assert main(["report", str(sweep_dir)]) == 0
    report = (sweep_dir / "report" / "report.md").read_text()
    section = report.split("## Degenerate play", 1)[1].split("\n## ", 1)[0]
    assert section.count("| 1 of 1 |") == 2 and all(f"{k} (" in section for k in kinds)


def test_a_run_report_names_its_degenerate_play(write_scenario, tmp_path):
    path = write_scenario(collapse())
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    assert main(["report", str(tmp_path / "out" / "collapse"), "--out", str(tmp_path / "r")]) == 0
    manifest = json.loads(next((tmp_path / "out").rglob("manifest.json")).read_text())
    text = (tmp_path / "r" / "report.md").read_text()
    assert f"Degenerate play in {manifest['degenerate_rounds']} rounds: " in text
    for kind, seen in manifest["warnings"].items():
        assert f"{kind} from round {seen['first_round']}" in text


REPO = Path(__file__).resolve().parents[2]
#: shipped game scenarios, full length, and the kinds their play must show: QI-DPFL's market
#: is sound; the LightDP sweep and the quickstart release averages whose noise norm is above
#: the clipping bound every round (about 1.1-1.3 C and 7 C: measured, README)
GAME_SCENARIOS = {
    "qi_dpfl_digits": set(),
    "sweep_population_stragglers": {"noise"},
    "quickstart": {"noise"},
}


@pytest.mark.parametrize("name", list(GAME_SCENARIOS))
def test_shipped_scenarios_play_as_documented_to_the_end(name):
    """Full length (the game does not depend on the model's accuracy, so training is cut)."""
    scenario = load_scenario(
        REPO / "scenarios" / f"{name}.yaml",
        ["training.device=cpu", "training.local_steps=1"],
    )
    result = simulate(scenario)
    assert set(result.manifest["warnings"]) == GAME_SCENARIOS[name], result.manifest["warnings"]
    rounds = result.rounds
    assert rounds["degenerate"].any() == bool(GAME_SCENARIOS[name])
    if "noise" in GAME_SCENARIOS[name]:
        assert (rounds["noise_norm_over_clip"] > 1.0).all()
    else:
        assert (rounds["noise_norm_over_clip"] < 1.0).all()


def test_game_rules_reject_bad_thresholds():
    with pytest.raises(Exception, match="reward_jump"):
        validate(
            {
                **yaml.safe_load(yaml.safe_dump(collapse())),
                "game": {"degeneracy": {"reward_jump": 0.5}},
            }
        )
    assert np.isfinite(TH.noise_norm_over_clip)
