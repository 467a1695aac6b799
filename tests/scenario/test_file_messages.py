"""A path that is no scenario file gets one line that says what is wrong with it."""

from __future__ import annotations

import pytest

from fedgame.cli import main


@pytest.mark.parametrize(
    ("make", "argv", "said"),
    [
        (None, ["run", ""], "fedgame: file path is empty: name a scenario file"),
        (None, ["validate", "."], "fedgame: .: file is a folder; scenario files end in .yaml"),
        ("scenario", ["validate", "scenario"], "scenario: file has no suffix; scenario files"),
        ("s.json", ["validate", "s.json"], "s.json: file ends in '.json'; scenario files"),
        ("l.yaml", ["validate", "l.yaml"], "l.yaml: file holds a list; a scenario is a mapping"),
    ],
)
def test_the_message_names_the_problem_not_an_empty_value(
    make, argv, said, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    if make:
        (tmp_path / make).write_text("- 1\n")
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err
    assert "has value" not in err
