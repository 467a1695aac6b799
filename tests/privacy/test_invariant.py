"""The model checks the privacy invariant itself (fedgame.privacy.invariant).

Each cheat below breaks the budget path from outside it, as a plug-in module could at import:
the guard admits everything, the charge is skipped, or the ledger is rewound. Each must stop the
run with status ``privacy_violation`` naming the clients, keep the rounds before, and (from the
command line) exit with code 5. A plug-in module that patches the guard is run end to end in a
subprocess, so its patch cannot leak into other tests.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

import fedgame
import fedgame.privacy.budget as budget_module
from fedgame.errors import PrivacyViolation
from fedgame.privacy.accountants.rdp import RdpAccountant
from fedgame.privacy.base import Charge, Charges
from fedgame.privacy.budget import PrivacyBudget
from fedgame.privacy.invariant import PrivacyInvariant
from fedgame.run.single import simulate
from fedgame.scenario.load import validate
from fedgame.views import Response

EXIT_PRIVACY_VIOLATION = 5

#: a plug-in module: a policy that always takes part, and a patch of the budget's guard so
#: that every release is admitted
GUARD_PATCHING_PLUGIN = """
import numpy as np
import fedgame.privacy.budget as budget
from fedgame.registry import register
from fedgame.views import Response

budget.within = lambda epsilon, total: np.ones(np.shape(epsilon), dtype=bool)


@register("policy", "reckless")
class Reckless:
    \"\"\"Always takes part, whatever its budget says.\"\"\"

    chooses = "default"

    def __init__(self, config):
        del config

    def respond(self, offer, *, me, market):
        return Response(me.client_id, participate=True)
"""


class Reckless:
    """Always takes part, whatever its budget says."""

    chooses = "default"

    def __init__(self, config: object) -> None:
        del config

    def respond(self, offer: Any, *, me: Any, market: Any) -> Response:
        return Response(me.client_id, participate=True)


def _overspending(tiny: dict[str, Any], policy: str = "always") -> dict[str, Any]:
    """Every client selected every round, each release sized to its whole budget."""
    tiny["policy"] = {"kind": policy}
    tiny["rounds"] = 4
    tiny["selection"] = {"kind": "all"}
    tiny["privacy"] = {"kind": "gaussian", "clip": 1.0, "participations": 1}
    tiny["network"] = {"faults": {"kind": "independent", "link_failure": 0.0}}
    tiny["population"]["straggle_prob"] = 0.0
    return tiny


def test_an_honest_run_of_the_same_scenario_withdraws_instead(tiny):
    result = simulate(validate(_overspending(tiny)))
    assert result.manifest["status"] == "completed"
    assert (result.rounds["trained"].iloc[1:] == 0).all()  # their budgets are spent
    spent = result.clients.groupby("client_id")["epsilon_spent"].max()
    totals = result.clients.groupby("client_id")["epsilon_total"].first()
    assert (spent <= totals * (1 + 1e-9)).all()


def test_a_patched_guard_is_caught_by_the_model(tiny, monkeypatch, scratch_registry):
    scratch_registry.register("policy", "reckless")(Reckless)
    honest = simulate(validate(_overspending(copy.deepcopy(tiny), "reckless")))
    assert honest.manifest["status"] == "completed"  # the guard withdraws every release
    assert honest.rounds["withdrawn_budget"].iloc[1:].tolist() == [12, 12, 12]
    monkeypatch.setattr(budget_module, "within", lambda e, t: np.ones(np.shape(e), dtype=bool))
    result = simulate(validate(_overspending(tiny, "reckless")))
    assert result.manifest["status"] == "privacy_violation"
    violation = result.manifest["privacy_violation"]
    assert violation["round"] == 2 and violation["why"] == "spent past their budget"
    assert violation["client_ids"] == sorted(violation["client_ids"]) and violation["client_ids"]
    assert all(e > b for e, b in zip(violation["epsilon_spent"], violation["bound"]))
    assert "privacy violation in round 2" in result.manifest["message"]
    assert result.manifest["rounds_completed"] == 1 and list(result.rounds["round"]) == [1]


def test_a_skipped_charge_is_caught(tiny, monkeypatch):
    def skip(self: PrivacyBudget, sent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self._admitted = None
        return np.zeros(0, dtype=np.int64), np.zeros(0)

    monkeypatch.setattr(PrivacyBudget, "charge_admitted", skip)
    result = simulate(validate(tiny))
    assert result.manifest["status"] == "privacy_violation"
    violation = result.manifest["privacy_violation"]
    assert violation["round"] == 1
    assert violation["why"] == "released an update the budget did not charge"
    assert result.rounds.empty


def test_a_rewound_ledger_is_caught(tiny, monkeypatch):
    honest = PrivacyBudget.charge_admitted

    def rewind(self: PrivacyBudget, sent: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        out = honest(self, sent)
        if self.spent.max() > 0 and self.accountant.epsilon().max() > 0:
            snapshot = self.spent.copy()
            self.accountant.start(self.delta_total)  # forget everything spent
            self.spent = snapshot
        return out

    monkeypatch.setattr(PrivacyBudget, "charge_admitted", rewind)
    result = simulate(validate(tiny))
    assert result.manifest["status"] == "privacy_violation"
    assert "rewound" in result.manifest["privacy_violation"]["why"]


def test_the_command_line_exits_5_naming_the_clients_with_a_guard_patching_plugin(tiny, tmp_path):
    (tmp_path / "cheat_guard.py").write_text(GUARD_PATCHING_PLUGIN)
    scenario = _overspending(tiny, "reckless") | {"plugins": ["cheat_guard"]}
    path = tmp_path / "cheat.yaml"
    path.write_text(yaml.safe_dump(scenario))
    env = {k: v for k, v in os.environ.items() if k != "FEDGAME_TRUST_PLUGINS"}
    env["PYTHONPATH"] = str(Path(fedgame.__file__).parents[1])  # this checkout's fedgame
    out = tmp_path / "results"
    done = subprocess.run(
        [sys.executable, "-m", "fedgame", "run", str(path), "--out", str(out), "--trust-plugins"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=300,
    )
    assert done.returncode == EXIT_PRIVACY_VIOLATION, done.stderr
    assert "Traceback" not in done.stderr
    line = done.stderr.strip().splitlines()[-1]
    assert "privacy violation in round 2: clients 0 (ε" in line and "kept 1 rounds" in line
    (run_dir,) = (out / "tiny").iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "privacy_violation"
    assert manifest["privacy_violation"]["client_ids"][0] == 0
    assert [p["module"] for p in manifest["plugins"]] == ["cheat_guard"]
    assert len(pd.read_parquet(run_dir / "rounds.parquet")) == 1


# --- the check alone ---------------------------------------------------------------------


def _gaussian(z: float, n: int) -> Charges:
    return Charges.of([Charge(noise="gaussian", noise_multiplier=z)] * n)


@pytest.fixture
def ledger() -> RdpAccountant:
    accountant = RdpAccountant(RdpAccountant.Config())
    accountant.start(np.full(4, 1e-5))
    return accountant


def test_within_budget_passes_and_returns_the_accountants_epsilon(ledger):
    check = PrivacyInvariant(ledger, epsilon_total=np.full(4, 100.0))
    ids = np.array([0, 2])
    ledger.charge(ids, _gaussian(1.0, 2))
    spent = check.check(1, released=ids, charged=ids, recorded=np.zeros(2))
    np.testing.assert_allclose(spent, ledger.epsilon(ids))
    assert (spent > 0).all()


def test_past_the_budget_names_only_the_clients_past_it(ledger):
    check = PrivacyInvariant(ledger, epsilon_total=np.array([100.0, 100.0, 0.5, 100.0]))
    ids = np.array([0, 2])
    ledger.charge(ids, _gaussian(1.0, 2))
    with pytest.raises(PrivacyViolation) as info:
        check.check(7, released=ids, charged=ids, recorded=np.zeros(2))
    assert info.value.client_ids == [2] and info.value.round == 7
    assert info.value.bounds == [0.5]


def test_the_totals_are_the_models_copy(ledger):
    totals = np.full(4, 0.5)
    check = PrivacyInvariant(ledger, epsilon_total=totals)
    totals[:] = 1e9  # a plug-in raising the budget's totals does not move the bound
    ledger.charge(np.array([1]), _gaussian(1.0, 1))
    with pytest.raises(PrivacyViolation):
        check.check(1, released=np.array([1]), charged=np.array([1]), recorded=np.zeros(1))
    with pytest.raises(ValueError):
        check.epsilon_total[0] = 1e9


def test_a_nan_epsilon_is_a_violation(ledger, monkeypatch):
    check = PrivacyInvariant(ledger, epsilon_total=np.full(4, 100.0))
    monkeypatch.setattr(ledger, "epsilon", lambda ids=None: np.full(len(ids), np.nan))
    with pytest.raises(PrivacyViolation):
        check.check(1, released=np.array([3]), charged=np.array([3]), recorded=np.zeros(1))


def test_a_round_without_releases_checks_nothing(ledger):
    check = PrivacyInvariant(ledger, epsilon_total=np.zeros(4))
    none = np.zeros(0, dtype=np.int64)
    assert len(check.check(1, released=none, charged=none, recorded=np.zeros(0))) == 0


def test_the_message_is_one_line_and_bounded():
    exc = PrivacyViolation(3, range(50), np.ones(50), np.zeros(50))
    text = str(exc)
    assert "\n" not in text and "and 40 more" in text and len(text) < 800
