"""Result files: written with the process umask, never through a link; damaged run folders
(wrong files, wrong columns, wrong manifest types, a table the manifest does not describe) are
recognised."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from fedgame.errors import ResultsError
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


def _tables(rounds: int, *, accuracy: float = 0.5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A rounds and a clients table with the columns readers need (``store.TABLE_COLUMNS``)."""
    r = list(range(1, rounds + 1))
    rounds_table = pd.DataFrame(
        {"round": r, "test_accuracy": accuracy, "participants": 2, "uploaded": 2,
         "epsilon_spent_mean": 0.1, "epsilon_spent_max": 0.2}
    )  # fmt: skip
    clients = pd.DataFrame({"round": r, "client_id": 0, "epsilon_spent": 0.1})
    return rounds_table, clients


def _run_folder(path, rounds=2, *, accuracy=0.5):
    path.mkdir(parents=True)
    rounds_table, clients = _tables(rounds, accuracy=accuracy)
    store.write_run_files(
        path,
        rounds=rounds_table,
        clients=clients,
        scenario={"name": "x"},
        manifest={"status": "completed", "rounds_completed": rounds},
    )
    return path


def _manifest_with(run, **fields):
    manifest = json.loads((run / "manifest.json").read_text())
    store.write_manifest(run, {**manifest, **fields})


def _wrong_columns(run):
    pd.DataFrame({"round": [1, 2], "accuracy": [0.1, 0.2]}).to_parquet(run / "rounds.parquet")


def _text_rounds(run):
    rounds, _ = _tables(2)
    rounds.assign(round=["1", "2"]).to_parquet(run / "rounds.parquet")


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
        (lambda d: _manifest_with(d, rounds_completed=3), "manifest says 3 rounds"),
        (lambda d: _manifest_with(d, rounds_completed="2"), "'rounds_completed' is '2', not int"),
        (lambda d: _manifest_with(d, rounds_completed=True), "'rounds_completed' is True"),
        (lambda d: _manifest_with(d, status=None), "'status' is None, not str"),
        (lambda d: _manifest_with(d, warnings=[1]), "'warnings' is [1], not dict or null"),
        (lambda d: _manifest_with(d, files=[]), "'files' is [], not dict"),
        (lambda d: _manifest_with(d, files={"rounds.parquet": 1}), "'files.rounds.parquet'"),
        (
            lambda d: _tables(2, accuracy=0.9)[0].to_parquet(d / "rounds.parquet"),
            "rounds.parquet is not the file this run wrote",
        ),
        (lambda d: _wrong_columns(d), "no column 'test_accuracy'"),
        (lambda d: _text_rounds(d), "column 'round' holds large_string, not integers"),
        (
            lambda d: (d / "rounds.parquet").unlink() or (d / "rounds.parquet").mkdir(),
            "missing rounds.parquet",
        ),
    ],
)
def test_a_damaged_run_folder_says_what_is_wrong(tmp_path, damage, reason):
    run = _run_folder(tmp_path / "run")
    damage(run)
    problem = store.run_folder_problem(run)
    assert problem is not None and reason in problem


def test_a_table_copied_from_another_run_is_recognised(tmp_path):
    """Same columns, same row count, readable: only the manifest's SHA-256 tells them apart."""
    run = _run_folder(tmp_path / "a", accuracy=0.5)
    other = _run_folder(tmp_path / "b", accuracy=0.75)
    (run / "rounds.parquet").write_bytes((other / "rounds.parquet").read_bytes())
    assert "rounds.parquet is not the file this run wrote" in store.run_folder_problem(run)


def test_a_manifest_written_before_hashes_were_recorded_is_still_read(tmp_path):
    run = _run_folder(tmp_path / "run")
    manifest = json.loads((run / "manifest.json").read_text())
    del manifest["files"]
    store.write_manifest(run, manifest)
    assert store.run_folder_problem(run) is None


def test_a_manifest_that_is_a_device_or_huge_is_not_read_whole(tmp_path, monkeypatch):
    run = _run_folder(tmp_path / "run")
    (run / "manifest.json").unlink()
    (run / "manifest.json").symlink_to("/dev/zero")
    assert "not a regular file" in store.run_folder_problem(run)
    monkeypatch.setattr(store, "MAX_MANIFEST_BYTES", 10)
    (run / "manifest.json").unlink()
    store.write_manifest(run, {"status": "completed", "rounds_completed": 2})
    with pytest.raises(ValueError, match="larger than 10 bytes"):
        store.read_json_file(run / "manifest.json", limit=10)


def test_make_folders_refuses_a_link_or_a_file_below_the_root(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "results"
    (root / "scenario").mkdir(parents=True)
    (root / "scenario" / "run").symlink_to(outside)
    with pytest.raises(ResultsError, match="symbolic link"):
        store.make_folders(root, "scenario", "run")
    (root / "scenario" / "file").write_text("x")
    with pytest.raises(ResultsError, match="not a folder"):
        store.make_folders(root, "scenario", "file", "run")
    assert list(outside.iterdir()) == []
    linked_root = tmp_path / "linked"
    linked_root.symlink_to(root)  # the root the user named may be a link
    assert store.make_folders(linked_root, "scenario", "new").is_dir()


def test_an_atomic_write_replaces_a_link_and_never_writes_through_it(tmp_path):
    target = tmp_path / "target.txt"
    target.write_text("keep")
    (tmp_path / "out.json").symlink_to(target)
    store.atomic_write_text(tmp_path / "out.json", "{}")
    assert target.read_text() == "keep"
    assert not (tmp_path / "out.json").is_symlink()


def test_an_os_error_while_writing_names_the_path(tmp_path):
    (tmp_path / "table.parquet").mkdir()
    (tmp_path / "table.parquet" / "inside").write_text("x")
    with pytest.raises(ResultsError, match=r"table\.parquet: cannot be written"):
        store.atomic_write_parquet(tmp_path / "table.parquet", pd.DataFrame({"x": [1]}))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.parquet"]  # no temporary left


def test_result_dir_problem_for_reports(tmp_path):
    run = _run_folder(tmp_path / "res" / "run")
    assert store.result_dir_problem(tmp_path / "res") is None
    assert store.result_dir_problem(tmp_path / "nowhere") == "not a folder"
    (tmp_path / "empty").mkdir()
    assert "holds no results" in store.result_dir_problem(tmp_path / "empty")
    (run / "rounds.parquet").write_bytes(b"")
    assert "rounds.parquet" in store.result_dir_problem(tmp_path / "res")
    sweep = tmp_path / "sweep"
    sweep.mkdir()
    (sweep / "sweep.json").write_text(json.dumps({"runs": [{"run_id": "a", "replicate": 0}]}))
    assert store.result_dir_problem(sweep) is None
    for info, reason in (
        ({"runs": "many"}, "'runs' is not a list"),
        ({"runs": [{"run_id": "../../etc", "replicate": 0}]}, "not a folder name"),
        ({"runs": [{"run_id": "a", "replicate": "0"}]}, "replicate is '0'"),
        ({"runs": [], "grid": {"k": 3}}, "'grid' is not an object of value lists"),
        ({"runs": [], "replicates": 1.5}, "'replicates' is 1.5"),
    ):
        (sweep / "sweep.json").write_text(json.dumps(info))
        assert reason in store.result_dir_problem(sweep), info
    (sweep / "sweep.json").write_text(json.dumps({"runs": [], "grid": {"selection.k": [1, 2]}}))
    rounds, _ = _tables(2)
    rounds.assign(run_id="a", replicate=0, status="completed").to_parquet(sweep / "sweep.parquet")
    assert "no column 'selection.k'" in store.result_dir_problem(sweep)


def test_versions_are_read_once_per_process_and_each_call_gets_its_own_dict(monkeypatch):
    from importlib import metadata

    from fedgame.run import store

    reads = []
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: reads.append(name) or real(name))
    store._versions.cache_clear()
    try:
        first, second = store.versions(), store.versions()
        assert first == second and first is not second
        assert first["fedgame"] == real("fedgame")
        assert len(reads) == 1 + len(store.RECORDED_PACKAGES)
    finally:
        store._versions.cache_clear()
