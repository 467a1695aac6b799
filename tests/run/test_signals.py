"""SIGTERM and Ctrl-C (SIGINT) stop a run with its finished rounds written, in one line.

SIGTERM goes to a real ``python -m fedgame run`` process (umask 027); SIGINT is raised in
this process while ``fedgame.cli.main`` runs here (the Python-level path a Ctrl-C takes).
Each signal is sent once the progress bar shows a few rounds done, on a long scenario.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from fedgame.cli import main

ROUNDS = 100_000
CLIENTS = 8
UMASK = 0o027
PROGRESS = re.compile(r"(\d+)/100000")


def _rounds_done(text: str) -> int:
    found = PROGRESS.findall(text)
    return int(found[-1]) if found else 0


class Tail(threading.Thread):
    """Collects a pipe's text as it comes."""

    def __init__(self, pipe) -> None:
        super().__init__(daemon=True)
        self.pipe, self.text = pipe, ""

    def run(self) -> None:
        for chunk in iter(lambda: self.pipe.read1(4096), b""):
            self.text += chunk.decode(errors="replace")


def _scenario_file(folder: Path) -> Path:
    from conftest import TINY

    scenario = yaml.safe_load(yaml.safe_dump(TINY))
    scenario["rounds"], scenario["population"]["clients"] = ROUNDS, CLIENTS
    del scenario["population"]["privacy_value"]  # no chosen plug-in reads it: a warning line
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(scenario))
    return path


def _wait_for_rounds(read, alive, *, at_least: int = 5, timeout: float = 180.0) -> int:
    end = time.monotonic() + timeout
    while _rounds_done(read()) < at_least and alive():
        assert time.monotonic() < end, read()
        time.sleep(0.05)
    return _rounds_done(read())


def _check_stopped(code: int, err: str, seen: int, folder: Path, sig: signal.Signals) -> Path:
    assert code == 128 + sig, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = [ln for ln in re.split(r"[\r\n]+", err) if ln.strip()]
    messages = [ln for ln in lines if not PROGRESS.search(ln)]
    assert len(messages) == 1, messages
    what = "Ctrl-C (SIGINT)" if sig == signal.SIGINT else "SIGTERM"
    assert messages[0].startswith(f"fedgame: run stopped by {what}; kept "), messages[0]
    (run_dir,) = (folder / "out" / "tiny").iterdir()
    assert run_dir.name in messages[0]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    kept = manifest["rounds_completed"]
    assert manifest["status"] == "interrupted" and manifest["signal"] == sig.name
    assert seen <= kept < ROUNDS
    assert f"kept {kept} of {ROUNDS} rounds" in messages[0]
    rounds = pd.read_parquet(run_dir / "rounds.parquet")
    clients = pd.read_parquet(run_dir / "clients.parquet")
    assert rounds["round"].tolist() == list(range(1, kept + 1))
    assert len(clients) == kept * CLIENTS and clients["round"].max() == kept
    assert not list(run_dir.glob("*.tmp")) and not list(run_dir.glob(".*"))
    return run_dir


def test_sigterm_stops_a_run_process_keeping_its_rounds(tmp_path):
    path = _scenario_file(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "fedgame", "run", str(path), "--out", "out"],
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=lambda: os.umask(UMASK),
    )
    tail = Tail(proc.stderr)
    tail.start()
    try:
        seen = _wait_for_rounds(lambda: tail.text, lambda: proc.poll() is None)
        os.kill(proc.pid, signal.SIGTERM)
        proc.wait(timeout=120)
        tail.join(timeout=10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    run_dir = _check_stopped(proc.returncode, tail.text, seen, tmp_path, signal.SIGTERM)
    for file in run_dir.iterdir():  # written with the process umask, not mkstemp's 0600
        assert file.stat().st_mode & 0o777 == 0o666 & ~UMASK, file


class _Stderr(io.StringIO):
    """A stderr another thread can read while the run writes to it."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = threading.Lock()

    def write(self, text: str) -> int:
        with self.lock:
            return super().write(text)

    def snapshot(self) -> str:
        with self.lock:
            return self.getvalue()


def test_ctrl_c_stops_a_run_keeping_its_rounds(tmp_path, monkeypatch):
    path = _scenario_file(tmp_path)
    monkeypatch.chdir(tmp_path)
    err = _Stderr()
    monkeypatch.setattr(sys, "stderr", err)
    seen: list[int] = []
    done = threading.Event()

    def press_ctrl_c() -> None:
        seen.append(_wait_for_rounds(err.snapshot, lambda: not done.is_set()))
        if not done.is_set():
            os.kill(os.getpid(), signal.SIGINT)

    presser = threading.Thread(target=press_ctrl_c, daemon=True)
    presser.start()
    try:
        code = main(["run", str(path), "--out", "out"])
    finally:
        done.set()
        presser.join(timeout=10)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handlers restored
    _check_stopped(code, err.snapshot(), seen[0], tmp_path, signal.SIGINT)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_signal_while_reading_input_ends_in_one_line(sig, tmp_path, capsys, monkeypatch):
    from fedgame import cli

    def stopped(args):
        os.kill(os.getpid(), sig)  # arrives while the command is checking its input
        time.sleep(5)
        raise AssertionError("the signal did not stop the command")

    monkeypatch.setattr(cli, "cmd_validate", stopped)
    assert main(["validate", "x.yaml"]) == 128 + sig
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "stopped by" in err and "Traceback" not in err
