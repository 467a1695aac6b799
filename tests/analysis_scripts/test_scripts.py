"""Every analysis script: instant --help, a --quick smoke run, clear errors, stable output.

The tests that read the shared ``--quick`` run of every script (the module fixture ``quick``,
whose scripts run two at a time) go to one pytest-xdist worker (group ``analysis_scripts``,
given in tests/conftest.py), so no worker repeats it; the others (help probes, error cases,
single runs) spread over the workers.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scripts_helpers import ANALYSIS, REPO, SCRIPTS, WITH_DATASET, load, parse_command, run

from fedgame.errors import ScenarioError

QUICK = [s for s in SCRIPTS if s != "reproduce"]
VERDICTS = {"yes", "partly", "no", "inconclusive", "not run"}
#: the scripts whose claims form docs/reproductions.md
PAPER_SCRIPTS = ("dpfl_bcs", "privacy_aware", "queries_replies", "qi_dpfl", "lightdp")


def quick_args(name: str) -> list[str]:
    """The smoke flags: --quick, on scikit-learn's digits where the script takes a dataset."""
    return ["--quick", *(["--dataset", "digits"] if name in WITH_DATASET else [])]


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    """Run every script's --quick once, two at a time; name -> (process, output folder)."""
    root = tmp_path_factory.mktemp("analysis")
    with ThreadPoolExecutor(max_workers=2) as pool:
        procs = {n: pool.submit(run, n, *quick_args(n), "--out", str(root / n)) for n in QUICK}
    return root, {name: (proc.result(), root / name) for name, proc in procs.items()}


def test_every_script_is_covered():
    assert set(QUICK) >= WITH_DATASET | {
        "heterogeneous_dp",
        "sweep_population_stragglers",
        "stragglers_topology_learning",
    }


@pytest.mark.parametrize("name", SCRIPTS)
def test_help_is_instant_and_imports_nothing_heavy(name):
    probe = (
        "import runpy, sys, time\n"
        f"sys.argv = [{str(ANALYSIS / (name + '.py'))!r}, '--help']\n"
        f"sys.path.insert(0, {str(ANALYSIS)!r})\n"
        "t = time.perf_counter()\n"
        "try:\n"
        "    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit as e:\n"
        "    assert e.code in (0, None), e.code\n"
        "heavy = [m for m in ('torch', 'pandas', 'mesa', 'fedgame.model') if m in sys.modules]\n"
        "print('HEAVY', heavy, 'SECONDS', time.perf_counter() - t)\n"
    )
    proc = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stderr
    assert "HEAVY [] " in proc.stdout, proc.stdout
    for flag in ("--seeds", "--rounds", "--quick", "--out"):
        assert flag in proc.stdout
    if name in WITH_DATASET:
        assert "--dataset" in proc.stdout


@pytest.mark.parametrize("name", QUICK)
def test_quick_run_writes_tables_claims_and_runs(quick, name):
    _, done = quick
    proc, out = done[name]
    assert proc.returncode == 0, proc.stderr[-3000:]
    tables = sorted((out / "tables").glob("*.md"))
    assert tables
    for table in tables:
        head, _, body = table.read_text().partition("\n\n")
        assert f"`python analysis/{name}.py --quick" in head
        assert "preliminary quick run" in head and "2 seeds" in head
        assert body.startswith("| ") and body.count("\n|") >= 2
    claims = json.loads((out / "claims.json").read_text())
    for claim in claims:
        assert claim["verdict"] in VERDICTS
        assert claim["preliminary"] is True
        assert claim["command"] == " ".join(["python", f"analysis/{name}.py", *quick_args(name)])
        assert claim["paper"] in {"000", "001", "002", "003", "004"}
        assert claim["verdict"] == "yes" or claim["why_not"]
        assert claim["seeds"] == "seeds 0-1" and claim["setting"]
        if claim["verdict"] == "not run":
            assert claim["measured"] == "not run"
            continue
        rule = claim["rule"]
        assert rule["kind"] and len(rule["text"]) > 40
        if rule["kind"] in ("above", "within", "magnitude"):
            assert f"{rule['threshold']:g}" in rule["text"]  # the margin is stated
        assert len(claim["holdouts"]) >= 2
        for holdout in claim["holdouts"]:  # the same quick command on other settings
            hold, argv = parse_command(holdout["command"])
            assert hold == name and argv[: len(quick_args(name))] == quick_args(name)
            assert "--first-seed" in argv
            load(name).build_parser().parse_args(argv)
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) > 0
    if "seed" in runs:
        assert set(runs["seed"]) == {0, 1}


def test_paper_scripts_make_claims(quick):
    _, done = quick
    papers = set()
    for name in WITH_DATASET:
        papers |= {c["paper"] for c in json.loads((done[name][1] / "claims.json").read_text())}
    assert papers == {"000", "001", "002", "003", "004"}


def test_the_issue_31_statements_follow_their_tables(quick):
    """The rewritten rows: LightDP above LDP has its own margin-0 row beside the 15-point one,
    the plain '> 15' rule names its margin, the LM comparison has a chance-level guard, the
    headline claims never run are rows marked so."""
    _, done = quick

    def claims(name):
        return {c["key"]: c for c in json.loads((done[name][1] / "claims.json").read_text())}

    light = claims("lightdp")
    assert light["lightdp/lightdp_above_ldp"]["rule"]["threshold"] == 0.0
    assert light["lightdp/lightdp_vs_ldp"]["rule"]["threshold"] == 15.0
    assert "15 pts" in light["lightdp/lightdp_vs_ldp"]["rule"]["text"]
    assert light["lightdp/he_time"]["verdict"] == "not run"
    bcs = claims("dpfl_bcs")
    assert "chance" in bcs["dpfl_bcs/lm_worse_than_gm"]["rule"]["text"]
    assert bcs["dpfl_bcs/small_alpha_gain"]["verdict"] != "not run"  # Fig. 5's α end is run
    assert (
        "plateau"
        in claims("queries_replies")["queries_replies/t_star_near_peak_eps_5"]["rule"]["text"]
    )
    qi = claims("qi_dpfl")
    assert "uninformative" in qi["qi_dpfl/qi_close_to_max_lam_0.01"]["rule"]["text"]
    assert "same rounds" in qi["qi_dpfl/cost_order"]["rule"]["text"]


def test_a_budget_exhausting_run_refuses_its_total_cost(tmp_path):
    """qi_dpfl with an ε budget of 3 (seeds 777-778): Max-select's clients spend it before
    the last round, so its Eq. 15 cost is undefined there. The total is refused (n/a in the
    table, NaN in runs.csv), never the sum of the other rounds, and the cost ordering
    compares the arms over the rounds all three had an upload."""
    argv = ["--quick", "--dataset", "digits", "--lam", "1", "--first-seed", "777"]
    argv += ["--set", "population.budget.epsilon=3", "--out", str(tmp_path)]
    proc = run("qi_dpfl", *argv)
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert set(runs["seed"]) == {777, 778}
    game = runs[runs["cell"] == "Max-select (max + emd)"]
    assert (game["rounds_without_upload"] > 0).all()
    assert game["server_cost"].isna().all() and (game["cost_rounds_missing"] > 0).all()
    costs = [[float(x) for x in c.strip("[]").split(",")] for c in game["cost_by_round"]]
    assert all(any(math.isnan(x) for x in c) and math.isfinite(np.nansum(c)) for c in costs)
    table = (tmp_path / "tables" / "lam_1.md").read_text()
    max_row = next(line for line in table.splitlines() if line.startswith("| Max-select"))
    assert "n/a (refused on 2 of 2 seeds)" in max_row
    claims = {c["key"]: c for c in json.loads((tmp_path / "claims.json").read_text())}
    order = claims["qi_dpfl/cost_order"]
    assert "over the fewest common rounds" in order["measured"]
    assert "Max-select" in order["caveat"] and order["seeds"] == "seeds 777-778"


def test_figures_are_written(quick):
    _, done = quick
    assert (
        (done["queries_replies"][1] / "figures" / "queries_replies_accuracy_vs_T.png")
        .stat()
        .st_size
    )
    sweep = done["sweep_population_stragglers"][1] / "figures"
    assert {p.name for p in sweep.glob("*.png")} == {
        "sweep_population_stragglers_final_accuracy.png",
        "sweep_population_stragglers_sum_rho.png",
    }
    study = done["stragglers_topology_learning"][1] / "figures"
    assert {p.name for p in study.glob("*.png")} == {
        "stragglers_topology_learning_outcomes.png",
        "stragglers_topology_learning_rounds.png",
    }
    assert (done["qi_dpfl_populations"][1] / "figures" / "qi_dpfl_populations.png").stat().st_size


def test_game_studies_report_degeneracy_and_the_no_dp_reference(quick):
    """The studies' tables count degenerate runs per cell and put no DP beside DP."""
    _, done = quick
    cells = (done["stragglers_topology_learning"][1] / "tables" / "cells.md").read_text()
    assert "runs with degenerate rounds" in cells and "no-DP accuracy %" in cells
    runs = pd.read_csv(done["stragglers_topology_learning"][1] / "runs.csv")
    assert set(runs["policy.kind"]) == {"best_response", "learning", "no DP"}
    assert runs["degenerate_rounds"].ge(0).all()
    for table in (done["qi_dpfl_populations"][1] / "tables").glob("lam_*.md"):
        text = table.read_text()
        assert "no DP (FedAvg-select)" in text and "runs with degenerate rounds" in text
    runs = pd.read_csv(done["qi_dpfl_populations"][1] / "runs.csv")
    assert {"best_response", "learning (log_gradient)", "no DP (FedAvg-select)"} <= set(
        runs["cell"]
    )


def test_results_do_not_depend_on_workers(quick, tmp_path):
    _, done = quick
    small = ["--quick", "--seeds", "1", "--eps", "5", "--b", "1"]
    proc = run("queries_replies", *small, "--workers", "2", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr[-3000:]
    two = pd.read_csv(tmp_path / "runs.csv")
    one = pd.read_csv(done["queries_replies"][1] / "runs.csv")
    one = one[(one["seed"] == 0) & (one["b"] == 1)]
    merged = one.merge(two, on=["eps", "b", "t", "seed"], suffixes=("_1", "_2"))
    assert len(merged) == len(two) == len(one) == 4  # the planner and T = 2, 5, 10
    for col in ("accuracy", "loss", "t_star"):
        pd.testing.assert_series_equal(merged[f"{col}_1"], merged[f"{col}_2"], check_names=False)


def _outputs(out):
    """Every table without its provenance line (run time, date), claims.json and runs.csv."""
    texts = {t.name: t.read_text().partition("\n\n")[2] for t in (out / "tables").glob("*.md")}
    return texts | {f: (out / f).read_text() for f in ("claims.json", "runs.csv")}


def test_a_rerun_reuses_the_kept_runs_and_fresh_reruns_them(quick, tmp_path):
    """A second call with the same --out runs no simulation (the runs kept under OUT/runs are
    read back) and writes the same tables; --fresh runs everything again, same tables too.
    heterogeneous_dp keeps DataFrames (as JSON columns) and draws its figure from them."""
    _, done = quick
    first, before = done["heterogeneous_dp"]
    assert "0 of 2 runs kept" in first.stdout
    out = tmp_path / "out"
    shutil.copytree(before, out)
    kept = sorted((out / "runs").glob("*.json"))
    assert len(kept) == 2
    stamps = [f.stat().st_mtime_ns for f in kept]
    again = run("heterogeneous_dp", "--quick", "--out", str(out))
    assert again.returncode == 0, again.stderr[-3000:]
    assert "2 of 2 runs kept" in again.stdout
    assert [f.stat().st_mtime_ns for f in kept] == stamps  # read, not rewritten
    assert _outputs(out) == _outputs(before)
    figure = "figures/heterogeneous_dp.png"
    assert (out / figure).read_bytes() == (before / figure).read_bytes()
    fresh = run("heterogeneous_dp", "--quick", "--fresh", "--out", str(out))
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "0 of 2 runs kept" in fresh.stdout and "--fresh" in fresh.stdout
    assert sorted((out / "runs").glob("*.json")) == kept
    assert [f.stat().st_mtime_ns for f in kept] != stamps  # replaced
    assert _outputs(out) == _outputs(before)


@pytest.mark.parametrize("name", ["sweep_population_stragglers", "stragglers_topology_learning"])
def test_a_sweep_script_rerun_says_its_runs_were_kept(quick, tmp_path, name):
    """A sweep script resumes its sweep folder; a table made from those finished runs says so
    in its provenance line (its run time is not the runs' time), and is otherwise the same."""
    _, done = quick
    _, before = done[name]
    heads = [t.read_text().partition("\n")[0] for t in (before / "tables").glob("*.md")]
    assert heads and not any("kept from earlier calls" in h for h in heads)
    out = tmp_path / "out"
    shutil.copytree(before, out)
    again = run(name, "--quick", "--out", str(out))
    assert again.returncode == 0, again.stderr[-3000:]
    for table in (out / "tables").glob("*.md"):
        head, _, body = table.read_text().partition("\n")
        assert re.search(r"\((\d+) of \1 runs kept from earlier calls\)\.$", head), head
        assert body == (before / "tables" / table.name).read_text().partition("\n")[2]


def test_the_late_round_map_has_intervals_over_runs(quick):
    """The Σρ heatmap's cells (last-5-round means) carry n and a 95% t-interval, as the
    final-accuracy map's do, so the figure prints the intervals."""
    from fedgame.analysis import load_sweep

    _, done = quick
    _, out = done["sweep_population_stragglers"]
    script = load("sweep_population_stragglers")
    sweep = load_sweep(next((out / "sweep").glob("*/sweep-*")))
    late = script.late_round_means(sweep.rounds, by=[script.X, script.Y])
    assert (late["n"] == 2).all()
    assert (late["sum_rho_lo"] <= late["sum_rho"]).all()
    assert (late["sum_rho"] <= late["sum_rho_hi"]).all()
    assert (late["sum_rho_lo"] < late["sum_rho_hi"]).any()


def test_reproduce_splices_every_block_into_a_docs_copy(quick, tmp_path):
    root, _ = quick
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    proc = run("reproduce", "--no-run", "--out", str(root), "--docs", str(docs))
    assert proc.returncode == 0, proc.stderr
    assert "no output for block" not in proc.stdout
    table = (docs / "reproductions.md").read_text()
    assert "--quick" in table and "(preliminary)" in table
    for page in docs.glob("*.md"):
        for line in page.read_text().splitlines():
            if line.startswith("Measured with `python analysis/"):
                _, argv = parse_command(line.split("`")[1])
                assert "--quick" in argv, (page.name, line)
    assert (docs / "queries_replies_accuracy_vs_T.png").is_file()
    assert (root / "reproductions_table.md").is_file()


def test_holdouts_apply_their_flags_to_the_runs_own():
    shared = load("_shared")
    hold = shared.Holdout("alpha", "α = 0.3", ("--alpha", "0.3", "--first-seed", "777"))
    argv = ["--quick", "--alpha", "1", "--first-seed=5", "--dataset", "digits"]
    assert hold.applied(argv) == [
        "--quick",
        "--dataset",
        "digits",
        "--alpha",
        "0.3",
        "--first-seed",
        "777",
    ]
    assert hold.as_dict("qi_dpfl", ["--out", "x", "--quick"])["command"] == (
        "python analysis/qi_dpfl.py --quick --alpha 0.3 --first-seed 777"
    )
    reproduce = load("reproduce")
    args = reproduce.build_parser().parse_args(["--quick", "--dataset", "digits", "--out", "o"])
    cmds = reproduce.holdout_commands("qi_dpfl", args)
    assert len(cmds) == len(load("qi_dpfl").HOLDOUTS) >= 2
    for cmd, h in zip(cmds, load("qi_dpfl").HOLDOUTS):
        assert cmd[cmd.index("--out") + 1] == str(Path("o") / "qi_dpfl" / "holdouts" / h.key)
        assert {"--quick", "--dataset", "digits", *h.argv} <= set(cmd)


def test_the_reproductions_table_gives_each_holdout_verdict(tmp_path):
    """A row shows each hold-out's verdict, its measurement where it differs, and says when
    the verdict depends on the setting; a hold-out never run says so."""
    reproduce = load("reproduce")
    rule = {"kind": "above", "threshold": 0.0, "unit": "pts", "text": "long", "short": "A > B"}
    holds = [
        {"key": "seeds", "label": "other seeds", "command": "python analysis/lightdp.py"},
        {"key": "alpha", "label": "α = 0.3", "command": "python analysis/lightdp.py --alpha 0.3"},
    ]

    def claim(key, verdict, measured):
        return {
            "key": f"lightdp/{key}",
            "paper": "004",
            "claim": key,
            "paper_value": "v",
            "measured": measured,
            "verdict": verdict,
            "why_not": "" if verdict == "yes" else "because",
            "caveat": "",
            "rule": rule,
            "seeds": "seeds 0-4",
            "setting": "digits",
            "holdouts": holds,
            "command": "python analysis/lightdp.py",
            "preliminary": False,
        }

    folder = tmp_path / "lightdp"
    (folder / "holdouts" / "alpha").mkdir(parents=True)
    main = [claim("a", "yes", "1 ± 0.5"), claim("b", "yes", "2 ± 0.5")]
    (folder / "claims.json").write_text(json.dumps(main))
    held = [claim("a", "yes", "0.8 ± 0.3"), claim("b", "no", "-1.0 ± 0.2")]
    for c in held:
        c |= {"seeds": "seeds 777-781", "command": "python analysis/lightdp.py --alpha 0.3"}
    (folder / "holdouts" / "alpha" / "claims.json").write_text(json.dumps(held))
    _, claims, _ = reproduce.collect(tmp_path)
    table = reproduce.claims_table(claims)
    row_a, row_b = (line for line in table.splitlines() if line.startswith("| [004"))
    assert "other seeds: hold-out not run" in row_a and "α = 0.3, seeds 777-781: yes" in row_a
    assert "depends on the setting" not in row_a
    assert "α = 0.3, seeds 777-781: no (-1.0 ± 0.2)" in row_b
    assert "**depends on the setting**" in row_b
    assert "`python analysis/lightdp.py --alpha 0.3`" in row_b
    assert "| A > B |" in row_a and "(seeds 0-4; digits)" in row_a


def test_reproduce_runs_every_ablation_unless_told_not_to():
    reproduce = load("reproduce")
    ablations = {s for s in SCRIPTS if s.endswith("_ablation")}
    assert ablations and ablations == reproduce.ABLATIONS
    every = reproduce.selected(reproduce.build_parser().parse_args([]))
    assert set(every) == set(SCRIPTS) - {"heterogeneous_dp", "reproduce"}
    fewer = reproduce.selected(reproduce.build_parser().parse_args(["--no-ablations"]))
    assert set(fewer) == set(every) - ablations
    only = reproduce.build_parser().parse_args(["--only", "lightdp_ablation", "--no-ablations"])
    assert reproduce.selected(only) == ["lightdp_ablation"]


def test_missing_dataset_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "out"
    proc = run("dpfl_bcs", "--quick", "--dataset", "mnist", "--out", str(out))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "--dataset" in lines[0] and "mnist" in lines[0]
    assert "Traceback" not in proc.stderr and not out.exists()
    missing = tmp_path / "nothing_here"
    proc = run("qi_dpfl", "--quick", "--data-path", str(missing), "--out", str(out))
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert str(missing) in proc.stderr and not out.exists()


def test_bad_override_is_one_line_and_exit_2(tmp_path):
    out = tmp_path / "out"
    proc = run("lightdp", "--quick", "--set", "training.lr=-1", "--out", str(out))
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "training.lr" in proc.stderr
    assert not out.exists()


def test_dpfl_bcs_runs_the_mechanisms_asked_for(tmp_path):
    """--mechs GM (the hold-outs') runs no Laplace arm and makes no Laplace claim; an unknown
    mechanism is a one-line error before anything runs."""
    proc = run("dpfl_bcs", "--quick", "--dataset", "digits", "--mechs", "GM,XM")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "--mechs" in proc.stderr and "GM, LM" in proc.stderr
    proc = run(
        "dpfl_bcs", "--quick", "--dataset", "digits", "--mechs", "GM", "--out", str(tmp_path)
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert set(pd.read_csv(tmp_path / "runs.csv")["mech"]) == {"GM", "-"}
    keys = {c["key"] for c in json.loads((tmp_path / "claims.json").read_text())}
    assert "dpfl_bcs/gm_bcs_vs_weiavg" in keys and not any("lm_" in k for k in keys)


def test_bad_flag_is_argparse_exit_2():
    proc = run("privacy_aware", "--seeds", "0")
    assert proc.returncode == 2 and "--seeds" in proc.stderr


def test_command_drops_output_flags():
    shared = load("_shared")
    argv = ["--quick", "--out", "x", "--workers=2", "--set", "model.kind=mlp", "--workers", "1"]
    assert shared.command("lightdp", argv) == (
        "python analysis/lightdp.py --quick --set model.kind=mlp"
    )


def test_workers_stop_when_the_script_is_killed(tmp_path):
    """A script killed outright (SIGKILL: no handler runs) leaves no worker running."""
    import os
    import signal
    import time

    code = (
        f"import pathlib, sys, time; sys.path.insert(0, {str(ANALYSIS)!r}); import _shared\n"
        "def sleeper(marker):\n"
        "    pathlib.Path(marker).touch()  # the worker's initialiser has run before any job\n"
        "    time.sleep(120)\n"
        "if __name__ == '__main__':\n"
        f"    _shared.run_jobs(sleeper, [{str(tmp_path / 'a')!r}, {str(tmp_path / 'b')!r}], 2)\n"
    )
    script = tmp_path / "sleepers.py"
    script.write_text(code)
    parent = subprocess.Popen([sys.executable, str(script)])
    children: list[int] = []
    deadline = time.monotonic() + 120  # spawned workers start slowly on a loaded machine
    started = [tmp_path / "a", tmp_path / "b"]
    while time.monotonic() < deadline:
        time.sleep(0.5)
        children = [p for p in _children(parent.pid) if "spawn_main" in _cmdline(p)]
        if len(children) == 2 and all(m.exists() for m in started):
            break
    assert len(children) == 2, "the two workers did not start"
    assert all(m.exists() for m in started), "the workers never ran their jobs"
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 20
    try:
        while any(_alive(p) for p in children) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(_alive(p) for p in children)
    finally:
        for pid in filter(_alive, children):
            os.kill(pid, signal.SIGKILL)


def _children(parent: int) -> list[int]:
    """Processes whose parent is ``parent``, from /proc (no procps needed)."""
    import os

    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[-1].split()
            except OSError:
                continue
            if int(fields[1]) == parent:
                found.append(int(entry))
    return found


def _cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, exited but not yet reaped, counts as stopped)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def _fashion_mnist_folder(tmp_path: Path) -> Path:
    """Debian's Fashion-MNIST when installed, else a folder of IDX files of its exact shapes
    (60,000 + 10,000 blank 28 x 28 images): validation reads the shapes, not the pixels."""
    from fedgame.data.idx import FashionMnist

    try:
        return FashionMnist(FashionMnist.Config()).folder()
    except ScenarioError:
        pass
    import gzip
    import struct

    import numpy as np

    for name, count, dims in (
        ("train-images-idx3-ubyte", 60_000, (28, 28)),
        ("train-labels-idx1-ubyte", 60_000, ()),
        ("t10k-images-idx3-ubyte", 10_000, (28, 28)),
        ("t10k-labels-idx1-ubyte", 10_000, ()),
    ):
        shape = (count, *dims)
        header = bytes([0, 0, 0x08, len(shape)]) + struct.pack(f">{len(shape)}I", *shape)
        body = np.arange(count, dtype=np.uint8) % 10 if not dims else np.zeros(shape, np.uint8)
        (tmp_path / f"{name}.gz").write_bytes(gzip.compress(header + body.tobytes(), 1))
    return tmp_path


def test_every_dpfl_bcs_ablation_row_validates_at_full_size(tmp_path):
    """Each row's scenarios (the real setting, not --quick) pass validation, e.g. LeNet-5 on
    28 x 28 images and the server momentum of row close_t200_lenet."""
    import yaml

    from fedgame.scenario.load import validate

    script, shared = load("dpfl_bcs_ablation"), load("_shared")
    argv = ["--data-path", str(_fashion_mnist_folder(tmp_path))]
    args = shared.resolve(script.build_parser().parse_args(argv), script.DEFAULTS)
    base = yaml.safe_load((REPO / "scenarios" / "dpfl_bcs.yaml").read_text())
    for row in script.ROWS:
        jobs = script.jobs_of(row, args, base)
        for job in jobs[:: max(1, len(jobs) - 1)]:  # the first (WeiAvg) and the last (BCS)
            scenario = validate(job["scenario"])
            assert scenario.rounds == job["rounds"], row.key
    lenet = script.jobs_of(next(r for r in script.ROWS if r.key == "close_t200_lenet"), args, base)
    scenario = validate(lenet[0]["scenario"])
    assert scenario.model.kind == "lenet5" and scenario.training.server_momentum == 0.9


def check_competition(out: Path) -> None:
    """The market study's quick run (budgets slack in its 3 rounds, so each server's contest
    is the monopoly's, docs/competition.md): a row per world and per world and owner; per seed,
    S symmetric servers pay exactly S times the monopoly's payments and split the market
    evenly (HHI 1/S); a bigger reward wins S0 more than an even share."""
    markets = (out / "tables" / "markets.md").read_text().splitlines()
    owners = (out / "tables" / "owners.md").read_text().splitlines()
    assert len([r for r in markets if re.match(r"\| 0(\.2)? \| ", r)]) == 10  # 5 markets x 2
    assert len([r for r in owners if re.match(r"\| 0(\.2)? \| ", r)]) == 2 * (1 + 2 + 2 + 4 + 4)
    assert (out / "figures" / "competition.png").read_bytes()[:4] == b"\x89PNG"
    runs = pd.read_csv(out / "runs.csv")
    assert len(runs) == 2 * 10 and set(runs["seed"]) == {0, 1}
    for (_, straggle), part in runs.groupby(["seed", "straggle"]):
        mono = part[part["servers"] == 1].iloc[0]
        assert mono["hhi"] == 1.0
        for servers in (2, 4):
            sym = part[(part["servers"] == servers) & ~part["asymmetric"]].iloc[0]
            assert sym["payments"] == pytest.approx(servers * mono["payments"], rel=1e-6)
            assert sym["hhi"] == pytest.approx(1 / servers, rel=1e-6)
            asym = part[(part["servers"] == servers) & part["asymmetric"]].iloc[0]
            assert 1 / servers < asym["hhi"] < 1 and asym["payments"] > sym["payments"]
        assert (part["leaders_converged"] == 1.0).all(), straggle


def test_the_competition_study_compares_every_market(quick):
    _, done = quick
    proc, out = done["competition"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    check_competition(out)


def test_reproduce_from_one_study_leaves_the_reproductions_table(tmp_path):
    """An OUT holding one study's output (no paper script's claims) splices that study's
    tables and leaves docs/reproductions.md's table as it was."""
    tables = tmp_path / "out" / "competition" / "tables"
    tables.mkdir(parents=True)
    table = "Measured with `python analysis/competition.py`: test.\n\n| a |\n|---|\n| 1 |\n"
    (tables / "markets.md").write_text(table)
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    proc = run("reproduce", "--no-run", "--out", str(tmp_path / "out"), "--docs", str(docs))
    assert proc.returncode == 0, proc.stderr
    assert "no output for block reproductions/claims; left as it was" in proc.stdout
    assert (docs / "reproductions.md").read_text() == (
        REPO / "docs" / "reproductions.md"
    ).read_text()
    page = (docs / "competition.md").read_text()
    assert "<!-- BEGIN GENERATED competition/markets -->\n" + table.rstrip("\n") in page
