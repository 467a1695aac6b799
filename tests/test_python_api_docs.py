"""docs/python-api.md runs as written: its ```python blocks, in order, in one namespace."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import fedgame

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "python-api.md"


def code_blocks(text: str) -> list[str]:
    """The bodies of the ```python fences of a Markdown text."""
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_notebook_example_runs(tmp_path, monkeypatch, capsys):
    blocks = code_blocks(DOC.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    (tmp_path / "scenarios").symlink_to(REPO / "scenarios")
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "__docs__"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)
    printed = capsys.readouterr().out
    assert "did you mean 'clients'?" in printed and "completed" in printed
    assert (tmp_path / "results" / "python-api" / "quickstart").is_dir()


def test_every_public_name_is_importable_and_listed():
    import fedgame.run.single  # the subpackage must not hide the function

    for name in fedgame.__all__:
        assert getattr(fedgame, name) is not None
    assert set(fedgame.__all__) <= set(dir(fedgame))
    assert callable(fedgame.run) and fedgame.run.__module__ == "fedgame.api"


def test_importing_fedgame_does_not_import_torch_or_mesa():
    heavy = "('torch', 'mesa', 'pandas')"
    code = f"import sys, fedgame; print(sorted(m for m in {heavy} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = "import sys, fedgame; fedgame.load_scenario; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_an_override_that_is_not_a_scenario_key_names_the_nearest_ones():
    try:
        fedgame.FedGameModel(scenario="scenarios/quickstart.yaml", selection__kk=3)
    except fedgame.ScenarioError as err:
        message = str(err)
    assert "'selection.kk'" in message and "did you mean 'k'?" in message
    try:
        fedgame.run({"roundz": 3})
    except fedgame.ScenarioError as err:
        message = str(err)
    assert "'roundz'" in message and "did you mean 'rounds'?" in message
