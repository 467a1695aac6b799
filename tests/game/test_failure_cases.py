"""Five ways fedgame misreported a run, rebuilt as small runs: each is now flagged or counted.

1. the noise flag could not fire (it compared a per-coordinate std with C);
2. silent markets: one client, a cartel of 9 of 10, small noisy markets, all "sound";
3. the knife-edge check missed a marginal client that tripled R*;
4. cartels and the discounting QI-DPFL leader never converged;
5. counts hid the runs behind a number (n, rounds to target, final vs stretch accuracy);
6. knobs without effect: a small-world topology changed nothing but random draws.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedgame.analysis import aggregate, equilibrium_table, run_metrics
from fedgame.analysis.convergence import Criteria
from fedgame.analysis.equilibrium import settled_means
from fedgame.analysis.markdown import with_ci
from fedgame.run.single import simulate
from fedgame.scenario.load import validate

GAME: dict[str, Any] = {
    "name": "case",
    "seed": 1,
    "rounds": 4,
    "population": {
        "clients": 3,
        "privacy_value": {"dist": "uniform", "low": 0.98, "high": 1.02},
        "budget": {"epsilon": 1000.0, "delta": 1e-5},
        "straggle_prob": 0.0,
    },
    "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "iid"}},
    "model": {"kind": "logreg"},
    "training": {"local_steps": 1, "batch_size": 16, "lr": 0.1, "device": "cpu"},
    "selection": {"kind": "all"},
    "incentive": {"kind": "qi_dpfl", "lam": 0.01},
    "policy": {"kind": "best_response"},
    "privacy": {"kind": "zcdp_gaussian", "clip": 1.0},
    "network": {"faults": {"kind": "independent", "link_failure": 0.0}},
}


def game(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(GAME)
    for dotted, value in changes.items():
        node = data
        *path, last = dotted.split("__")
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return data


def kinds(rounds: pd.DataFrame) -> set[str]:
    reasons = rounds["degenerate_reason"].str.split(";").explode()
    return set(reasons[reasons != ""])


# ------------------------------------------------------------------ 1. noise


def test_1_a_run_drowned_in_noise_is_flagged_and_the_column_is_the_formula(tiny):
    """Local Gaussian DP at ε 0.5-1 per client over 3 rounds: the released average carries a
    noise norm of tens of C (the old per-coordinate test needed > 10·√d·C = 255·C)."""
    tiny["population"]["budget"]["epsilon"] = {"dist": "uniform", "low": 0.5, "high": 1.0}
    tiny["network"]["faults"]["link_failure"] = 0.0
    result = simulate(validate(tiny))
    rounds, clients = result.rounds, result.clients
    assert (rounds["noise_norm_over_clip"] > 1.4).all()
    assert (rounds["degenerate_reason"].str.contains("noise")).all()
    assert "noise" in result.manifest["warnings"]
    for _, row in rounds.iterrows():  # sqrt(d Σ w² σ²)/C, FedAvg weights, d = 650, C = 1
        up = clients[(clients["round"] == row["round"]) & clients["uploaded"]]
        w = up["dataset_size"].to_numpy(float)
        w = w / w.sum()
        expected = math.sqrt(650 * float(np.sum(w**2 * up["noise_std"].to_numpy() ** 2)))
        assert row["noise_norm_over_clip"] == pytest.approx(expected, rel=1e-9)
    tiny["population"]["budget"]["epsilon"] = 1e7  # next to no noise: not flagged
    quiet = simulate(validate(tiny)).rounds
    assert (quiet["noise_norm_over_clip"] < 0.01).all() and not quiet["degenerate"].any()


# ------------------------------------------------------------------ 2. silent markets


def test_2a_one_client_is_no_market_and_nobody_trains():
    rounds = simulate(validate(game(population__clients=1))).rounds
    assert (rounds["reward"] == 0).all() and (rounds["uploaded"] == 0).all()
    assert (rounds["degenerate_reason"] == "nobody_trained;no_market").all()


CARTEL_NU = {"dist": "list", "values": [0.2, 0.25, 0.3, 0.35, 3, 3, 3, 3, 3, 3]}


def test_2b_a_cartel_of_9_of_10_leaves_no_market():
    """Without the cartel 4 clients play for R ≈ 5; with 9 of 10 colluding (seed 2: the
    outsider is one of the expensive clients, removed by Theorem 1's feasibility), the leader
    faces one player: reward 0, nobody uploads, every round."""
    plain = game(seed=2, rounds=3, population__clients=10, population__privacy_value=CARTEL_NU)
    free = simulate(validate(plain)).rounds
    assert (free["uploaded"] == 4).all() and (free["reward"] > 1).all()
    assert not free["degenerate"].any()
    cartel = copy.deepcopy(plain)
    cartel["population"]["colluders"] = 9
    cartel["game"] = {"cartel": True}
    rounds = simulate(validate(cartel)).rounds
    assert (rounds["reward"] == 0).all() and (rounds["participants"] == 0).all()
    assert (rounds["degenerate_reason"] == "nobody_trained;no_market").all()


@pytest.mark.parametrize("clients", [2, 3, 5])
def test_2c_small_markets_with_noise_above_the_clip_are_flagged(clients):
    rounds = simulate(validate(game(population__clients=clients, incentive__lam=15.0))).rounds
    assert rounds["noise_norm_over_clip"].between(1.4, 2.9).all()
    assert kinds(rounds) == {"noise"}
    calm = simulate(validate(game(population__clients=clients))).rounds  # λ = 0.01
    assert (calm["noise_norm_over_clip"] < 0.5).all() and not calm["degenerate"].any()


# ------------------------------------------------------------------ 3. knife edge


def test_3_a_marginal_client_that_moves_r_star_is_a_knife_edge():
    """ν = (1, 1, 1.98): Theorem 1 keeps the third client with C_3 = 2(2 − 1.98)/3.98² ≈
    0.0025 (ρ 1 % of the others'), and its 1/C_3 in A_t makes R* about 4.7 times what it is
    without it. The old ρ-ratio rule (1e-3) never fired; the impact column says 79 %."""
    nu = {"dist": "list", "values": [1.0, 1.0, 1.98]}
    result = simulate(validate(game(population__privacy_value=nu)))
    rounds, clients = result.rounds, result.clients
    first = clients[clients["round"] == 1].sort_values("client_id")
    assert first["rho"].iloc[2] / first["rho"].iloc[0] == pytest.approx(0.0101, abs=5e-4)
    assert (rounds["knife_edge_impact"] > 0.75).all()
    assert kinds(rounds) == {"knife_edge"}
    nu["values"] = [1.0, 1.0, 1.2]  # a third client well inside: R* moves 10 %, no flag
    calm = simulate(validate(game(population__privacy_value=nu))).rounds
    assert calm["knife_edge_impact"].between(0.05, 0.2).all() and not calm["degenerate"].any()


# ------------------------------------------------------------------ 4. convergence


def test_4a_a_stationary_cartel_converges_though_its_members_would_defect():
    """A fixed reward and a cartel of 3 of 10 with nearly equal ν: play is the cartel
    equilibrium from round 1 (eq_distance 0). A member alone would gain 6 % of its payment by
    defecting, which the old gap counted (> 0.05: never converged); the cartel as one player
    has no gap."""
    data = game(
        rounds=12,
        population__clients=10,
        population__colluders=3,
        incentive={"kind": "fixed"},
        game={"cartel": True},
    )
    rounds = simulate(validate(data)).rounds.assign(run_id="cartel")
    assert (rounds["eq_distance"] < 1e-9).all()
    assert (rounds["cartel_defection_gain_norm_max"] > 0.05).all()
    assert (rounds["nash_gap_ante_norm_max"] < 1e-9).all()
    row = settled_means(rounds).iloc[0]
    assert row["converged"] and row["converged_round"] == 1.0 and row["trend"] == 0.0
    table = equilibrium_table(rounds.assign(cell=1), by=["cell"])
    assert not table[["reward", "sum_rho", "stretch_accuracy"]].isna().any(axis=None)


def test_4b_qi_dpfl_at_the_papers_discount_gets_an_equilibrium_table():
    runs = []
    for clients in (5, 8):
        data = game(rounds=12, population__clients=clients)
        runs.append(simulate(validate(data)).rounds.assign(run_id=f"n{clients}", n=clients))
    rounds = pd.concat(runs, ignore_index=True)
    table = equilibrium_table(rounds, by=["n"]).set_index("n")
    assert (table["converged"] == 1.0).all()
    assert table["trend"].to_numpy() == pytest.approx(0.9429**-0.5 - 1, rel=1e-6)
    assert not table[["reward", "sum_rho", "welfare"]].isna().any(axis=None)
    plain = equilibrium_table(rounds, by=["n"], criteria=Criteria(detrend=False))
    assert (plain["converged"] == 0.0).all() and plain["reward"].isna().all()  # as it was


# ------------------------------------------------------------------ 5. counts


def test_5_counts_say_how_many_runs_stand_behind_each_number(tiny):
    """Four replicates, a target that two of them reach: "2 of 4 reached", the interval
    inside the horizon, and the final accuracy apart from the converged-stretch mean."""
    tiny["rounds"] = 5
    frames = []
    for replicate in range(4):
        tiny["seed"] = 10 + replicate
        rounds = simulate(validate(tiny)).rounds
        frames.append(rounds.assign(run_id=f"r{replicate}", num_clients=12, cell=1))
    rounds = pd.concat(frames, ignore_index=True)
    best = sorted(rounds.groupby("run_id")["test_accuracy"].max())
    target = (best[1] + best[2]) / 2  # exactly two runs reach it
    per_run = run_metrics(rounds, target=target).assign(cell=1)
    table = aggregate(per_run, by=["cell"])
    row = table.iloc[0]
    assert row["n"] == 4 and row["rounds_to_target_n"] == 2 and row["final_accuracy_n"] == 4
    assert 1.0 <= row["rounds_to_target_lo"] <= row["rounds_to_target_hi"] <= 5.0
    text = with_ci(table, ["cell"], ["rounds_to_target", "final_accuracy"]).iloc[0]
    assert text["rounds_to_target"].endswith("(2 of 4 reached)")
    assert "of 4" not in text["final_accuracy"]


# ------------------------------------------------------------------ 6. knobs without effect


def test_6_a_topology_no_plug_in_reads_is_named_and_changes_nothing():
    """The study's small world under a game whose plug-ins never read the graph: validation
    names the key, and the tables equal the star's (the faults' straggler coins no longer
    depend on the graph's edges)."""
    from fedgame.scenario.effects import idle_keys

    small_world = game(
        network__topology={"kind": "watts_strogatz", "k": 2, "p": 0.3},
        population__straggle_prob=0.3,
    )
    scenario = validate(small_world)
    assert [k.key for k in idle_keys(scenario)] == ["network.topology"]
    star = simulate(validate(game(population__straggle_prob=0.3))).rounds
    rounds = simulate(scenario).rounds
    timing = [c for c in rounds if "time" in c]
    pd.testing.assert_frame_equal(star.drop(columns=timing), rounds.drop(columns=timing))
    assert rounds["stragglers"].sum() > 0  # the coins were drawn, the same ones
