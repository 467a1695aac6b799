"""Result files: written with the process umask; damaged run folders are recognised."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from fedgame.run import store


@pytest.fixture
def umask():
    """Set a umask for the test and restore the previous one afterwards."""
    saved = os.umask(0o022)

    def set_mask(mask: int) -> None:
        os.umask(mask)

    yield set_mask
    os.umask(saved)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077, 0o002])
def test_atomic_writes_honour_the_umask(tmp_path, umask, mask):
    umask(mask)
    assert store.current_umask() == mask
    store.atomic_write_text(tmp_path / "a.json", "{}")
    store.atomic_write_parquet(tmp_path / "b.parquet", pd.DataFrame({"x": [1, 2]}))
    for name in ("a.json", "b.parquet"):
        assert (tmp_path / name).stat().st_mode & 0o777 == 0o666 & ~mask
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.parquet"]


def _run_folder(path, rounds=2):
    path.mkdir(parents=True)
    frame = pd.DataFrame({"round": range(1, rounds + 1)})
    store.atomic_write_parquet(path / "rounds.parquet", frame)
    store.atomic_write_parquet(path / "clients.parquet", frame)
    store.atomic_write_text(path / "scenario.resolved.yaml", "name: x\n")
    store.write_manifest(path, {"status": "completed", "rounds_completed": rounds})
    return path


def test_an_intact_run_folder_has_no_problem(tmp_path):
    assert store.run_folder_problem(_run_folder(tmp_path / "run")) is None


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda d: (d / "manifest.json").unlink(), "no manifest.json"),
        (lambda d: (d / "manifest.json").write_text("[1, 2]"), "not a JSON object"),
        (lambda d: (d / "manifest.json").write_bytes(b"\xff{"), "manifest.json unreadable"),
        (lambda d: (d / "clients.parquet").unlink(), "missing clients.parquet"),
        (lambda d: (d / "rounds.parquet").write_bytes(b"PAR1"), "rounds.parquet unreadable"),
        (lambda d: (d / "scenario.resolved.yaml").write_text("a: [1"), "scenario.resolved"),
        (lambda d: (d / "scenario.resolved.yaml").write_text("- 1\n"), "not a mapping"),
        (
            lambda d: store.write_manifest(d, {"status": "completed", "rounds_completed": 3}),
            "manifest says 3 rounds",
        ),
    ],
)
def test_a_damaged_run_folder_says_what_is_wrong(tmp_path, damage, reason):
    run = _run_folder(tmp_path / "run")
    damage(run)
    problem = store.run_folder_problem(run)
    assert problem is not None and reason in problem


def test_result_dir_problem_for_reports(tmp_path):
    run = _run_folder(tmp_path / "res" / "run")
    assert store.result_dir_problem(tmp_path / "res") is None
    assert store.result_dir_problem(tmp_path / "nowhere") == "not a folder"
    (tmp_path / "empty").mkdir()
    assert store.result_dir_problem(tmp_path / "empty") is None  # the report says it is empty
    (run / "rounds.parquet").write_bytes(b"")
    assert "rounds.parquet unreadable" in store.result_dir_problem(tmp_path / "res")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"runs": [{"run_id": "a"}]}))
    assert store.result_dir_problem(sweep) is None
    (sweep / "sweep.json").write_text(json.dumps({"runs": "many"}))
    assert "sweep.json unreadable" in store.result_dir_problem(sweep)
