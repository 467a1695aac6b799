"""Kept runs (analysis/_kept.py): reuse on the same code, rerun on another code or --fresh,
half-written files treated as absent, and the code identity read from git."""

from __future__ import annotations

import json
import math
import subprocess

import numpy as np
import pandas as pd
import pytest
from scripts_helpers import load

kept = load("_kept")
CALLS: list[int] = []


def square(job: dict) -> dict:
    """A stand-in for a simulation: counts its calls, returns JSON data."""
    CALLS.append(job["scenario"]["x"])
    return {"label": job["label"], "y": job["scenario"]["x"] ** 2, "nan": math.nan}


@pytest.fixture
def code(monkeypatch):
    """Set the code identity that run_kept keys on (``code("git:abc")``)."""

    def set_to(identity: str) -> None:
        monkeypatch.setattr(kept, "code_identity", lambda: identity)

    set_to("git:one")
    CALLS.clear()
    return set_to


def jobs_of(*xs: int) -> list[dict]:
    return [{"label": f"x={x}", "scenario": {"x": x, "nested": {"a": [1, 2]}}} for x in xs]


def test_a_kept_run_is_reused_on_the_same_code(code, tmp_path, capsys):
    first = kept.run_kept(square, jobs_of(1, 2, 3), tmp_path, 1)
    assert CALLS == [1, 2, 3] and "0 of 3 runs kept" in capsys.readouterr().out
    assert len(list((tmp_path / "runs").glob("*.json"))) == 3
    again = kept.run_kept(square, jobs_of(3, 1, 2, 4), tmp_path, 1)
    assert CALLS == [1, 2, 3, 4] and "3 of 4 runs kept" in capsys.readouterr().out
    assert again[:3] == [first[2], first[0], first[1]]  # the same values, NaN included
    assert math.isnan(again[0]["nan"]) and again[0]["y"] == 9
    assert not list((tmp_path / "runs").glob("*.tmp"))


def test_another_code_identity_or_function_does_not_reuse(code, tmp_path, capsys):
    kept.run_kept(square, jobs_of(1, 2), tmp_path, 1)
    code("git:two")
    kept.run_kept(square, jobs_of(1, 2), tmp_path, 1)
    assert CALLS == [1, 2, 1, 2] and "0 of 2 runs kept" in capsys.readouterr().out
    code("git:two+0123abcd")  # the same commit with uncommitted changes
    kept.run_kept(square, jobs_of(1), tmp_path, 1)
    assert CALLS == [1, 2, 1, 2, 1]

    def other(job: dict) -> dict:
        CALLS.append(-1)
        return {}

    kept.run_kept(other, jobs_of(1), tmp_path, 1)
    assert CALLS[-1] == -1  # another function of the same scenario is another result


def test_fresh_reruns_and_replaces(code, tmp_path, capsys):
    kept.run_kept(square, jobs_of(1, 2), tmp_path, 1)
    files = sorted((tmp_path / "runs").glob("*.json"))
    for file in files:  # a stale result that --fresh must not return
        record = json.loads(file.read_text())
        file.write_text(json.dumps(record | {"result": {"y": -1}}))
    out = kept.run_kept(square, jobs_of(1, 2), tmp_path, 1, fresh=True)
    assert CALLS == [1, 2, 1, 2] and [r["y"] for r in out] == [1, 4]
    assert "0 of 2 runs kept" in capsys.readouterr().out
    assert sorted((tmp_path / "runs").glob("*.json")) == files  # replaced in place
    assert [r["y"] for r in kept.run_kept(square, jobs_of(1, 2), tmp_path, 1)] == [1, 4]


HALF_WRITTEN = ["", '{"fn": "x", "result": {"y"', "[1, 2]", '{"fn": "x"}', "\xff"]


@pytest.mark.parametrize("text", HALF_WRITTEN)
def test_a_half_written_file_counts_as_absent(code, tmp_path, text):
    kept.run_kept(square, jobs_of(5), tmp_path, 1)
    (file,) = (tmp_path / "runs").glob("*.json")
    file.write_bytes(text.encode("latin-1"))
    assert kept.run_kept(square, jobs_of(5), tmp_path, 1)[0]["y"] == 25
    assert CALLS == [5, 5]
    assert json.loads(file.read_text())["result"]["y"] == 25  # whole again


def test_jobs_that_share_a_scenario_share_a_run_and_keep_their_labels(code, tmp_path):
    jobs = jobs_of(7, 7, 8)
    jobs[1]["label"] = "the same run, another label"
    out = kept.run_kept(square, jobs, tmp_path, 1, tags=("label",))
    assert CALLS == [7, 8]
    assert [r["label"] for r in out] == [j["label"] for j in jobs]
    assert out[0]["y"] == out[1]["y"] == 49 and out[0] is not out[1]


def test_a_result_that_is_not_json_is_refused_by_name(code, tmp_path):
    def arrays(job: dict) -> dict:
        return {"curve": np.arange(3)}

    with pytest.raises(TypeError, match="JSON data, got ndarray"):
        kept.run_kept(arrays, jobs_of(1), tmp_path, 1)
    assert not list((tmp_path / "runs").iterdir())


def test_frames_cross_as_json_unchanged():
    frame = pd.DataFrame(
        {
            "round": np.arange(4, dtype=np.int64),
            "acc": [0.1, math.nan, 1 / 3, 2e-300],
            "f32": np.array([0.1, 0.2, 0.3, 0.4], dtype=np.float32),
            "ok": [True, False, True, True],
            "text": ["a", "", "c,d", "é"],
        },
        index=[3, 5, 7, 9],
    )
    back = kept.frame_from_json(json.loads(json.dumps(kept.frame_to_json(frame))))
    pd.testing.assert_frame_equal(back, frame, check_exact=True)


def git(root, *args: str) -> str:
    cmd = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.strip()


def test_code_identity_is_the_code_trees_and_the_uncommitted_changes(tmp_path):
    identity = kept.code_identity.__wrapped__  # uncached
    assert identity(tmp_path).startswith("version:")  # not a git checkout
    (tmp_path / "fedgame").mkdir()
    (tmp_path / "fedgame" / "a.py").write_text("x = 1\n")
    (tmp_path / "README.md").write_text("text\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "one")
    head = identity(tmp_path)
    assert head.startswith("git:") and "+" not in head
    head = head.removeprefix("git:")
    (tmp_path / "README.md").write_text("other text\n")  # outside fedgame/ and analysis/
    assert identity(tmp_path) == f"git:{head}"
    (tmp_path / "fedgame" / "a.py").write_text("x = 2\n")
    edited = identity(tmp_path)
    assert edited.startswith(f"git:{head}+")
    (tmp_path / "fedgame" / "a.py").write_text("x = 3\n")
    assert identity(tmp_path) not in (edited, f"git:{head}")
    (tmp_path / "fedgame" / "a.py").write_text("x = 1\n")
    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "new.py").write_text("y = 1\n")  # untracked, not ignored
    untracked = identity(tmp_path)
    assert untracked.startswith(f"git:{head}+") and untracked != edited
    (tmp_path / "analysis" / "new.py").unlink()
    assert identity(tmp_path) == f"git:{head}"
    git(tmp_path, "commit", "-q", "-am", "docs only")  # a commit outside the code: same
    assert identity(tmp_path) == f"git:{head}"
    (tmp_path / "fedgame" / "a.py").write_text("x = 4\n")
    git(tmp_path, "commit", "-q", "-am", "code")  # a commit of the code: another identity
    assert identity(tmp_path) not in (f"git:{head}", edited, untracked)
    assert "+" not in identity(tmp_path)


def test_fresh_is_a_common_flag_left_out_of_the_command():
    shared = load("_shared")
    p = shared.parser("x", "", shared.Defaults(seeds=1, rounds=1))
    assert p.parse_args(["--fresh"]).fresh and not p.parse_args([]).fresh
    argv = ["--quick", "--fresh", "--out", "o", "--seeds", "3"]
    assert shared.command("x", argv) == "python analysis/x.py --quick --seeds 3"


def test_a_sweep_folder_is_kept_only_for_the_same_code(code, tmp_path):
    folder = tmp_path / "sweep"
    assert not kept.own_folder(folder, fresh=False)  # nothing there yet
    (folder / "runs.txt").write_text("a finished run")
    assert not kept.own_folder(folder, fresh=False)  # same code: resumed
    assert (folder / "runs.txt").is_file()
    code("git:two")
    assert kept.own_folder(folder, fresh=False)  # another code: removed
    assert not (folder / "runs.txt").exists() and (folder / "CODE").read_text() == "git:two"
    (folder / "runs.txt").write_text("a finished run")
    assert kept.own_folder(folder, fresh=True) and not (folder / "runs.txt").exists()
    (folder / "CODE").unlink()  # written before the code was recorded: not reused
    (folder / "runs.txt").write_text("a finished run")
    assert kept.own_folder(folder, fresh=False) and not (folder / "runs.txt").exists()


def test_reproduce_passes_fresh_on_to_every_script():
    reproduce = load("reproduce")
    parse = reproduce.build_parser().parse_args
    for name in reproduce.SCRIPTS:
        assert "--fresh" in reproduce.script_command(name, parse(["--fresh"]))
        assert "--fresh" not in reproduce.script_command(name, parse([]))


def test_the_provenance_line_says_how_many_runs_were_kept(monkeypatch):
    """A table made from kept runs says so: its run time is not the runs' time."""
    import argparse
    import sys

    shared = load("_shared")
    tally = sys.modules["_kept"].TALLY  # the module _shared reads
    args = argparse.Namespace(seeds=3, quick=False)
    report = shared.Report("x", args, argv=["--seeds", "3"])
    monkeypatch.setitem(tally, "kept", 0)
    monkeypatch.setitem(tally, "runs", 6)
    assert "kept" not in report.provenance()
    monkeypatch.setitem(tally, "kept", 4)
    assert report.provenance().endswith(" s (4 of 6 runs kept from earlier calls).")


@pytest.mark.parametrize("module", ["__main__", "__mp_main__"])
def test_a_script_function_is_named_by_its_file_in_the_script_and_in_a_spawned_worker(
    module, monkeypatch, tmp_path
):
    """A spawned worker imports the script as ``__mp_main__``; both name it by its file."""
    import sys
    import types

    script = types.ModuleType(module)
    script.__file__ = str(tmp_path / "some_ablation.py")
    monkeypatch.setitem(sys.modules, module, script)

    def run_one(job: dict) -> None:
        del job

    run_one.__module__ = module
    name = kept.function_name(run_one)
    assert name.startswith("some_ablation.test_") and name.endswith(".<locals>.run_one")
