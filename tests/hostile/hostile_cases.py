"""The corpus of hostile inputs: each writes its files into an empty folder and names the
command line to run there, and what the one-line error must mention.

Every case must end with exit code 2, one line on stderr naming the key and what is allowed
(and the file, for a scenario file), no traceback, nothing written, within the time and
memory bounds of ``test_hostile_inputs.py``. Scenario cases run under ``run`` and
``validate`` (the two must agree), some under ``sweep`` as well.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

FILE = "s.yaml"
BASE: dict = {
    "name": "hostile",
    "seed": 1,
    "rounds": 2,
    "population": {"clients": 8},
    "training": {"local_steps": 1, "batch_size": 8, "device": "cpu"},
    "selection": {"kind": "uniform", "k": 4},
}
SCENARIO_COMMANDS = ("run", "validate")
ALL_COMMANDS = ("run", "validate", "sweep")
#: the documented memory cap the cases run under, so a refusal does not depend on the machine
MEMORY_LIMIT = "4G"


@dataclass(frozen=True)
class Case:
    """A hostile input: ``setup(folder)`` writes files and returns the arguments after the
    command; ``expect`` are texts the error line must contain."""

    id: str
    setup: Callable[[Path], list[str]]
    expect: tuple[str, ...]
    commands: tuple[str, ...] = SCENARIO_COMMANDS
    names_file: bool = True
    env: dict[str, str] = field(default_factory=lambda: {"FEDGAME_MEMORY_LIMIT": MEMORY_LIMIT})
    unset: tuple[str, ...] = ()


def text(content: str | bytes, name: str = FILE) -> Callable[[Path], list[str]]:
    """A scenario file with exactly this content."""

    def setup(folder: Path) -> list[str]:
        data = content.encode() if isinstance(content, str) else content
        (folder / name).write_bytes(data)
        return [name]

    return setup


def scenario(*sets: str, extra: dict | None = None) -> Callable[[Path], list[str]]:
    """The valid base scenario (plus ``extra`` keys) with ``--set`` overrides."""

    def setup(folder: Path) -> list[str]:
        (folder / FILE).write_text(yaml.safe_dump({**BASE, **(extra or {})}))
        return [FILE, *(a for s in sets for a in ("--set", s))]

    return setup


def with_files(
    make: Callable[[Path], None], *sets: str, args: tuple[str, ...] = ()
) -> Callable[[Path], list[str]]:
    """Like :func:`scenario`, after ``make(folder)`` created other files."""

    def setup(folder: Path) -> list[str]:
        make(folder)
        return [*scenario(*sets)(folder), *args]

    return setup


def alias_bomb() -> str:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        prev, name = chr(ord("a") + i - 1), chr(ord("a") + i)
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def flow_alias_bomb() -> str:
    parts = ["&a [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    for prev, name in zip("abcde", "bcdef"):
        parts.append(f"&{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    return "[" + ", ".join(parts) + "]"


def _idx(shape: tuple[int, ...], payload: bytes = b"") -> bytes:
    return bytes([0, 0, 0x08, len(shape)]) + struct.pack(f">{len(shape)}I", *shape) + payload


def huge_idx(folder: Path) -> None:
    idx = folder / "mnist"
    idx.mkdir()
    (idx / "train-images-idx3-ubyte").write_bytes(_idx((1_000_000_000, 28, 28)))
    (idx / "train-labels-idx1-ubyte").write_bytes(_idx((1_000_000_000,)))
    (idx / "t10k-images-idx3-ubyte").write_bytes(_idx((10, 28, 28), bytes(7840)))
    (idx / "t10k-labels-idx1-ubyte").write_bytes(_idx((10,), bytes(10)))


def unwritable(folder: Path) -> str:
    """A folder this process cannot create folders in (``/proc`` when running as root)."""
    if os.geteuid() == 0:
        return "/proc/fedgame-results"
    locked = folder / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    return str(locked / "results")


def _out_unwritable(folder: Path) -> list[str]:
    return scenario(f"output.dir={unwritable(folder)}")(folder)


def _run_folder(folder: Path, *, manifest: str, rounds: bytes) -> None:
    run = folder / "res" / "hostile" / "run-1"
    run.mkdir(parents=True)
    (run / "manifest.json").write_text(manifest)
    (run / "rounds.parquet").write_bytes(rounds)
    (run / "clients.parquet").write_bytes(rounds)
    (run / "scenario.resolved.yaml").write_text("name: hostile\n")


def _report(make: Callable[[Path], None]) -> Callable[[Path], list[str]]:
    def setup(folder: Path) -> list[str]:
        make(folder)
        return ["res/hostile/run-1"]

    return setup


MIXTURE_06 = (
    "population.privacy_value={dist: mixture, components: [{weight: 0.3, dist: constant, "
    "value: 1}, {weight: 0.3, dist: constant, value: 2}]}"
)
MIXTURE_LIST = (
    "population.privacy_value={dist: mixture, components: [{weight: 1.0, dist: list, "
    "values: [1, 2, 3, 4, 5, 6, 7, 8]}]}"
)
MNIST1D_BIG = "data.dataset={kind: mnist1d, num_samples: 20000000}"
GRID_HUGE = [
    a
    for key in ("seed", "rounds", "training.lr", "selection.k", "population.clients")
    for a in ("--grid", f"{key}=[{', '.join(str(i + 1) for i in range(100))}]")
]

CASES: tuple[Case, ...] = (
    # -- the file itself --------------------------------------------------------------------
    Case("alias_bomb", text(alias_bomb()), ("aliases are expanded",), ALL_COMMANDS),
    Case("nested_lists_100k", text("a: " + "[" * 100_000 + "]" * 100_000), ("nesting",)),
    Case("nested_maps_5k", text("a: " + "{b: " * 5000 + "1" + "}" * 5000), ("nesting",)),
    Case("non_utf8", text(b"rounds: 3\nname: \xff\xfe\n"), ("not UTF-8", "offset")),
    Case("utf16", text("rounds: 3\n".encode("utf-16")), ("not UTF-8",)),
    Case("duplicate_key", text("rounds: 3\nseed: 1\nrounds: 4\n"), ("'rounds'", "twice")),
    Case(
        "duplicate_nested_key",
        text("population:\n  clients: 8\n  clients: 9\n"),
        ("'population.clients'", "lines 2 and 3"),
        ALL_COMMANDS,
    ),
    Case("recursive_alias", text("population: &p {x: *p}\n"), ("inside the collection",)),
    Case("huge_file", text("# " + "x" * (2 << 20) + "\n"), ("larger than",)),
    Case("python_tag", text("rounds: !!python/object/apply:os.system ['true']\n"), ("YAML",)),
    Case("two_documents", text("rounds: 3\n---\nrounds: 4\n"), ("YAML syntax error",)),
    Case("top_level_list", text("- 1\n- 2\n"), ("mapping of keys",)),
    Case("control_character", text("name: a\x07b\n"), ("control characters",)),
    Case("many_values", text("x: [" + "1," * 200_000 + "1]\n"), ("values",)),
    Case("toml_deep", text("a = " + "[" * 100_000 + "]" * 100_000, "s.toml"), ("nests",)),
    Case("toml_nan", text("rounds = 3\n[training]\nlr = nan\n", "s.toml"), ("'training.lr'",)),
    Case("number_key", text("1: 2\n"), ("keys are names",)),
    Case("file_is_folder", lambda f: (f / FILE).mkdir() or [FILE], ("not a regular file",)),
    Case(
        "file_is_dev_zero",
        lambda f: (f / FILE).symlink_to("/dev/zero") or [FILE],
        ("not a regular file",),
    ),
    Case("file_is_fifo", lambda f: os.mkfifo(f / FILE) or [FILE], ("not a regular file",)),
    # -- values ----------------------------------------------------------------------------
    Case("clients_true", scenario("population.clients=true"), ("'population.clients'", "true")),
    Case("plugin_int_true", scenario("selection.k=true"), ("'selection.k'", "true/false")),
    Case("seed_false", scenario("seed=false"), ("'seed'", "true/false")),
    Case("rounds_1e12", scenario("rounds=1000000000000"), ("'rounds'", "fits in memory")),
    Case(
        "clients_1e7",
        scenario("population.clients=10000000", MNIST1D_BIG),
        ("fits in memory",),
        ALL_COMMANDS,
    ),
    Case(
        "clients_5000_digits",
        scenario("population.clients=5000"),
        ("'data.partition.min_size'", "5000 clients and 1438 samples"),
    ),
    Case(
        "clients_1e9_machine",
        scenario("population.clients=1000000000", MNIST1D_BIG),
        ("fits in memory",),
        env={},
        unset=("FEDGAME_MEMORY_LIMIT",),
    ),
    Case("hidden_1e7", scenario("model={kind: mlp, hidden: [10000000]}"), ("'model'", "memory")),
    Case("batch_1e9", scenario("training.batch_size=1000000000"), ("'training.batch_size'",)),
    Case(
        "planner_21_tib",
        scenario(
            "population.clients=3000",
            "rounds=1000000000",
            "selection={kind: privacy_aware, k: 3000}",
            "data.dataset={kind: mnist1d, num_samples: 40000}",
        ),
        ("fits in memory",),
    ),
    Case(
        "complete_graph_200k",
        scenario(
            "population.clients=200000",
            "network.topology=complete",
            "data.dataset={kind: mnist1d, num_samples: 400000}",
        ),
        ("'network.topology'", "sparser"),
    ),
    Case("lr_inf", scenario("training.lr=.inf"), ("'training.lr'", "finite"), ALL_COMMANDS),
    Case("lr_text_inf", scenario("training.lr=1e400"), ("'training.lr'", "finite")),
    Case("epsilon_inf", scenario("population.budget.epsilon=.inf"), ("finite",)),
    Case("delta_nan", scenario("population.budget.delta=.nan"), ("'population.budget.delta'",)),
    Case("straggle_nan", scenario("population.straggle_prob=.nan"), ("not NaN",)),
    Case("privacy_value_inf", scenario("population.privacy_value=.inf"), ("finite",)),
    Case("plugin_nan", scenario("privacy={kind: gaussian, clip: .nan}"), ("'privacy.clip'",)),
    Case("mixture_weights_0_6", scenario(MIXTURE_06), ("sum to 1",)),
    Case("mixture_of_list", scenario(MIXTURE_LIST), ("mixture component",)),
    Case(
        "list_wrong_length",
        scenario("population.privacy_value=[1.0, 2.0]"),
        ("'population.privacy_value'", "8 values"),
        ALL_COMMANDS,
    ),
    Case("name_dotdot", scenario("name=.."), ("'name'", "not starting with '.'"), ALL_COMMANDS),
    Case("name_dot", scenario("name=."), ("'name'",)),
    Case("name_slash", scenario("name=a/b"), ("'name'",)),
    Case("name_too_long", scenario("name=" + "n" * 300), ("'name'", "1-100")),
    Case(
        "out_is_file",
        with_files(lambda f: (f / "taken").write_text("x"), "output.dir=taken"),
        ("'output.dir'", "is a file"),
        ALL_COMMANDS,
    ),
    Case(
        "out_dangling_symlink",
        with_files(lambda f: (f / "gone").symlink_to(f / "nowhere"), "output.dir=gone"),
        ("'output.dir'", "link to nothing"),
    ),
    Case("out_unwritable", _out_unwritable, ("'output.dir'", "can write")),
    Case(
        "out_name_is_file",
        with_files(
            lambda f: (f / "res").mkdir() or (f / "res" / "hostile").write_text("x"),
            "output.dir=res",
        ),
        ("is a file",),
    ),
    Case("out_nul", text('output: {dir: "a\\0b"}\n'), ("'output.dir'", "NUL")),
    Case(
        "dataset_folder_missing",
        scenario("data.dataset={kind: mnist, path: missing}"),
        ("'data.dataset.path'", "lacks"),
        ALL_COMMANDS,
    ),
    Case(
        "idx_header_1e9_images",
        with_files(huge_idx, "data.dataset={kind: mnist, path: mnist}"),
        ("'data.dataset.path'", "announces"),
    ),
    Case(
        "edges_dev_zero",
        scenario("network.topology={kind: edge_list, edges: /dev/zero}"),
        ("'network.topology.edges'", "not a device"),
    ),
    Case(
        "edges_not_utf8",
        with_files(
            lambda f: (f / "edges.txt").write_bytes(b"0 1\n\xff\xff\n"),
            "network.topology={kind: edge_list, edges: edges.txt}",
        ),
        ("'network.topology.edges'", "UTF-8"),
    ),
    Case(
        "partition_capacity",
        scenario("data.partition={kind: iid, min_size: 1000}"),
        ("'data.partition.min_size'",),
    ),
    Case(
        "memory_limit_env_bad",
        scenario(),
        ("'FEDGAME_MEMORY_LIMIT'", "8G"),
        env={"FEDGAME_MEMORY_LIMIT": "lots"},
    ),
    # -- the command line --------------------------------------------------------------------
    Case(
        "replicate_negative",
        scenario(),
        ("'--replicate'", ">= 0"),
        ("run --replicate -1",),
        names_file=False,
    ),
    Case("unknown_option", scenario(), ("--bogus",), ("run --bogus",), names_file=False),
    Case("set_bad_key", scenario("a..b=1"), ("'--set'", "dotted key")),
    Case("set_deep_key", scenario("a." * 5000 + "b=1"), ("'--set'",)),
    Case("set_nested_value", scenario("x=" + "[" * 10_000 + "]" * 10_000), ("nesting",)),
    Case("set_alias_bomb", scenario("x=" + flow_alias_bomb()), ("aliases are expanded",)),
    Case("set_nan", scenario("rounds=.nan"), ("'rounds'",), ALL_COMMANDS),
    Case(
        "grid_nan",
        scenario(),
        ("'training.lr'", "grid point"),
        ("sweep --grid training.lr=0.1,.nan",),
    ),
    Case(
        "grid_nan_in_file",
        scenario(extra={"sweep": {"grid": {"training.lr": [0.1, float("nan")]}}}),
        ("'sweep.grid.training.lr[1]'", "NaN"),
        ("sweep",),
    ),
    Case("grid_bool", scenario(), ("true/false",), ("sweep --grid population.clients=8,true",)),
    Case(
        "grid_10_billion_runs", lambda f: [*scenario()(f), *GRID_HUGE], ("10000 runs",), ("sweep",)
    ),
    Case("grid_bad_key", scenario(), ("'sweep.grid.name'",), ("sweep --grid name=a,b",)),
    Case("replicates_zero", scenario(), ("'--replicates'",), ("sweep --replicates 0",)),
    Case("workers_zero", scenario(), ("'--workers'",), ("sweep --workers 0",)),
    Case(
        "workers_memory",
        scenario(),
        ("'--workers'", "fit at once"),
        ("sweep --grid selection.k=1,2,3,4,5,6,7,8 --replicates 2 --workers 16",),
    ),
    Case(
        "report_corrupt_manifest",
        _report(lambda f: _run_folder(f, manifest="{not json", rounds=b"PAR1")),
        ("'RESULT_DIR'", "manifest.json unreadable"),
        ("report",),
        names_file=False,
    ),
    Case(
        "report_truncated_parquet",
        _report(
            lambda f: _run_folder(
                f, manifest='{"status": "completed", "rounds_completed": 2}', rounds=b"PAR1xx"
            )
        ),
        ("'RESULT_DIR'", "rounds.parquet unreadable"),
        ("report",),
        names_file=False,
    ),
    Case(
        "report_missing_folder",
        lambda f: ["nowhere"],
        ("'RESULT_DIR'", "not a folder"),
        ("report",),
        names_file=False,
    ),
)


def all_cases() -> tuple[Case, ...]:
    """This corpus and round two's (plug-ins, belief, behaviours, cartels, results folders,
    reports, dashboard: :mod:`hostile_round_two`)."""
    from hostile_round_two import CASES as ROUND_TWO

    return (*CASES, *ROUND_TWO)


def invocations() -> list[tuple[str, Case, list[str]]]:
    """``(id, case, command words)`` for every case under each of its commands."""
    out = []
    for case in all_cases():
        for command in case.commands:
            words = command.split()
            out.append((f"{case.id}-{words[0]}", case, words))
    return out
