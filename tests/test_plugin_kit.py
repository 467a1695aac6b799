"""The plug-in kit (``fedgame.kit``) and the worked plug-ins of docs/plugins.md.

``docs/examples/posted_price/`` holds a posted-price incentive and a price-taking policy
written against ``fedgame.kit`` alone, beside the scenario that loads them. The scenario runs
here through the command line from another folder, and its tables are checked against what
the plug-ins' docstrings promise; the plug-ins also pass the registry's behavioural
contracts (``tests/contracts``), registered into a scratch copy of the registry.
"""

from __future__ import annotations

import ast
import doctest
import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

import fedgame.kit as kit

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "docs" / "examples" / "posted_price"
MODULE = EXAMPLE / "posted_price.py"
SCENARIO = EXAMPLE / "posted_price.yaml"
DOC = REPO / "docs" / "plugins.md"

#: the run of the worked scenario is a module fixture: its tests stay on one xdist worker
RUN = pytest.mark.xdist_group("plugin_kit_run")


def _load(path: Path, name: str) -> ModuleType:
    """Execute the file ``path`` as a module named ``name`` (in ``sys.modules`` while it
    runs, so pydantic resolves its annotations)."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return module


# --- the worked scenario, run as a user runs it --------------------------------------------


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``python -m fedgame run <abs path>/posted_price.yaml --trust-plugins`` from an empty
    folder elsewhere, the checkout on ``PYTHONPATH``; the run's folder."""
    work = tmp_path_factory.mktemp("elsewhere")
    env = {**os.environ, "PYTHONPATH": str(REPO), "FEDGAME_CACHE": "off"}
    env.pop("FEDGAME_TRUST_PLUGINS", None)
    done = subprocess.run(
        [sys.executable, "-m", "fedgame", "run", str(SCENARIO), "--trust-plugins", "--out", "tmp",
         "--set", "training.device=cpu"],
        cwd=work, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # the policy declares the keys it reads (ν, the budget): no idle-key warning
    assert "has no effect" not in done.stderr, done.stderr
    runs = sorted((work / "tmp" / "posted_price").iterdir())
    assert len(runs) == 1
    return runs[0]


@pytest.fixture(scope="module")
def tables(run_dir: Path) -> tuple[pd.DataFrame, pd.DataFrame, dict[str, Any]]:
    rounds = pd.read_parquet(run_dir / "rounds.parquet")
    clients = pd.read_parquet(run_dir / "clients.parquet")
    resolved = yaml.safe_load((run_dir / "scenario.resolved.yaml").read_text())
    return rounds, clients, resolved


def _rho(epsilon: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """The zCDP ρ an (ε, δ) budget holds, written as (sqrt(L + ε) − sqrt(L))², L = ln(1/δ)
    (the kit writes it another way)."""
    log_term = np.log(1.0 / delta)
    return (np.sqrt(log_term + epsilon) - np.sqrt(log_term)) ** 2


def _left_at_play(clients: pd.DataFrame) -> pd.Series:
    """Each row's remaining zCDP budget when its round was offered: what its ε spent at the
    end of the previous round leaves (0 spent before round 1)."""
    c = clients.sort_values(["client_id", "round"])
    before = c.groupby("client_id")["epsilon_spent"].shift(1).fillna(0.0)
    left = _rho(c["epsilon_total"].to_numpy(), c["delta"].to_numpy()) - _rho(
        before.to_numpy(), c["delta"].to_numpy()
    )
    return pd.Series(np.maximum(left, 0.0), index=c.index).reindex(clients.index)


@RUN
def test_the_run_completes_and_records_its_module(run_dir):
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and manifest["rounds_completed"] == 8
    (module,) = [m for m in manifest["plugins"] if m["module"] == "posted_price"]
    assert Path(module["file"]).resolve() == MODULE.resolve()


@RUN
def test_the_price_moves_towards_the_target_uptake_as_its_docstring_says(tables):
    rounds, clients, resolved = tables
    knobs = resolved["incentive"]
    offered = clients.groupby("round")["rho_offered"].sum(min_count=1).fillna(0.0)
    price = rounds.set_index("round")["price"]
    uptake = rounds.set_index("round")["uptake"]
    assert price.loc[1] == knobs["price"] and math.isnan(uptake.loc[1])
    moved = 0
    for t in price.index[1:]:
        u = offered.loc[t - 1]  # U_(t-1): the ρ the willing clients offered last round
        assert uptake.loc[t] == pytest.approx(u, rel=1e-12)
        factor = knobs["max_change"] if u <= 0 else (knobs["target"] / u) ** knobs["step"]
        factor = min(max(factor, 1 / knobs["max_change"]), knobs["max_change"])
        expected = min(max(price.loc[t - 1] * factor, knobs["min_price"]), knobs["max_price"])
        assert price.loc[t] == pytest.approx(expected, rel=1e-12)
        assert np.sign(price.loc[t] - price.loc[t - 1]) == np.sign(knobs["target"] - u)
        moved += price.loc[t] != price.loc[t - 1]
    assert moved >= 5
    assert (rounds["reward"] == rounds["price"] * knobs["target"]).all()


@RUN
def test_every_paid_client_is_paid_the_price_times_its_rho(tables):
    rounds, clients, _ = tables
    rows = clients.merge(rounds[["round", "price"]], on="round")
    paid = rows[rows["reward"] > 0]
    assert len(paid) > 50
    assert paid["uploaded"].all()
    np.testing.assert_allclose(paid["reward"], paid["price"] * paid["rho_offered"], rtol=1e-12)
    delivered = rows[rows["uploaded"]]
    assert delivered["rho_offered"].notna().all() and (delivered["reward"] > 0).all()
    assert (rows.loc[~rows["uploaded"], "reward"] == 0).all()  # stragglers are not paid
    assert rows["straggled"].any()
    total = rows.groupby("round")["reward"].sum()
    np.testing.assert_allclose(rounds.set_index("round")["reward_total"], total, rtol=1e-12)
    sum_rho = delivered.groupby("round")["rho_offered"].sum()
    np.testing.assert_allclose(rounds.set_index("round")["sum_rho"], sum_rho, rtol=1e-12)


@RUN
def test_the_price_taker_stays_within_its_budget_and_declines_when_it_cannot_pay(tables):
    rounds, clients, resolved = tables
    min_rho = resolved["policy"]["min_rho"]
    rows = clients.merge(rounds[["round", "price"]], on="round")
    left = _left_at_play(rows)
    took = rows["participating"].to_numpy()
    best = np.minimum(rows["price"] / rows["privacy_value"], left)  # argmax of pρ − νρ²/2
    np.testing.assert_allclose(rows.loc[took, "rho_offered"], best[took], rtol=1e-9)
    assert (rows.loc[took, "rho_offered"] <= left[took] * (1 + 1e-9)).all()
    broke = left < min_rho
    assert broke.sum() >= 5, "the scenario should run some budgets out"
    assert (rows.loc[broke, "decline_reason"] == "budget").all()
    assert (rows.loc[~broke, "participating"]).all()  # the price always bought min_rho
    assert (rounds["withdrawn_budget"] == 0).all()  # the guard never had to step in
    assert (rows["epsilon_spent"] <= rows["epsilon_total"] * (1 + 1e-9)).all()
    assert rows.groupby("client_id")["epsilon_spent"].is_monotonic_increasing.all()


@RUN
def test_a_posted_price_adds_no_contest_columns(tables):
    rounds, clients, _ = tables
    for name in ("nash_gap_max", "eq_distance", "knife_edge_impact", "sum_rho_played"):
        assert name not in rounds.columns
    for name in ("rho_equilibrium", "nash_gap", "payment"):
        assert name not in clients.columns
    assert {"noise_norm_over_clip", "failed_edges", "degenerate", "degenerate_reason"} <= set(
        rounds.columns
    )
    assert rounds["noise_norm_over_clip"].notna().all()


# --- written against the kit alone ---------------------------------------------------------


def test_the_examples_import_nothing_of_fedgame_but_the_kit():
    for path in EXAMPLE.glob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        seen = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                if name.split(".")[0] == "fedgame":
                    assert name == "fedgame.kit", f"{path.name} imports {name}"
                    seen.add(name)
        assert seen == {"fedgame.kit"}, path.name


def test_the_examples_doctests_pass(registered):
    result = doctest.testmod(registered, verbose=False)
    assert result.attempted >= 2 and result.failed == 0


# --- the kit -------------------------------------------------------------------------------


def test_every_kit_name_resolves_to_fedgames_own_object_with_a_docstring():
    assert len(kit.__all__) == len(set(kit.__all__))
    for name in kit.__all__:
        obj = getattr(kit, name)
        assert (obj.__doc__ or "").strip(), f"fedgame.kit.{name} has no docstring"
        module = getattr(obj, "__module__", "")
        assert module.startswith("fedgame.") and module != "fedgame.kit", name  # re-exported
        assert getattr(sys.modules[module], name) is obj


def test_the_kit_docstring_says_what_each_name_is_for():
    text = kit.__doc__ or ""
    for name in kit.__all__:
        assert re.search(rf"\b{re.escape(name)}\b", text), f"the kit's docstring omits {name}"


def test_the_kit_exports_every_name_the_kit_plugins_use():
    tree = ast.parse(MODULE.read_text(encoding="utf-8"))
    used = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "fedgame.kit"
        for alias in node.names
    }
    assert used and used <= set(kit.__all__)


def test_importing_the_kit_imports_no_torch_pandas_or_mesa():
    code = (
        "import sys, fedgame.kit; "
        "print(sorted(m for m in ('torch', 'pandas', 'mesa', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --- the docs' excerpts are the files ------------------------------------------------------


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def test_the_docs_excerpts_are_the_example_files():
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Writing a mechanism") :]
    source = MODULE.read_text(encoding="utf-8")
    python = _blocks(section, "python")
    assert len(python) >= 3
    for block in python:
        assert block in source, f"docs/plugins.md excerpt is not in posted_price.py:\n{block}"
    (scenario,) = [b for b in _blocks(section, "yaml") if "plugins: [posted_price]" in b]
    assert scenario in SCENARIO.read_text(encoding="utf-8")


# --- the registry's behavioural contracts, pointed at the example plug-ins -----------------

CONTRACTS = REPO / "tests" / "contracts"


@pytest.fixture(scope="module")
def contracts() -> dict[str, ModuleType]:
    return {
        name: _load(CONTRACTS / f"{name}.py", f"_kit_{name}")
        for name in ("test_behaviour", "test_registry", "test_declared_capabilities")
    }


@pytest.fixture
def registered(scratch_registry):
    """The example module, executed into a scratch copy of the registry (restored after,
    with the column dictionary's cache, which reads the registry)."""
    from fedgame import columns

    module = _load(MODULE, f"posted_price_{uuid.uuid4().hex[:8]}")
    yield module
    columns._writers.cache_clear()


def test_the_examples_pass_the_behavioural_contracts(registered, contracts, tiny, monkeypatch):
    from fedgame import registry

    behaviour = contracts["test_behaviour"]
    behaviour.test_a_policy_answers_exactly_the_clients_asked(
        yaml.safe_load(yaml.safe_dump(tiny)), monkeypatch, "price_taker"
    )
    behaviour.test_an_incentive_pays_only_delivered_clients(
        yaml.safe_load(yaml.safe_dump(tiny)), monkeypatch, "posted_price"
    )
    checks = contracts["test_registry"]
    for family, name in (("incentive", "posted_price"), ("policy", "price_taker")):
        entry = registry.entry(family, name)
        assert entry.cls.__module__ == registered.__name__
        checks.test_plugin_has_doc_and_strict_config(entry)
        checks.test_unknown_param_is_rejected_with_its_key(entry)
        checks.test_every_knob_has_a_one_line_description(entry)
        checks.test_every_registered_plugin_has_its_familys_members(family)
    contracts["test_declared_capabilities"].test_the_gamma_knob_starts_at_the_declared_gamma(
        yaml.safe_load(yaml.safe_dump(tiny)), registry.entry("incentive", "posted_price")
    )


def test_a_bad_knob_of_the_example_names_its_key(registered):
    from fedgame import registry
    from fedgame.errors import ScenarioError

    with pytest.raises(ScenarioError) as info:
        registry.validate(
            "incentive", {"kind": "posted_price", "price": 5.0, "max_price": 1.0}, key="incentive"
        )
    assert info.value.key == "incentive" and "max_price" in str(info.value)
    with pytest.raises(ScenarioError) as info:
        registry.validate("incentive", {"kind": "posted_price", "step": 1.5}, key="incentive")
    assert info.value.key == "incentive.step"
