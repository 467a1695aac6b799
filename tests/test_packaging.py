"""pyproject.toml declares exactly what fedgame imports; dev tools are pinned; any Python >= 3.11.

Imports are read with ``ast`` from every module under ``fedgame/``: an import executed when the
module loads (not inside a function, not under ``if TYPE_CHECKING``) must be a core dependency;
one inside a function may come from an optional extra (Ray). Import names are mapped to
distributions with ``importlib.metadata.packages_distributions`` (``yaml`` -> PyYAML).
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_name(spec: str) -> str:
    match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
    assert match, spec
    return _norm(match.group(1))


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(node: ast.AST, *, at_load: bool, out: list[tuple[str, bool]]) -> None:
    """Collect (top-level module name, runs when the module loads) under ``node``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import):
            out += [(a.name.split(".")[0], at_load) for a in child.names]
        elif isinstance(child, ast.ImportFrom) and child.level == 0 and child.module:
            out.append((child.module.split(".")[0], at_load))
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            _imports(child, at_load=False, out=out)
        elif isinstance(child, ast.If) and _is_type_checking(child):
            _imports(ast.Module(body=child.orelse, type_ignores=[]), at_load=at_load, out=out)
        else:
            _imports(child, at_load=at_load, out=out)


def third_party_imports() -> dict[str, dict[str, bool]]:
    """{distribution: {file: imported when the module loads}} for fedgame's third-party imports."""
    dists = packages_distributions()
    found: dict[str, dict[str, bool]] = {}
    for path in sorted((REPO / "fedgame").rglob("*.py")):
        pairs: list[tuple[str, bool]] = []
        _imports(ast.parse(path.read_text(encoding="utf-8")), at_load=True, out=pairs)
        for module, at_load in pairs:
            if module in sys.stdlib_module_names or module == "fedgame":
                continue
            dist = _norm(dists.get(module, [module])[0])
            files = found.setdefault(dist, {})
            name = str(path.relative_to(REPO))
            files[name] = files.get(name, False) or at_load
    return found


def test_the_import_reader_sees_lazy_and_type_only_imports():
    source = (
        "import numpy\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import torch\n"
        "def f():\n    import ray\nclass C:\n    import yaml\n"
    )
    pairs: list[tuple[str, bool]] = []
    _imports(ast.parse(source), at_load=True, out=pairs)
    assert pairs == [("numpy", True), ("typing", True), ("ray", False), ("yaml", True)]


def test_declared_dependencies_match_the_imports():
    core = {_requirement_name(s) for s in PROJECT["dependencies"]}
    extras = {
        _requirement_name(s)
        for name, specs in PROJECT["optional-dependencies"].items()
        if name != "dev"
        for s in specs
    }
    imports = third_party_imports()
    undeclared = {d: sorted(f) for d, f in imports.items() if d not in core | extras}
    assert not undeclared, f"imported but not declared in pyproject.toml: {undeclared}"
    at_load = {d: sorted(f for f, now in files.items() if now) for d, files in imports.items()}
    viz = {_requirement_name(s) for s in PROJECT["optional-dependencies"]["viz"]}
    # fedgame/viz is the dashboard, imported only by `fedgame dashboard`: its extra may load there
    optional_at_load = {
        d: f
        for d, f in at_load.items()
        if d not in core and [x for x in f if not (d in viz and x.startswith("fedgame/viz/"))]
    }
    assert not optional_at_load, f"optional packages imported at load time: {optional_at_load}"
    unused = core - set(imports)
    assert not unused, f"declared in pyproject.toml but never imported: {sorted(unused)}"


def test_dev_tools_are_pinned_and_python_is_not_capped():
    dev = PROJECT["optional-dependencies"]["dev"]
    assert {_requirement_name(s) for s in dev} >= {"pytest", "hypothesis", "ruff", "mypy"}
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+==[0-9][0-9A-Za-z.]*", s) for s in dev), dev
    assert PROJECT["requires-python"] == ">=3.11"


def test_py_typed_ships_with_the_package():
    data = PYPROJECT["tool"]["setuptools"]["package-data"]["fedgame"]
    assert "py.typed" in data and (REPO / "fedgame" / "py.typed").is_file()


def test_the_dashboard_is_imported_only_by_its_command():
    """Nothing outside fedgame/viz imports it at load time (the CLI imports it inside
    ``cmd_dashboard``), so fedgame works without the viz extra."""
    for path in sorted((REPO / "fedgame").rglob("*.py")):
        if "viz" in path.parts:
            continue
        pairs: list[tuple[str, bool]] = []
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fedgame.viz"):
                pairs.append((node.module or "", node.col_offset == 0))
        assert not [m for m, top in pairs if top], path


def test_classifiers_and_keywords_describe_the_package():
    classifiers = set(PROJECT["classifiers"])
    assert {
        "Intended Audience :: Science/Research",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Typing :: Typed",  # it ships py.typed
        "Development Status :: 3 - Alpha",
    } <= classifiers
    versions = {c.rsplit(" :: ", 1)[1] for c in classifiers if c.count("::") == 2}
    assert {"3.11", "3.12", "3.13"} <= versions
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: license = "MIT"
    assert {"federated learning", "differential privacy"} <= set(PROJECT["keywords"])
