"""The thread policy: what it chooses, the ``training.threads`` knob, the manifest's record,
the caller's setting restored, and results that do not depend on the thread count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import torch

from fedgame.run import threads
from fedgame.run.single import simulate
from fedgame.scenario.load import load_scenario, validate

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"


def test_the_quickstart_model_gets_one_thread(monkeypatch):
    monkeypatch.setattr(threads, "free_cores", lambda **_: (8, "8 allowed cores (test)"))
    choice = threads.choose_threads(load_scenario(QUICKSTART))
    # logreg on digits: 650 parameters, 10 clients of 16 samples a step
    assert choice.step_macs == 10 * 16 * 650
    assert (choice.threads, choice.source) == (1, "policy")
    assert "one thread" in choice.why


def test_a_large_model_gets_the_free_cores_and_no_more(tiny, monkeypatch):
    tiny["model"] = {"kind": "mlp", "hidden": [4096]}  # 64 -> 4096 -> 10: 307,210 parameters
    tiny["training"]["batch_size"] = 64
    scenario = validate(tiny)
    macs = threads.step_macs(scenario)
    assert macs == 5 * 64 * (65 * 4096 + 4097 * 10)
    wanted = -(-macs // threads.MACS_PER_THREAD)
    assert wanted > 4
    monkeypatch.setattr(threads, "free_cores", lambda **_: (4, "test"))
    assert threads.choose_threads(scenario).threads == 4
    monkeypatch.setattr(threads, "free_cores", lambda **_: (64, "test"))
    assert threads.choose_threads(scenario).threads == wanted
    monkeypatch.setattr(threads, "free_cores", lambda **_: (1, "test"))
    assert threads.choose_threads(scenario).threads == 1
    assert threads.choose_threads(scenario, device="cuda").threads == 1


def test_the_knob_overrides_the_policy(tiny, monkeypatch):
    monkeypatch.setattr(threads, "free_cores", lambda **_: (1, "test"))
    tiny["training"]["threads"] = 3
    choice = threads.choose_threads(validate(tiny))
    assert (choice.threads, choice.source) == (3, "training.threads")


def test_free_cores_counts_a_workers_share(monkeypatch):
    monkeypatch.setenv(threads.CORES_ENV, "1")
    assert threads.allowed_cores() == 1
    assert threads.free_cores()[0] == 1
    monkeypatch.delenv(threads.CORES_ENV)
    free, why = threads.free_cores()
    assert 1 <= free <= threads.allowed_cores()
    assert "allowed cores" in why


def test_the_manifest_records_the_threads_and_the_callers_setting_comes_back(tiny, tmp_path):
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        seen = []
        scenario = validate(tiny)
        result = simulate(scenario, out_dir=tmp_path)
        recorded = json.loads((result.run_dir / "manifest.json").read_text())["threads"]
        assert recorded["threads"] == 1 and recorded["source"] == "policy"
        assert recorded["step_macs"] == 5 * 8 * 650
        assert "multiply-accumulates" in recorded["why"]
        assert torch.get_num_threads() == 3
        tiny["training"]["threads"] = 2
        with pytest.MonkeyPatch.context() as patch:  # the model steps with the threads asked
            from fedgame.model import FedGameModel

            step = FedGameModel.step

            def spy(model):
                seen.append(torch.get_num_threads())
                return step(model)

            patch.setattr(FedGameModel, "step", spy)
            knob = simulate(validate(tiny))
        assert set(seen) == {2}
        assert knob.manifest["threads"]["threads"] == 2
        assert knob.manifest["threads"]["source"] == "training.threads"
        assert torch.get_num_threads() == 3
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("value", ["0", "-1", "many", "1.5", "true", "2000"])
def test_a_bad_threads_value_is_one_line_and_exit_2(value, tmp_path):
    setting = f"training.threads={value}"
    done = subprocess.run(
        [sys.executable, "-m", "fedgame", "validate", str(QUICKSTART), "--set", setting],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "key 'training.threads' has value" in lines[0]
    assert "auto or a whole number of threads from 1 to 1024" in lines[0]
    assert "Traceback" not in done.stderr


def test_tables_do_not_depend_on_the_thread_count(tiny):
    # a model large enough that torch splits its ops between threads: per-sample clipping,
    # Gaussian noise and the 360-sample evaluation included
    tiny["model"] = {"kind": "mlp", "hidden": [512]}
    tiny["training"] |= {"batch_size": 64, "per_sample_clip": 1.0}
    results = []
    for count in (1, 2, 3):
        tiny["training"]["threads"] = count
        results.append(simulate(validate(tiny)))
    timing = ["wall_time_s"]
    for other in results[1:]:
        pd.testing.assert_frame_equal(
            results[0].rounds.drop(columns=timing), other.rounds.drop(columns=timing)
        )
        pd.testing.assert_frame_equal(results[0].clients, other.clients)


def test_a_busy_process_next_door_counts_now_not_a_minute_later():
    """The cores other processes keep busy are sampled now (Linux ``/proc/stat``): a process
    spinning on a core shows at once, before the load average could have risen; this
    process's own CPU time is not counted."""
    code = "import time\nend = time.time() + 5\nwhile time.time() < end: pass"
    spinner = subprocess.Popen([sys.executable, "-c", code])
    try:
        time.sleep(0.5)
        affinity = os.sched_getaffinity(0)
        os.sched_setaffinity(spinner.pid, {min(affinity)})  # on one of our cores
        busy = threads.busy_cores(0.5)
    finally:
        spinner.kill()
        spinner.wait()
    assert busy is not None and busy >= 0.6
    assert "busy with other processes now" in threads.free_cores()[1]
    assert "load average" in threads.free_cores(sample=False)[1]
