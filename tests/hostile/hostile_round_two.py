"""Hostile inputs, round two: plug-ins, belief and game knobs, behaviours, cartels, results
folders, reports and the dashboard's arguments.

Same contract as :mod:`hostile_cases`: exit code 2, one line naming the key (and the file for
a scenario file), no traceback, nothing written, within the time and memory bounds. Plug-in
modules that are imported leave a mark file when they run, so "nothing written" also proves
that a refused module never ran. Results-folder cases build their folders (runs, sweeps,
links to a folder ``outside`` in the same case folder) before the command runs; a write
through a link would show up as a new file in ``outside``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml
from hostile_cases import BASE, FILE, MEMORY_LIMIT, SCENARIO_COMMANDS, Case, scenario

TRUSTED = {"FEDGAME_MEMORY_LIMIT": MEMORY_LIMIT, "FEDGAME_TRUST_PLUGINS": "1"}
ALL = ("run", "validate", "sweep")
#: under run and validate both (a case that names no commands runs under ``run`` only: it
#: makes every check validate makes, then would write; ``test_validate_agrees_with_setup``
#: holds the two together)
BOTH = ("validate", "run")
#: a plug-in module that leaves a mark when it is imported
MARKING = "from pathlib import Path\nPath('imported').write_text('x')\n"
GAME = {"incentive": {"kind": "qi_dpfl"}, "policy": {"kind": "best_response"}}
OPTIMAL_GAME = {"incentive": {"kind": "qi_dpfl", "active_set": "optimal"}, "policy": "always"}
MIX = [{"kind": "best_response", "share": 0.5}, {"kind": "learning", "share": 0.5}]
MIXED_GAME = {"incentive": {"kind": "qi_dpfl"}, "population": {"clients": 8, "behaviours": MIX}}
ONE_BEHAVIOUR = {"population": {"clients": 8, "behaviours": [{"kind": "always"}]}}


def with_module(
    body: str,
    *sets: str,
    extra: dict | None = None,
    name: str = "m",
    where: str = ".",
    scenario_in: str = ".",
    args: tuple[str, ...] = (),
) -> Callable[[Path], list[str]]:
    """A module ``name`` (``body``) in ``where``, and the base scenario (listing ``name`` under
    ``plugins``, plus ``extra``) in ``scenario_in``, with ``--set`` overrides."""

    def setup(folder: Path) -> list[str]:
        (folder / where).mkdir(parents=True, exist_ok=True)
        (folder / where / f"{name}.py").write_text(body)
        (folder / scenario_in).mkdir(parents=True, exist_ok=True)
        path = folder / scenario_in / FILE
        path.write_text(yaml.safe_dump({**BASE, "plugins": [name], **(extra or {})}))
        file = str(Path(scenario_in) / FILE)
        return [*args, file, *(a for s in sets for a in ("--set", s))]

    return setup


def _broken_package(folder: Path) -> list[str]:
    """A package beside the scenario whose submodule imports something missing."""
    (folder / "pkg").mkdir()
    (folder / "pkg" / "__init__.py").write_text("")
    (folder / "pkg" / "sub.py").write_text("import no_such_dependency_here\n")
    return scenario(extra={"plugins": ["pkg.sub"]})(folder)


def game(*sets: str, extra: dict | None = None) -> Callable[[Path], list[str]]:
    """The base scenario playing the QI-DPFL game (plus ``extra``), with overrides."""
    return scenario(*sets, extra={**GAME, **(extra or {})})


def _outside(folder: Path) -> Path:
    outside = folder / "outside"
    outside.mkdir(exist_ok=True)
    return outside


def _sweep_paths(folder: Path) -> tuple[Path, list[Path]]:
    """The sweep folder and run folders ``fedgame sweep s.yaml --grid selection.k=2,3`` would
    use under ``res`` (as the sweep itself computes them)."""
    from fedgame.run.grid import plan_sweep

    plan = plan_sweep(folder / FILE, overrides=["output.dir=res"], grid=["selection.k=2,3"])
    sweep_dir = folder / "res" / plan.sweep_dir.relative_to(plan.out)
    return sweep_dir, [sweep_dir / "runs" / run.run_id for run in plan.runs]


def resumed_sweep(damage: Callable[[Path, Path, list[Path]], None]) -> Callable[[Path], list[str]]:
    """A sweep folder as a killed sweep leaves it, then ``damage(folder, sweep_dir, runs)``."""

    def setup(folder: Path) -> list[str]:
        (folder / FILE).write_text(yaml.safe_dump(BASE))
        sweep_dir, runs = _sweep_paths(folder)
        (sweep_dir / "runs").mkdir(parents=True)
        (sweep_dir / "sweep.json").write_text('{"status": "interrupted"}')
        damage(folder, sweep_dir, runs)
        return [FILE, "--set", "output.dir=res", "--grid", "selection.k=2,3"]

    return setup


def _link_run(folder: Path, sweep_dir: Path, runs: list[Path]) -> None:
    runs[0].symlink_to(_outside(folder), target_is_directory=True)


def _file_run(folder: Path, sweep_dir: Path, runs: list[Path]) -> None:
    runs[0].write_text("not a folder")


def _dir_table(folder: Path, sweep_dir: Path, runs: list[Path]) -> None:
    (sweep_dir / "sweep.parquet").mkdir()


def _dir_json(folder: Path, sweep_dir: Path, runs: list[Path]) -> None:
    (sweep_dir / "sweep.json").unlink()
    (sweep_dir / "sweep.json").mkdir()


def _link_runs(folder: Path, sweep_dir: Path, runs: list[Path]) -> None:
    (sweep_dir / "runs").rmdir()
    (sweep_dir / "runs").symlink_to(_outside(folder), target_is_directory=True)


def _link_sweep(folder: Path, sweep_dir: Path, runs: list[Path]) -> None:
    (sweep_dir / "runs").rmdir()
    (sweep_dir / "sweep.json").unlink()
    sweep_dir.rmdir()
    sweep_dir.symlink_to(_outside(folder), target_is_directory=True)


def _name_link(folder: Path) -> None:
    (folder / "res").mkdir()
    (folder / "res" / "hostile").symlink_to(_outside(folder), target_is_directory=True)


# -- results folders a report reads ------------------------------------------------------------
def _tables(rounds: int = 2) -> tuple[pd.DataFrame, pd.DataFrame]:
    r = list(range(1, rounds + 1))
    rounds_table = pd.DataFrame(
        {"round": r, "test_accuracy": 0.5, "participants": 2, "uploaded": 2,
         "epsilon_spent_mean": 0.1, "epsilon_spent_max": 0.2}
    )  # fmt: skip
    return rounds_table, pd.DataFrame({"round": r, "client_id": 0, "epsilon_spent": 0.1})


RUN_DIR = "res/hostile/run-1"


def run_folder(
    manifest: dict | str | None = None,
    rounds: pd.DataFrame | None = None,
    *,
    hashes: bool = True,
    then: Callable[[Path], None] | None = None,
) -> Callable[[Path], None]:
    """A finished run folder written as fedgame writes it (``manifest`` fields replaced or
    the whole text given; ``rounds`` replacing the rounds table after the hashes were taken),
    then ``then(run_dir)``."""

    def make(folder: Path) -> None:
        from fedgame.run import store

        run = folder / RUN_DIR
        run.mkdir(parents=True)
        good_rounds, clients = _tables()
        fields = {"status": "completed", "rounds_completed": 2, "scenario": "hostile"}
        store.write_run_files(
            run, rounds=good_rounds, clients=clients, scenario=BASE, manifest=fields
        )
        written = json.loads((run / "manifest.json").read_text())
        if not hashes:
            written.pop("files")
        if isinstance(manifest, str):
            (run / "manifest.json").write_text(manifest)
        else:
            (run / "manifest.json").write_text(json.dumps({**written, **(manifest or {})}))
        if rounds is not None:
            rounds.to_parquet(run / "rounds.parquet", index=False)
        if then is not None:
            then(run)

    return make


def report(
    make: Callable[[Path], None], *args: str, target: str = RUN_DIR
) -> Callable[[Path], list[str]]:
    def setup(folder: Path) -> list[str]:
        make(folder)
        return [target, *args]

    return setup


def sweep_folder(info: Any, table: pd.DataFrame | None = None) -> Callable[[Path], None]:
    def make(folder: Path) -> None:
        sweep = folder / "res" / "hostile" / "sweep-1"
        (sweep / "runs").mkdir(parents=True)
        (sweep / "sweep.json").write_text(json.dumps(info))
        if table is not None:
            table.to_parquet(sweep / "sweep.parquet", index=False)

    return make


def _manifest_dev_zero(run: Path) -> None:
    (run / "manifest.json").unlink()
    (run / "manifest.json").symlink_to("/dev/zero")


def _report_link(run: Path) -> None:
    (run / "report").symlink_to(_outside(run.parents[2]), target_is_directory=True)


def _two_copies(run: Path) -> None:
    """A second run whose rounds table (same columns, same rows) replaces the first's."""
    other = _tables()[0].assign(test_accuracy=0.9)
    other.to_parquet(run / "rounds.parquet", index=False)


SWEEP_TABLE = _tables()[0].assign(run_id="a", replicate=0, status="completed")
REPORTS = ("report",)
DASH = ("dashboard",)

_CASES: tuple[Case, ...] = (
    # -- plug-ins: a scenario's modules are code -------------------------------------------
    Case("plugin_untrusted", with_module(MARKING), ("'plugins'", "--trust-plugins"), ALL),
    Case(
        "plugin_set_untrusted",
        with_module(MARKING, "plugins=[m]", extra={"plugins": []}),
        ("'plugins'", "trusted"),
        BOTH,
    ),
    Case(
        "plugin_list_untrusted",
        with_module(MARKING, args=("selection", "--scenario")),
        ("'plugins'", "--trust-plugins"),
        ("list",),
    ),
    Case(
        "plugin_grid_untrusted",
        with_module(MARKING, extra={"plugins": []}, args=()),
        ("'plugins'",),
        ("sweep --grid plugins=[[m]]",),
    ),
    Case("plugin_dashboard_untrusted", with_module(MARKING), ("'plugins'",), DASH),
    Case(
        "plugin_trust_env_bad",
        with_module(MARKING),
        ("'FEDGAME_TRUST_PLUGINS'", "'yes'"),
        BOTH,
        env={"FEDGAME_TRUST_PLUGINS": "yes"},
    ),
    Case(
        "plugin_keys_before_import",
        with_module(MARKING, "rounds=-1"),
        ("'rounds'",),
        BOTH,
        env=TRUSTED,
    ),
    Case(
        "plugin_population_before_import",
        with_module(MARKING, "population.colluders=99"),
        ("'population.colluders'",),
        env=TRUSTED,
    ),
    Case(
        "plugin_sys_exit_0",
        with_module("import sys\nsys.exit(0)\n"),
        ("module 'm' does not import", "SystemExit"),
        ALL,
        env=TRUSTED,
    ),
    Case(
        "plugin_sys_exit_none",
        with_module("raise SystemExit\n"),
        ("module 'm'", "SystemExit"),
        env=TRUSTED,
    ),
    Case(
        "plugin_keyboard_interrupt",
        with_module("raise KeyboardInterrupt\n"),
        ("module 'm'", "KeyboardInterrupt"),
        BOTH,
        env=TRUSTED,
    ),
    Case(
        "plugin_base_exception",
        with_module("class Odd(BaseException):\n    pass\nraise Odd('no')\n"),
        ("module 'm'", "Odd: no"),
        env=TRUSTED,
    ),
    Case(
        "plugin_recursion",
        with_module("def f():\n    return f()\nf()\n"),
        ("module 'm'", "RecursionError"),
        env=TRUSTED,
    ),
    Case(
        "plugin_memory",
        with_module("x = bytearray(1 << 40)\n"),
        ("module 'm'", "MemoryError"),
        env=TRUSTED,
    ),
    Case(
        "plugin_syntax_error",
        with_module("def (:\n"),
        ("module 'm'", "SyntaxError"),
        env=TRUSTED,
    ),
    Case(
        "plugin_registers_twice",
        with_module(
            "from fedgame.registry import register\n"
            "from fedgame.mechanisms.selection.all import AllSelection\n"
            "@register('selection', 'uniform')\nclass Again(AllSelection):\n    pass\n"
        ),
        ("module 'm'", "registered twice"),
        env=TRUSTED,
    ),
    Case(
        "plugin_lacks_its_familys_members",
        with_module(
            "from fedgame.registry import register\n"
            "@register('selection', 'half')\nclass Half:\n    pass\n"
        ),
        ("module 'm'", "lacks expected_fraction, select"),
        env=TRUSTED,
    ),
    Case(
        "plugin_package_broken_submodule",
        _broken_package,
        ("module 'pkg.sub'", "no_such_dependency_here"),
        env=TRUSTED,
    ),
    Case(
        "plugin_only_in_current_folder",
        with_module(MARKING, where=".", scenario_in="study"),
        ("module 'm'", "current folder"),
        BOTH,
        env=TRUSTED,
    ),
    Case("plugin_name_path", scenario(extra={"plugins": ["../evil"]}), ("'plugins'", "module")),
    Case("plugin_name_shell", scenario(extra={"plugins": ["os; rm -rf x"]}), ("'plugins'",)),
    Case("plugin_name_unicode", scenario(extra={"plugins": ["évil"]}), ("'plugins'", "ASCII")),
    Case("plugin_name_long", scenario(extra={"plugins": ["m" * 500]}), ("'plugins'", "200")),
    Case(
        "plugin_many",
        scenario(extra={"plugins": [f"m{i}" for i in range(150)]}),
        ("'plugins'", "at most 100"),
    ),
    Case("plugin_not_a_list", scenario(extra={"plugins": "m"}), ("'plugins'",)),
    Case("plugin_number", scenario(extra={"plugins": [7]}), ("'plugins.0'",)),
    # -- belief: a leader that learns ν ----------------------------------------------------
    Case(
        "belief_median_tiny",
        game("incentive.belief={prior: {median: 1.0e-300}}"),
        ("'incentive.belief.prior'", "1e-300 to 1e300"),
        BOTH,
    ),
    Case(
        "belief_sd_huge",
        game("incentive.belief={prior: {sd: 1.0e+200}}"),
        ("'incentive.belief.prior'", "sd"),
    ),
    Case(
        "belief_obs_sd_tiny",
        game("incentive.belief={obs_sd: 1.0e-300}"),
        ("'incentive.belief.obs_sd'", "precision"),
    ),
    Case(
        "belief_obs_sd_huge",
        game("incentive.belief={obs_sd: 1.0e+300}"),
        ("'incentive.belief.obs_sd'", "precision"),
    ),
    Case(
        "belief_explore_huge",
        scenario("incentive.belief={explore: 1.0e+300}", extra=OPTIMAL_GAME),
        ("'incentive.belief.explore'", "exp(-explore*sd)"),
    ),
    Case(
        "belief_explore_feasible_set",
        game("incentive.belief={explore: 1.0}"),
        ("'incentive'", "active_set: optimal"),
    ),
    Case(
        "belief_unknown_estimator",
        game("incentive.belief={kind: oracle}"),
        ("'incentive.belief.kind'", "lognormal"),
    ),
    Case(
        "belief_prior_unknown_kind",
        game("incentive.belief={prior: {kind: gamma}}"),
        ("'incentive.belief.prior'",),
    ),
    Case(
        "belief_discrete_weights",
        game("incentive.belief={prior: {kind: discrete, values: [1, 2], weights: [0.5, 0.6]}}"),
        ("'incentive.belief.prior", "sum to 1"),
    ),
    Case(
        "belief_discrete_tiny_value",
        game("incentive.belief={prior: {kind: discrete, values: [1.0e-310], weights: [1]}}"),
        ("'incentive.belief.prior'", "1e-300 to 1e300"),
    ),
    Case(
        "belief_median_nan",
        game("incentive.belief={prior: {median: .nan}}"),
        ("'incentive.belief.prior.median'",),
    ),
    Case(
        "belief_median_negative",
        game("incentive.belief={prior: {median: -1}}"),
        ("'incentive.belief.prior", "median"),
    ),
    Case(
        "belief_unknown_key",
        game("incentive.belief={prior: {mean: 1}}"),
        ("'incentive.belief.prior", "mean"),
    ),
    # -- game knobs: derived quantities ----------------------------------------------------
    Case("game_phi_huge", game("incentive.phi=1.0e+308"), ("'incentive.phi'", "phi*nu"), BOTH),
    Case("game_lam_tiny", game("incentive.lam=1.0e-300"), ("'incentive.lam'", "scale")),
    Case("game_clip_huge", game("incentive.clip=1.0e+300"), ("'incentive.clip'", "C^2")),
    Case("game_beta_huge", game("incentive.beta=1.0e+300"), ("'incentive.beta'",)),
    Case(
        "game_discount_tiny",
        game("incentive.discount=1.0e-300", "rounds=3"),
        ("'incentive.discount'", "pi^(1-t)"),
    ),
    Case("game_cap_tiny", game("incentive.reward_cap=1.0e-300"), ("'incentive.reward_cap'",)),
    Case(
        "game_max_high_huge",
        game("incentive={kind: max, high: 1.0e+300}"),
        ("'incentive.high'", "budget"),
    ),
    Case(
        "game_nu_huge",
        game("population.privacy_value=1.0e+300"),
        ("'population.privacy_value'", "phi*(sum of nu)^2"),
    ),
    Case(
        "game_nu_text_number",
        game("population.privacy_value=1e300"),
        ("'population.privacy_value'",),
    ),
    # -- behaviours: mixed populations -----------------------------------------------------
    Case(
        "behaviours_with_policy",
        game(extra={"population": {"clients": 8, "behaviours": MIX}}),
        ("'policy'", "not both"),
    ),
    Case(
        "behaviours_shares",
        scenario("population.behaviours=[{kind: always, share: 0.5}, {kind: always, share: 0.6}]"),
        ("'population.behaviours'", "sum to 1"),
    ),
    Case(
        "behaviours_unknown_kind",
        scenario("population.behaviours=[{kind: oracle, share: 1.0}]"),
        ("'population.behaviours.0", "oracle"),
    ),
    Case(
        "behaviours_assign_length",
        scenario("population.behaviours=[{kind: always}]", "population.assign=[0, 0]"),
        ("'population.assign'", "8"),
    ),
    Case(
        "behaviours_assign_index",
        scenario("population.behaviours=[{kind: always}]", "population.assign=[0,0,0,0,0,0,0,5]"),
        ("'population.assign'", "0..0"),
    ),
    Case(
        "behaviours_names_clash",
        scenario(
            "population.behaviours=[{kind: always, share: 0.5, name: a}, "
            "{kind: always, share: 0.5, name: a}]"
        ),
        ("'population.behaviours'", "distinct"),
    ),
    Case(
        "behaviours_bad_name",
        scenario("population.behaviours=[{kind: always, share: 1.0, name: 9lives}]"),
        ("'population.behaviours.0.name'",),
    ),
    Case(
        "behaviours_share_nan",
        scenario("population.behaviours=[{kind: always, share: .nan}]"),
        ("'population.behaviours",),
    ),
    Case(
        "behaviours_learning_eta",
        scenario("population.behaviours=[{kind: learning, share: 1.0, eta: 1.0e+300}]"),
        ("'population.behaviours.0.eta'",),
    ),
    Case(
        "behaviours_mix_phi_huge",
        scenario(
            "incentive.phi=1.0e+308",
            extra={"incentive": GAME["incentive"], "population": {"clients": 8, "behaviours": MIX}},
        ),
        ("'incentive.phi'",),
    ),
    Case(
        "behaviours_index_past_end",
        scenario(
            "population.behaviours.3.share=0.5",
            extra={"population": {"clients": 8, "behaviours": [{"kind": "always"}]}},
        ),
        ("'population.behaviours.3.share'", "0..0"),
    ),
    # -- cartels ---------------------------------------------------------------------------
    Case("cartel_no_colluders", game("game.cartel=true"), ("'game.cartel'", "at least 2")),
    Case(
        "cartel_stragglers",
        game(
            "game.cartel=true",
            "game.complete_information=true",
            "population.colluders=3",
            "population.straggle_prob=0.2",
        ),
        ("'game.cartel'", "full delivery"),
    ),
    Case(
        "cartel_everyone",
        game("game.cartel=true", "population.colluders=8"),
        ("'population.colluders'", "< population.clients"),
    ),
    Case("cartel_negative", game("population.colluders=-2"), ("'population.colluders'",)),
    Case("cartel_not_bool", game("game.cartel=perhaps"), ("'game.cartel'",)),
    Case(
        "cartel_phi_huge",
        game("game.cartel=true", "population.colluders=3", "incentive.phi=1.0e+300"),
        ("'incentive.phi'",),
    ),
    Case(
        "degeneracy_share",
        game("game.degeneracy={max_share: 0.4}"),
        ("'game.degeneracy.max_share'",),
    ),
    # -- results folders ---------------------------------------------------------------------
    Case(
        "out_name_is_link",
        lambda f: _name_link(f) or scenario("output.dir=res")(f),
        ("'output.dir'", "symbolic link"),
        ALL,
    ),
    Case(
        "sweep_run_is_link",
        resumed_sweep(_link_run),
        ("'output.dir'", "symbolic link"),
        ("sweep",),
    ),
    Case("sweep_run_is_file", resumed_sweep(_file_run), ("not a folder",), ("sweep",)),
    Case(
        "sweep_table_is_folder",
        resumed_sweep(_dir_table),
        ("sweep.parquet", "a folder"),
        ("sweep",),
    ),
    Case("sweep_json_is_folder", resumed_sweep(_dir_json), ("sweep.json", "a folder"), ("sweep",)),
    Case("sweep_runs_is_link", resumed_sweep(_link_runs), ("runs", "symbolic link"), ("sweep",)),
    Case("sweep_folder_is_link", resumed_sweep(_link_sweep), ("symbolic link",), ("sweep",)),
    # -- reports ---------------------------------------------------------------------------
    Case(
        "report_out_is_file",
        report(lambda f: run_folder()(f) or (f / "taken").write_text("x"), "--out", "taken"),
        ("'--out'", "is a file"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_folder_is_link",
        report(run_folder(then=_report_link)),
        ("'RESULT_DIR'", "symbolic link"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_target_nan",
        report(run_folder(), "--target", "nan"),
        ("'--target'", "[0, 1]"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_target_5",
        report(run_folder(), "--target", "5"),
        ("'--target'", "[0, 1]"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_target_negative",
        report(run_folder(), "--target=-0.5"),
        ("'--target'",),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_empty_folder",
        report(lambda f: (f / "res").mkdir(), target="res"),
        ("'RESULT_DIR'", "no results"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_result_dir_is_file",
        report(lambda f: (f / "res").write_text("x"), target="res"),
        ("'RESULT_DIR'", "not a folder"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_wrong_columns",
        report(run_folder(rounds=pd.DataFrame({"round": [1, 2], "acc": [0.1, 0.2]}), hashes=False)),
        ("'RESULT_DIR'", "no column 'test_accuracy'"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_text_rounds",
        report(run_folder(rounds=_tables()[0].assign(round=["1", "2"]), hashes=False)),
        ("'RESULT_DIR'", "column 'round'"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_rounds_completed_text",
        report(run_folder({"rounds_completed": "2"})),
        ("'RESULT_DIR'", "'rounds_completed' is '2'"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_status_null",
        report(run_folder({"status": None})),
        ("'RESULT_DIR'", "'status'"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_manifest_list",
        report(run_folder("[1, 2, 3]")),
        ("'RESULT_DIR'", "not a JSON object"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_manifest_dev_zero",
        report(run_folder(then=_manifest_dev_zero)),
        ("'RESULT_DIR'", "manifest.json"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_table_swapped",
        report(run_folder(then=_two_copies)),
        ("'RESULT_DIR'", "not the file this run wrote"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_sweep_run_id_path",
        report(sweep_folder({"runs": [{"run_id": "../../x", "replicate": 0}]}), target="res"),
        ("'RESULT_DIR'", "not a folder name"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_sweep_json_list",
        report(sweep_folder([]), target="res"),
        ("'RESULT_DIR'", "not a JSON object"),
        REPORTS,
        names_file=False,
    ),
    Case(
        "report_sweep_table_columns",
        report(
            sweep_folder({"runs": [], "grid": {"selection.k": [2, 3]}}, SWEEP_TABLE),
            target="res",
        ),
        ("'RESULT_DIR'", "no column 'selection.k'"),
        REPORTS,
        names_file=False,
    ),
    # -- the dashboard's arguments (never the browser) -------------------------------------
    Case(
        "dashboard_port_negative",
        scenario(),
        ("'--port'", "0-65535"),
        ("dashboard --port=-1",),
        names_file=False,
    ),
    Case(
        "dashboard_port_huge",
        scenario(),
        ("'--port'",),
        ("dashboard --port 70000",),
        names_file=False,
    ),
    Case(
        "dashboard_port_text",
        scenario(),
        ("--port", "invalid int"),
        ("dashboard --port abc",),
        names_file=False,
    ),
    Case(
        "dashboard_set_on_run_folder",
        report(run_folder(), "--set", "rounds=3"),
        ("'--set'", "only with a scenario file"),
        DASH,
        names_file=False,
    ),
    Case(
        "dashboard_damaged_run",
        report(run_folder({"rounds_completed": 5})),
        ("'SCENARIO'", "manifest says 5"),
        DASH,
        names_file=False,
    ),
    Case("dashboard_bad_scenario", scenario("rounds=0"), ("'rounds'",), DASH),
    Case(
        "dashboard_missing_target",
        lambda f: ["nowhere.yaml"],
        ("cannot be read",),
        DASH,
        names_file=False,
    ),
)

#: the corpus: a case that names no commands runs under ``run`` alone
CASES: tuple[Case, ...] = tuple(
    replace(case, commands=("run",)) if case.commands == SCENARIO_COMMANDS else case
    for case in _CASES
)
