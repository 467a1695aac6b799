"""End-to-end behaviour of FedGameModel on tiny scenarios."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from fedgame.agents.client import CLIENT_COLUMNS
from fedgame.collect import ROUND_COLUMNS
from fedgame.model import FedGameModel
from fedgame.run.single import simulate
from fedgame.scenario.load import validate

NONDETERMINISTIC = ["wall_time_s"]


def run(data, **kw):
    return simulate(validate(data), **kw)


def test_tables_have_one_row_per_round_and_per_client_round(tiny):
    result = run(tiny)
    n, t = tiny["population"]["clients"], tiny["rounds"]
    assert list(result.rounds["round"]) == list(range(1, t + 1))
    assert set(ROUND_COLUMNS) <= set(result.rounds.columns)
    assert len(result.clients) == n * t
    assert set(CLIENT_COLUMNS) <= set(result.clients.columns)
    assert result.clients.groupby("round")["client_id"].nunique().eq(n).all()


def test_same_seed_identical_tables_other_seed_differs(tiny):
    a, b = run(tiny), run(tiny)
    pd.testing.assert_frame_equal(
        a.rounds.drop(columns=NONDETERMINISTIC), b.rounds.drop(columns=NONDETERMINISTIC)
    )
    pd.testing.assert_frame_equal(a.clients, b.clients)
    tiny["seed"] = 4
    c = run(tiny)
    assert not a.clients.equals(c.clients)


def test_selection_respects_k_and_only_participants(tiny):
    clients = run(tiny).clients
    per_round = clients.groupby("round")["selected"].sum()
    assert (per_round <= tiny["selection"]["k"]).all()
    assert not (clients["selected"] & ~clients["participating"]).any()
    assert not (clients["uploaded"] & ~clients["selected"]).any()
    assert not (clients["uploaded"] & clients["straggled"]).any()


def test_only_uploaded_clients_are_charged(tiny):
    clients = run(tiny).clients
    charged = clients["epsilon_charged"] > 0
    assert (charged == clients["uploaded"]).all()
    spent = clients.groupby("client_id")["epsilon_charged"].sum()
    final = clients[clients["round"] == tiny["rounds"]].set_index("client_id")["epsilon_spent"]
    np.testing.assert_allclose(spent.sort_index(), final.sort_index())


def test_budget_never_exceeded_and_clients_drop_out(tiny):
    tiny["rounds"] = 8
    tiny["selection"] = {"kind": "all"}
    tiny["population"]["budget"]["epsilon"] = {"dist": "uniform", "low": 1.0, "high": 2.0}
    tiny["privacy"]["participations"] = 4
    result = run(tiny)
    c = result.clients
    assert (c["epsilon_spent"] <= c["epsilon_total"] * (1 + 1e-9)).all()
    assert (c.loc[c["round"] == 8, "decline_reason"] == "budget").any()
    assert result.rounds["active_clients"].iloc[-1] < tiny["population"]["clients"]


def test_training_improves_accuracy_without_noise(tiny):
    tiny["privacy"] = {"kind": "none"}
    tiny["rounds"] = 10
    tiny["population"]["straggle_prob"] = 0.0
    result = run(tiny)
    assert result.rounds["test_accuracy"].iloc[-1] > 0.5
    assert (result.clients["epsilon_spent"] == 0).all()


def test_emd_column_matches_label_counts(tiny):
    model = FedGameModel(validate(tiny))
    counts = model.world.population["label_counts"].astype(float)
    freq = counts / counts.sum(1, keepdims=True)
    pop = counts.sum(0) / counts.sum()
    np.testing.assert_allclose([c.emd for c in model.clients], np.abs(freq - pop).sum(1))


def test_divergence_stops_and_keeps_rounds(tiny, tmp_path):
    tiny["privacy"] = {"kind": "none"}
    tiny["training"]["lr"] = 1e39  # overflows float32
    tiny["rounds"] = 5
    result = run(tiny, out_dir=tmp_path)
    assert result.manifest["status"] == "diverged"
    assert "non-finite" in result.manifest["message"]
    assert "round 1" in result.manifest["message"]
    assert result.manifest["rounds_completed"] == len(result.rounds) < 5
    assert (result.run_dir / "rounds.parquet").exists()


def test_run_folder_contents(tiny, tmp_path):
    from fedgame.analysis import load_run

    result = run(tiny, out_dir=tmp_path)
    files = sorted(p.name for p in result.run_dir.iterdir())
    assert files == ["clients.parquet", "manifest.json", "rounds.parquet", "scenario.resolved.yaml"]
    loaded = load_run(tmp_path / "tiny")
    assert loaded.status == "completed"
    pd.testing.assert_frame_equal(loaded.rounds, result.rounds)
    pd.testing.assert_frame_equal(loaded.clients, result.clients)
    assert loaded.manifest["seed"] == tiny["seed"]
    assert loaded.scenario["selection"] == {"kind": "uniform", "k": 5}
    assert {"torch", "mesa", "fedgame"} <= set(loaded.manifest["versions"])


def test_resolved_scenario_reruns_identically(tiny, tmp_path):
    first = run(tiny, out_dir=tmp_path)
    again = run(first.scenario)
    pd.testing.assert_frame_equal(first.clients, again.clients)


def test_resolved_scenario_of_a_mixed_population_reruns_identically(tiny, tmp_path):
    """Behaviours get their policies' defaults and the resolved file has no ``policy`` (giving
    both is refused), so the written file validates and reruns to the same tables."""
    tiny.pop("policy", None)
    tiny["population"]["behaviours"] = [
        {"kind": "always", "share": 0.5},
        {"kind": "fixed", "share": 0.5, "rho": 0.05},
    ]
    first = run(tiny, out_dir=tmp_path)
    written = yaml.safe_load(next(tmp_path.rglob("scenario.resolved.yaml")).read_text())
    assert "policy" not in written
    behaviours = written["population"]["behaviours"]
    assert behaviours[1]["rho"] == 0.05 and set(behaviours[1]) > {"kind", "share", "rho"}
    again = run(written)
    pd.testing.assert_frame_equal(first.clients, again.clients)
    pd.testing.assert_frame_equal(
        first.rounds.drop(columns="wall_time_s"), again.rounds.drop(columns="wall_time_s")
    )


@pytest.mark.parametrize("aggregation", ["fedavg", "mean"])
def test_aggregators_run(tiny, aggregation):
    tiny["aggregation"] = {"kind": aggregation}
    assert len(run(tiny).rounds) == tiny["rounds"]


def test_budget_guard_withdraws_clients_whose_real_price_is_too_high(tiny, scratch_registry):
    from fedgame.views import Response

    @scratch_registry.register("policy", "greedy_probe")
    class Greedy:
        """Always takes part, asking for five times its default per-round ε."""

        chooses = "epsilon"

        def __init__(self, config):
            del config

        def respond(self, offer, *, me, market):
            return Response(me.client_id, participate=True, epsilon=5 * me.epsilon_round)

    tiny["policy"] = {"kind": "greedy_probe"}
    tiny["selection"] = {"kind": "all"}
    tiny["rounds"] = 4
    tiny["privacy"]["participations"] = 8  # default ε = ε_total/8: 5x that fits once, not twice
    result = run(tiny)
    c = result.clients
    assert (c["epsilon_spent"] <= c["epsilon_total"] * (1 + 1e-9)).all()
    withdrawn = c[c["decline_reason"] == "budget"]
    assert len(withdrawn) > 0 and not withdrawn["selected"].any()
    assert not withdrawn["uploaded"].any()
    assert (result.rounds["selected"] == c.groupby("round")["selected"].sum().to_numpy()).all()


def test_a_selection_naming_a_non_candidate_stops_the_round(tiny):
    """Phase 4 checks the selection rule's answer: a client that did not answer yes (or an id
    outside the population) is refused, naming the rule, the round and the ids."""
    from fedgame.views import Selection

    model = FedGameModel(validate(tiny))
    n = len(model.table)

    def cheat(candidates, *, info, rng):
        return Selection((n + 3,))

    model.server.selection_rule.select = cheat
    with pytest.raises(
        RuntimeError, match=rf"chose clients that were not candidates in round 1: \[{n + 3}\]"
    ):
        model.step()
