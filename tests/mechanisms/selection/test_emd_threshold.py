"""EMD-threshold selection (QI-DPFL Eq. 11) and its bad-input error."""

from __future__ import annotations

import numpy as np
import pytest

from fedgame.cli import main
from fedgame.data.quality import emd_to_population, emd_to_uniform
from fedgame.errors import ScenarioError
from fedgame.mechanisms.selection.emd_threshold import EmdThreshold, quantile_selection
from fedgame.views import ClientView, RoundInfo, SetupContext

COUNTS = [(10, 0), (5, 5), (0, 10), (6, 4)]  # pooled (21, 19)/40


def ctx():
    clients = tuple(
        ClientView(i, sum(c), 0.0, 1.0, 10.0, 1e-5, 0.0, 1.0, 1e-5, 0.0, False, label_counts=c)
        for i, c in enumerate(COUNTS)
    )
    ctx = SetupContext(
        num_clients=len(clients), rounds=3, clients=clients, planned_participations=3
    )
    return ctx, clients


def test_theta_is_eq11_and_quantile_selects_share():
    sel = EmdThreshold(EmdThreshold.Config(quantile=0.5))
    c, clients = ctx()
    sel.prepare(c, rng=np.random.default_rng(0))
    # hand: P_a = (0.525, 0.475); theta = 2*|p0 - 0.525| = (0.95, 0.05, 1.05, 0.15)
    np.testing.assert_allclose(list(sel.theta.values()), [0.95, 0.05, 1.05, 0.15])
    np.testing.assert_allclose(list(sel.theta.values()), emd_to_population(np.array(COUNTS)))
    assert sel.eligible_ids() == frozenset({1, 3})
    out, metrics = sel.select(clients, info=RoundInfo(1, 3, 4), rng=np.random.default_rng(0))
    assert out.client_ids == (1, 3)
    assert metrics["emd_eligible"] == 2  # just above the largest θ chosen, θ_3 = 0.15
    assert metrics["emd_threshold"] == np.nextafter(sel.theta[3], np.inf)
    assert quantile_selection(np.arange(20.0), share=0.75).sum() == 15


def test_absolute_threshold_uniform_reference_and_per_round():
    sel = EmdThreshold(EmdThreshold.Config(threshold=0.5, reference="uniform", mode="per_round"))
    c, clients = ctx()
    sel.prepare(c, rng=np.random.default_rng(0))
    np.testing.assert_allclose(list(sel.theta.values()), emd_to_uniform(np.array(COUNTS)))
    assert sel.eligible_ids() is None  # per round: not a static set
    out, metrics = sel.select(clients[1:], info=RoundInfo(1, 3, 4), rng=np.random.default_rng(0))
    assert out.client_ids == (1, 3)  # theta_uniform = (1, 0, 1, 0.2) < 0.5
    assert metrics == {"emd_threshold": 0.5, "emd_eligible": 2.0}


def test_threshold_selecting_nobody_names_threshold_and_range():
    sel = EmdThreshold(EmdThreshold.Config(threshold=0.01))
    with pytest.raises(ScenarioError, match=r"selection.threshold.*\[0.05, 1.05\]"):
        sel.prepare(ctx()[0], rng=np.random.default_rng(0))


def test_exactly_one_rule_required(tiny):
    from fedgame.scenario.load import validate

    tiny["selection"] = {"kind": "emd_threshold"}
    with pytest.raises(ScenarioError, match="selection"):
        validate(tiny)


def test_cli_impossible_threshold_exits_2_and_writes_nothing(
    tiny, write_scenario, tmp_path, capsys
):
    tiny["selection"] = {"kind": "emd_threshold", "threshold": 1e-6}
    out = tmp_path / "results"
    assert main(["run", str(write_scenario(tiny)), "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "selection.threshold" in err and "EMD" in err and "selects no client" in err
    assert not out.exists() or not any(out.rglob("*"))


def test_quantile_end_to_end(tiny):
    from fedgame.run.single import simulate
    from fedgame.scenario.load import validate

    tiny["selection"] = {"kind": "emd_threshold", "quantile": 0.5}
    tiny["privacy"] = {"kind": "none"}  # budgets planned for 2 participations would end round 3
    tiny["population"]["straggle_prob"] = 0.0
    tiny["network"]["faults"]["link_failure"] = 0.0
    result = simulate(validate(tiny))
    assert (result.rounds["selected"] == 6).all() and (result.rounds["emd_eligible"] == 6).all()
    first = result.clients[result.clients["round"] == 1]
    chosen = first.loc[first["selected"], "emd_theta"]
    assert chosen.max() < first.loc[~first["selected"], "emd_theta"].min()
