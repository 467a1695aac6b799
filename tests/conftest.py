"""Shared fixtures: small scenarios that run in a second or two."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

# Property tests time individual examples; on a loaded 2-core machine that only makes them
# flaky, so no per-example deadline (the example counts are kept small instead).
# CI (HYPOTHESIS_PROFILE=ci, set by .ci/run) searches the same examples on every run, so a
# landing cannot hinge on the draw; locally every run searches afresh, and a failure it finds
# is kept as an @example.
settings.register_profile("fedgame", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "fedgame"))

# A shell without job control starts background commands (`make check &`) with SIGINT
# ignored, and children inherit that: the Ctrl-C tests (tests/run/test_signals.py,
# test_crash.py) would then wait on a run that never stops. They test what Ctrl-C in a
# terminal does, so the suite restores Python's own handler (which children see as the
# default disposition).
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

# Under pytest-xdist (`make check` runs one worker per core) each worker computes with one
# torch/BLAS thread, so the workers do not oversubscribe the cores; the subprocesses tests start
# inherit the same limits through the environment.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[_var] = "1"
    import torch

    torch.set_num_threads(1)

REPO = Path(__file__).resolve().parents[1]

TINY: dict[str, Any] = {
    "name": "tiny",
    "seed": 3,
    "rounds": 3,
    "population": {
        "clients": 12,
        "privacy_value": {"dist": "uniform", "low": 0.5, "high": 1.5},
        "budget": {"epsilon": {"dist": "uniform", "low": 5.0, "high": 10.0}, "delta": 1e-5},
        "straggle_prob": 0.1,
    },
    "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "dirichlet", "alpha": 1.0}},
    "model": {"kind": "logreg"},
    "training": {"local_steps": 2, "batch_size": 8, "lr": 0.1, "device": "cpu"},
    "selection": {"kind": "uniform", "k": 5},
    "privacy": {"kind": "gaussian", "clip": 1.0},
    "network": {"faults": {"kind": "independent", "link_failure": 0.1}},
}


@pytest.fixture
def scratch_registry(monkeypatch):
    """The registry, with every family a copy that the test may register into (restored after).

    The built-in plug-ins are loaded first: a copy taken before the lazy load would miss the
    plug-ins the load adds, and restoring it would lose them for every later test."""
    from fedgame import registry

    registry.ensure_loaded()
    for family in registry.FAMILIES:
        monkeypatch.setitem(registry._REGISTRY, family, dict(registry._REGISTRY[family]))
    return registry


@pytest.fixture
def tiny() -> dict[str, Any]:
    """A fresh copy of the tiny scenario as a dict."""
    return yaml.safe_load(yaml.safe_dump(TINY))


@pytest.fixture
def write_scenario(tmp_path: Path):
    """Write a dict (or raw text) as a scenario file and return its path."""

    def write(data: dict[str, Any] | str, name: str = "scenario.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
        return path

    return write


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """xdist group ``analysis_scripts``: the tests of tests/analysis_scripts that read the
    shared ``--quick`` run of every script (the module fixture ``quick``), so one worker makes
    it (``make check`` distributes with ``--dist loadgroup``); the folder's other tests spread."""
    for item in items:
        if "quick" in getattr(item, "fixturenames", ()) and "analysis_scripts" in item.path.parts:
            item.add_marker(pytest.mark.xdist_group("analysis_scripts"))
