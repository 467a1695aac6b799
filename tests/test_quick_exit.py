"""The command line ends without the interpreter's teardown, but as a normal exit would for
everything a user can see: exit code, output, exit handlers, temporary folders, threads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, **env},
        timeout=120,
        check=False,
    )


def test_the_exit_handlers_run_and_the_output_is_flushed_with_the_code():
    code = """
import atexit, os, sys, tempfile
from fedgame.quick_exit import end_process
atexit.register(lambda: print("handler ran", flush=True))
kept = tempfile.TemporaryDirectory()  # never cleaned up by hand: its finalizer removes it
sys.stderr.write(kept.name)
print("unflushed", end="")
end_process(3)
print("never")
"""
    proc = python(code)
    assert proc.returncode == 3
    assert proc.stdout == "unflushedhandler ran\n"
    assert not Path(proc.stderr.strip()).exists()


def test_a_running_thread_gets_the_normal_exit_which_waits_for_it():
    code = """
import threading, time
from fedgame.quick_exit import end_process
def late():
    time.sleep(0.3)
    print("thread finished", flush=True)
threading.Thread(target=late).start()
end_process(0)
"""
    proc = python(code)
    assert proc.returncode == 0 and proc.stdout == "thread finished\n"


@pytest.mark.parametrize("full", ["0", "1"])
def test_python_m_fedgame_exits_with_the_commands_code(tmp_path, full):
    """Bad input still exits 2 with its message; FEDGAME_FULL_EXIT=1 takes the full exit."""
    missing = tmp_path / "missing.yaml"
    proc = subprocess.run(
        [sys.executable, "-m", "fedgame", "validate", str(missing)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "FEDGAME_FULL_EXIT": full},
        timeout=120,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("fedgame: ") and "missing.yaml" in proc.stderr
