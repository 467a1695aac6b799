"""Command line, dataset choice, job runner and report writer shared by the analysis scripts.

Light at import (standard library and ``fedgame.errors`` only), so every script's ``--help``
returns at once; torch, pandas and fedgame's model load inside the functions that run jobs.

Every script takes ``--seeds N`` (seeds 0..N-1; the paper scripts also take ``--first-seed S``
for seeds S..S+N-1), ``--rounds R``, ``--quick`` (a small version for smoke tests), ``--out
DIR``, ``--workers W`` and ``--set KEY=VALUE`` (a scenario override applied to every run, for
ablations); scripts that load a dataset that may be missing take
``--dataset NAME`` (and ``--data-path DIR``): a missing dataset is a one-line error with exit
code 2, never a silent switch. Results go to ``--out``: ``report.md`` (every table), one
``tables/<key>.md`` per table (what ``analysis/reproduce.py`` splices into ``docs/``),
``claims.json`` (the rows of docs/reproductions.md), ``runs.csv`` (one row per run) and
``figures/``. A claim carries its verdict rule (``fedgame.analysis.stats.Rule``: kind,
threshold, text), the setting and seeds it was measured on, and the script's hold-out
settings (``Holdout``: the other seeds and data heterogeneity ``analysis/reproduce.py``
reruns it on), so docs/reproductions.md prints them from the code that applies them. Each
run uses one torch thread, so results do not depend on ``--workers``.

Scripts that run simulations keep each run's result under ``OUT/runs/`` (``run_kept``, from
``analysis/_kept.py``; the sweep scripts keep their sweep folders): a rerun with the same
``--out`` on the same code reads them instead of running again, so an interrupted script
resumes; after a code change nothing is reused; ``--fresh`` reruns everything.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _kept import run_kept as run_kept  # the scripts call _shared.run_kept

from fedgame.errors import FedGameError

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ("fashion_mnist", "mnist", "digits")
#: flags that change where or how fast results are written, not what they are
NOT_IN_COMMAND = ("--out", "--workers")
#: such flags that take no value
NOT_IN_COMMAND_SWITCHES = ("--fresh",)


@dataclass(frozen=True)
class Defaults:
    """A script's default and ``--quick`` seeds and rounds."""

    seeds: int
    rounds: int
    quick_seeds: int = 2
    quick_rounds: int = 5


def parser(
    name: str,
    doc: str,
    defaults: Defaults,
    *,
    dataset: str | None = None,
    datasets: Sequence[str] = DATASETS,
) -> argparse.ArgumentParser:
    """The common parser; ``dataset`` (the default) adds ``--dataset`` and ``--data-path``."""
    p = argparse.ArgumentParser(
        prog=f"python analysis/{name}.py",
        description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = defaults
    p.add_argument(
        "--seeds",
        type=_positive,
        help=f"seeds 0..N-1 (default {d.seeds}; --quick: {d.quick_seeds})",
    )
    p.add_argument(
        "--rounds",
        type=_positive,
        help=f"rounds per run (default {d.rounds}; --quick: {d.quick_rounds})",
    )
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of seconds")
    p.add_argument(
        "--out", type=Path, default=Path("results") / "analysis" / name, help="output folder"
    )
    p.add_argument(
        "--workers", type=_positive, help="processes (default 2, --quick 1; results do not change)"
    )
    p.add_argument(
        "--fresh",
        action="store_true",
        help="rerun every simulation, replacing the runs kept under --out (by default a rerun "
        "on the same code reuses them, so an interrupted script resumes)",
    )
    p.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="scenario override applied to every run (repeatable), e.g. model.kind=mlp",
    )
    if dataset is not None:
        p.add_argument("--dataset", choices=list(datasets), default=dataset)
        p.add_argument("--data-path", help="folder of the IDX files (mnist; fashion_mnist)")
    return p


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def add_first_seed(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """``--first-seed S`` (seeds S..S+N-1), for the paper scripts' hold-outs; returns ``p``."""
    p.add_argument(
        "--first-seed",
        type=_non_negative,
        default=0,
        help="the first seed: seeds S..S+N-1 (default 0; the hold-outs use other seeds)",
    )
    return p


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer, got {text}")
    return value


def seed_list(args: argparse.Namespace) -> list[int]:
    """The seeds of a run: ``--first-seed`` .. ``--first-seed + --seeds - 1``."""
    first = getattr(args, "first_seed", 0)
    return list(range(first, first + args.seeds))


def seeds_text(args: argparse.Namespace) -> str:
    """``"seeds 0-4"`` (``"seed 7"`` for one)."""
    seeds = seed_list(args)
    if len(seeds) == 1:
        return f"seed {seeds[0]}"
    return f"seeds {seeds[0]}-{seeds[-1]}"


@dataclass(frozen=True)
class Holdout:
    """A setting a paper script's claims are rerun on, besides its default (``reproduce.py``).

    ``argv``: the script's flags for it (other seeds with ``--first-seed``, another data
    heterogeneity, a reduced grid where the full one does not fit the CPU); ``label`` says
    what differs, in words.
    """

    key: str
    label: str
    #: flags, each followed by its value
    argv: tuple[str, ...]

    def applied(self, argv: Sequence[str]) -> list[str]:
        """A run's ``argv`` with this hold-out's flags in place of any it sets itself (so a
        hold-out of ``--quick --dataset digits`` stays quick and on digits)."""
        flags = set(self.argv[::2])
        kept: list[str] = []
        skip = False
        for arg in argv:
            if skip:
                skip = False
                continue
            flag = arg.split("=", 1)[0]
            if flag in flags:
                skip = "=" not in arg
                continue
            kept.append(arg)
        return [*kept, *self.argv]

    def as_dict(self, name: str, argv: Sequence[str]) -> dict[str, str]:
        """JSON form, with the command that reruns a run of ``argv`` on this hold-out."""
        return {"key": self.key, "label": self.label, "command": command(name, self.applied(argv))}


def resolve(args: argparse.Namespace, defaults: Defaults) -> argparse.Namespace:
    """Fill ``seeds`` and ``rounds`` from the defaults (``--quick`` picks the quick ones)."""
    if args.seeds is None:
        args.seeds = defaults.quick_seeds if args.quick else defaults.seeds
    if args.rounds is None:
        args.rounds = defaults.quick_rounds if args.quick else defaults.rounds
    if args.workers is None:
        args.workers = 1 if args.quick else min(2, os.cpu_count() or 1)
    return args


def command(name: str, argv: Sequence[str]) -> str:
    """The command that reproduces a result: ``argv`` without ``--out``/``--workers``/
    ``--fresh``."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        flag = arg.split("=", 1)[0]
        if flag in NOT_IN_COMMAND_SWITCHES:
            continue
        if flag in NOT_IN_COMMAND:
            skip = "=" not in arg
            continue
        kept.append(arg)
    return " ".join(["python", f"analysis/{name}.py", *map(shlex.quote, kept)])


def dataset_spec(
    args: argparse.Namespace, *, max_train: int | None = None, max_test: int | None = None
) -> dict[str, Any]:
    """The ``data.dataset`` block for ``--dataset`` (no fallback), checked to load.

    Raises ``ScenarioError`` (exit 2) when the files are missing.
    """
    spec: dict[str, Any] = {"kind": args.dataset}
    if args.dataset != "digits":
        spec |= {"max_train": max_train, "max_test": max_test}
        if args.data_path:
            spec["path"] = args.data_path
    check_dataset(spec)
    return spec


def check_dataset(spec: dict[str, Any]) -> Path | None:
    """The folder of an IDX dataset (``None`` for embedded ones); exit 2 when it is missing."""
    from fedgame import registry
    from fedgame.data.idx import IdxConfig
    from fedgame.errors import ScenarioError

    params = {k: v for k, v in spec.items() if k != "kind"}
    plugin = registry.create("dataset", spec["kind"], params)
    if not isinstance(plugin.config, IdxConfig):
        return None  # embedded or generated: always available
    try:
        return Path(plugin.folder())
    except ScenarioError as err:
        raise ScenarioError(
            "--dataset",
            spec["kind"],
            f"cannot be loaded ({err}); pass --data-path DIR or choose another with --dataset",
        ) from None


def apply_sets(data: dict[str, Any], overrides: Iterable[str]) -> dict[str, Any]:
    """``data`` with the ``--set KEY=VALUE`` overrides applied (YAML values)."""
    from fedgame.scenario.load import apply_overrides, parse_override

    return apply_overrides(data, [parse_override(o) for o in overrides])


def validate_all(scenarios: Iterable[dict[str, Any]]) -> None:
    """Validate every scenario before anything runs (bad input: ``ScenarioError``)."""
    from fedgame.scenario.load import validate

    for data in scenarios:
        validate(data)


def simulate(data: dict[str, Any]) -> Any:
    """Run one scenario dict on the CPU with one torch thread; returns the ``RunResult``."""
    import logging

    import torch

    from fedgame.run.single import simulate as run
    from fedgame.scenario.load import validate

    torch.set_num_threads(1)
    logging.getLogger("absl").setLevel(logging.ERROR)
    data = {**data, "training": {**data.get("training", {}), "device": "cpu"}}
    return run(validate(data))


def init_worker() -> None:
    """A worker's set-up: one OpenMP thread, and it stops when its parent is gone."""
    import threading

    os.environ["OMP_NUM_THREADS"] = "1"
    threading.Thread(target=_stop_with_parent, args=(os.getppid(),), daemon=True).start()


def _stop_with_parent(parent: int, poll_s: float = 1.0) -> None:
    """SIGTERM this process once its parent has exited (a killed script leaves no workers
    running; fedgame stops the run in progress on SIGTERM)."""
    import signal

    while os.getppid() == parent:
        time.sleep(poll_s)
    os.kill(os.getpid(), signal.SIGTERM)


def run_jobs(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int) -> list[Any]:
    """``[fn(job) for job in jobs]``, on ``workers`` spawned processes when > 1."""
    if workers <= 1 or len(jobs) <= 1:
        return [_progress(i, len(jobs), fn(job)) for i, job in enumerate(jobs)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=init_worker) as pool:
        return [_progress(i, len(jobs), r) for i, r in enumerate(pool.map(fn, jobs))]


def _progress(i: int, total: int, result: Any) -> Any:
    if sys.stderr.isatty():
        end = "\n" if i + 1 == total else ""
        print(f"\r{i + 1}/{total} runs", end=end, file=sys.stderr, flush=True)
    return result


def interval_cell(values: Iterable[float], digits: int, scale: float = 1.0) -> str:
    """``mean ± half-width`` over runs; a run without a value (a refused total: a round had
    none) is never dropped silently: the cell says on how many runs the value is missing
    (the interval is then over the others), and is "–" when no run has one."""
    from fedgame.analysis.stats import t_interval

    vals = [scale * float(v) for v in values]
    missing = sum(v != v for v in vals)
    if missing == len(vals):
        return "–"
    text = t_interval(vals).format(digits)
    return f"{text} (n/a on {missing} of {len(vals)} runs)" if missing else text


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A GitHub markdown table (``|`` in cells escaped)."""

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|")

    lines = ["| " + " | ".join(map(cell, header)) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(map(cell, row)) + " |" for row in rows]
    return "\n".join(lines)


@dataclass
class Report:
    """Tables, claims and raw rows of one script run; ``write`` puts them under ``--out``."""

    name: str
    args: argparse.Namespace
    argv: Sequence[str] = field(default_factory=lambda: sys.argv[1:])
    tables: dict[str, str] = field(default_factory=dict)
    claims: list[dict[str, Any]] = field(default_factory=list)
    #: what the claims were measured on besides the seeds (dataset, heterogeneity, sizes)
    setting: str = ""
    #: the settings reproduce.py reruns the claims on (the script's ``HOLDOUTS``)
    holdouts: Sequence[Holdout] = ()
    rows: list[dict[str, Any]] = field(default_factory=list)
    started: float = field(default_factory=time.perf_counter)

    @property
    def command(self) -> str:
        return command(self.name, self.argv)

    def provenance(self) -> str:
        """One line: the command, seeds, whether preliminary, the date and the run time."""
        seeds = seed_list(self.args)
        what = (
            f"{len(seeds)} seeds ({seeds[0]}-{seeds[-1]})"
            if len(seeds) > 1
            else f"1 seed ({seeds[0]})"
        )
        quick = "; **preliminary quick run**" if self.args.quick else ""
        today = dt.date.today().isoformat()
        took = time.perf_counter() - self.started
        import _kept

        kept, runs = _kept.TALLY["kept"], _kept.TALLY["runs"]
        earlier = f" ({kept} of {runs} runs kept from earlier calls)" if kept else ""
        return (
            f"Measured with `{self.command}`: {what}, mean ± 95% t-interval over seeds{quick}; "
            f"{today}, {took:.0f} s{earlier}."
        )

    def table(
        self, key: str, title: str, header: Sequence[str], rows: Iterable[Sequence[Any]]
    ) -> None:
        """Record (and print) a table under ``key``; ``title`` is printed, not spliced."""
        text = markdown_table(header, rows)
        self.tables[key] = text
        print(f"\n{title}\n{text}", flush=True)

    def claim(
        self,
        key: str,
        *,
        paper: str,
        claim: str,
        paper_value: str,
        measured: str,
        verdict: str,
        rule: Any,
        why_not: str | dict[str, str] = "",
        caveat: str = "",
    ) -> None:
        """Record one row of the reproductions table.

        ``rule`` is the ``fedgame.analysis.stats.Rule`` the verdict was computed with (its
        text and threshold go into the row). ``why_not`` explains a ``no``/``partly`` verdict
        (a string) or maps verdicts to texts; an ``inconclusive`` verdict says that the
        interval straddles the claim's threshold. ``caveat`` qualifies any verdict (e.g. a
        *yes* that says little because the compared arms cannot differ in this setting).
        """
        texts = why_not if isinstance(why_not, dict) else {"no": why_not, "partly": why_not}
        why = texts.get(verdict, "")
        if verdict == "inconclusive" and not why:
            why = f"the 95% interval ({self.args.seeds} seeds) straddles the claim's threshold"
        self._add(
            key,
            paper=paper,
            claim=claim,
            paper_value=paper_value,
            measured=measured,
            verdict=verdict,
            why_not="" if verdict == "yes" else why,
            caveat=caveat,
            rule=rule.as_dict(),
        )

    def not_run(self, key: str, *, paper: str, claim: str, paper_value: str, reason: str) -> None:
        """Record a headline claim of the paper that this script does not run, and why."""
        self._add(
            key,
            paper=paper,
            claim=claim,
            paper_value=paper_value,
            measured="not run",
            verdict="not run",
            why_not=reason,
            caveat="",
            rule={"kind": "not run", "threshold": None, "unit": "", "text": "–"},
        )

    def _add(self, key: str, **row: Any) -> None:
        self.claims.append(
            {"key": f"{self.name}/{key}"}
            | row
            | {
                "seeds": seeds_text(self.args),
                "setting": self.setting,
                "holdouts": [h.as_dict(self.name, self.argv) for h in self.holdouts],
                "command": self.command,
                "preliminary": bool(self.args.quick),
            }
        )

    def write(self, out: Path | None = None) -> Path:
        """Write report.md, tables/, claims.json and runs.csv under ``out`` (or ``--out``)."""
        import pandas as pd

        out = Path(out or self.args.out)
        (out / "tables").mkdir(parents=True, exist_ok=True)
        head = self.provenance()
        for key, text in self.tables.items():
            (out / "tables" / f"{key}.md").write_text(f"{head}\n\n{text}\n", encoding="utf-8")
        body = "\n\n".join(f"### {k}\n\n{t}" for k, t in self.tables.items())
        (out / "report.md").write_text(f"# {self.name}\n\n{head}\n\n{body}\n", encoding="utf-8")
        claims = json.dumps(self.claims, indent=1, ensure_ascii=False)
        (out / "claims.json").write_text(claims + "\n", encoding="utf-8")
        if self.rows:
            pd.DataFrame(self.rows).to_csv(out / "runs.csv", index=False)
        print(f"\n{head}\nwritten: {out}", flush=True)
        return out


def save_figure(
    fig: Any,
    path: Path,
    *,
    legend_from: Any,
    ncol: int,
    rect: tuple[float, float, float, float],
    dpi: int,
    title: str | None = None,
) -> Path:
    """Save ``fig`` with one shared legend (``legend_from``'s entries) under the panels and an
    optional title, laid out inside ``rect``; closes the figure."""
    import matplotlib.pyplot as plt

    handles, labels = legend_from.get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=9, frameon=False)
    if title is not None:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def main(body: Callable[[], None]) -> None:
    """Run ``body``; bad input (``FedGameError``) is one line on stderr and exit code 2."""
    try:
        body()
    except FedGameError as err:
        print(f"{Path(sys.argv[0]).name}: {err}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print(f"{Path(sys.argv[0]).name}: interrupted", file=sys.stderr)
        sys.exit(130)


def add_rows_option(p: Any, rows: Sequence[Any]) -> Any:
    """``--rows`` of an ablation script (its choices named in the help); returns ``p``."""
    keys = ", ".join(r.key for r in rows)
    p.add_argument("--rows", help=f"comma-separated subset of rows (default all: {keys})")
    return p


def pick_rows(rows: Sequence[Any], chosen: str | None, *, quick: Sequence[str] | None) -> list[Any]:
    """The ablation rows named in ``--rows`` (comma-separated keys), else ``quick``'s keys
    (``--quick``), else all; an unknown key is a ``ScenarioError`` naming the allowed ones."""
    from fedgame.errors import ScenarioError

    keys = [r.key for r in rows]
    wanted = chosen.split(",") if chosen else list(quick) if quick is not None else keys
    unknown = sorted(set(wanted) - set(keys))
    if unknown:
        raise ScenarioError("--rows", ",".join(unknown), ", ".join(keys))
    return [r for r in rows if r.key in wanted]
