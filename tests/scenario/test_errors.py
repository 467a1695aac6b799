"""Bad scenario input: one message naming file, key, value and what is allowed; exit 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fedgame.cli import main


def _set(data: dict, dotted: str, value: object) -> dict:
    node = data
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return data


BAD_VALUES = [
    # (dotted key to set, value, text the message must contain besides the key)
    ("roundz", 5, "not a known key"),
    ("rounds", "many", "integer"),
    ("rounds", 0, "greater than 0"),
    ("selection.kind", "bogus", "uniform"),
    ("selection.q", 3, "not a known key"),
    ("privacy.clip", -1.0, "greater than 0"),
    ("population.privacy_value", {"dist": "uniform", "low": -1.0, "high": 1.0}, "(0.0"),
    ("population.budget.delta", 2.0, "(0.0, 1.0)"),
    ("population.budget.epsilon", 0.0, "(0.0"),
    ("population.straggle_prob", 1.5, "[0.0, 1.0]"),
    ("population.privacy_value", {"dist": "banana"}, "constant"),
    ("selection.k", 100, "population.clients"),
    ("training.device", "tpu", "auto"),
    ("population.colluders", 12, "population.clients"),
    ("data.partition.alpha", -0.5, "greater than 0"),
    ("network.faults.link_failure", 1.5, "less than or equal to 1"),
    ("model.kind", "transformer", "logreg"),
]


@pytest.mark.parametrize(("key", "value", "allowed"), BAD_VALUES)
def test_bad_value_names_key_value_and_allowed(
    tiny, write_scenario, tmp_path, capsys, key, value, allowed
):
    path = write_scenario(_set(tiny, key, value))
    out = tmp_path / "results"
    code = main(["run", str(path), "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert str(path) in err
    assert f"'{key}" in err
    assert allowed in err
    assert "Traceback" not in err
    assert not out.exists(), "nothing may be written on bad input"


def test_validate_reports_each_bad_file(tiny, write_scenario, capsys):
    good = write_scenario(tiny, "good.yaml")
    bad = write_scenario(_set(dict(tiny), "rounds", -3), "bad.yaml")
    assert main(["validate", str(good)]) == 0
    assert main(["validate", str(good), str(bad)]) == 2
    captured = capsys.readouterr()
    assert "good.yaml: ok" in captured.out
    assert "bad.yaml" in captured.err and "'rounds'" in captured.err


def test_unreadable_file(tmp_path, capsys):
    missing = tmp_path / "nope.yaml"
    assert main(["validate", str(missing)]) == 2
    err = capsys.readouterr().err
    assert "nope.yaml" in err and "cannot be read" in err


def test_yaml_syntax_error_names_line(write_scenario, capsys):
    path = write_scenario("rounds: 3\npopulation: {clients: [1, 2\n")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert "YAML syntax error" in err and "line" in err


def test_toml_syntax_error(write_scenario, capsys):
    path = write_scenario("rounds = = 3\n", name="bad.toml")
    assert main(["validate", str(path)]) == 2
    assert "TOML syntax error" in capsys.readouterr().err


def test_unknown_extension(write_scenario, capsys):
    path = write_scenario("{}", name="scenario.json")
    assert main(["validate", str(path)]) == 2
    assert ".yaml, .yml or .toml" in capsys.readouterr().err


def test_bad_override_names_key(tiny, write_scenario, capsys):
    path = write_scenario(tiny)
    assert main(["validate", str(path), "--set", "training.lr=fast"]) == 2
    err = capsys.readouterr().err
    assert "'training.lr'" in err and "fast" in err


def test_override_without_equals(tiny, write_scenario, capsys):
    path = write_scenario(tiny)
    assert main(["validate", str(path), "--set", "training.lr"]) == 2
    assert "KEY=VALUE" in capsys.readouterr().err


def test_unsafe_yaml_tag_is_refused(write_scenario, capsys):
    path = write_scenario("rounds: !!python/object/apply:os.system ['echo pwned']\n")
    assert main(["validate", str(path)]) == 2
    assert "YAML syntax error" in capsys.readouterr().err


def test_console_script_exit_code_and_no_traceback(tiny, write_scenario):
    path = write_scenario(_set(tiny, "rounds", "many"))
    proc = subprocess.run(
        [sys.executable, "-m", "fedgame", "validate", str(path)],
        capture_output=True,
        text=True,
        check=False,
        cwd=Path(path).parent,
    )
    assert proc.returncode == 2
    assert "'rounds'" in proc.stderr and "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1
