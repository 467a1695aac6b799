"""Locate, import and run the scripts under analysis/ (used by the tests of this folder)."""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sys
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]
ANALYSIS = REPO / "analysis"
SCRIPTS = sorted(p.stem for p in ANALYSIS.glob("*.py") if not p.stem.startswith("_"))
#: scripts that load a dataset which may be missing (they take --dataset)
WITH_DATASET = {
    "dpfl_bcs",
    "dpfl_bcs_ablation",
    "privacy_aware",
    "privacy_aware_ablation",
    "queries_replies",
    "qi_dpfl",
    "lightdp",
    "qi_dpfl_populations",
    "lightdp_ablation",
    "qi_dpfl_ablation",
    "queries_replies_ablation",
}


def load(name: str) -> ModuleType:
    """Import ``analysis/<name>.py`` as a module (its ``__main__`` block does not run)."""
    if str(ANALYSIS) not in sys.path:
        sys.path.insert(0, str(ANALYSIS))
    spec = importlib.util.spec_from_file_location(f"analysis_{name}", ANALYSIS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def run(name: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``python analysis/<name>.py ARGS`` from the repository root."""
    cmd = [sys.executable, str(ANALYSIS / f"{name}.py"), *args]
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout)


def parse_command(command: str) -> tuple[str, list[str]]:
    """``"python analysis/x.py --a 1"`` -> ``("x", ["--a", "1"])`` (asserts the form)."""
    words = shlex.split(command)
    assert words[:1] == ["python"], command
    assert words[1].startswith("analysis/") and words[1].endswith(".py"), command
    return Path(words[1]).stem, words[2:]
