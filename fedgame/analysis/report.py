"""``fedgame report``: a self-contained Markdown report (``report.md`` + PNGs) for a run or sweep.

The report folder (default ``RESULT_DIR/report``) holds ``report.md`` and the figures it links
by relative path, so the folder can be moved or attached as it is.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fedgame.analysis import figures
from fedgame.analysis.equilibrium import equilibrium_table, response
from fedgame.analysis.load import find_runs, load_run
from fedgame.analysis.summary import run_metrics, summarise
from fedgame.analysis.sweep import find_sweep, load_sweep
from fedgame.errors import FedGameError


def md_table(frame: pd.DataFrame, *, digits: int = 4) -> str:
    """A GitHub-flavoured Markdown table of ``frame`` (floats to ``digits`` significant)."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return "" if math.isnan(v) else f"{v:.{digits}g}"
        return str(v).replace("|", "\\|")

    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(False)]
    return "\n".join([head, rule, *body])


def _with_ci(table: pd.DataFrame, keys: Sequence[str], metrics: Sequence[str]) -> pd.DataFrame:
    """Mean columns rendered as ``mean [lo, hi]`` text."""
    out = table[[*keys, "n"]].copy()
    for m in metrics:
        if m not in table:
            continue
        out[m] = [
            "–"
            if math.isnan(v)
            else f"{v:.4g}" + ("" if math.isnan(lo) else f" [{lo:.3g}, {hi:.3g}]")
            for v, lo, hi in zip(table[m], table[f"{m}_lo"], table[f"{m}_hi"])
        ]
    return out


def _figure_lines(made: dict[str, Path | None], out: Path) -> list[str]:
    return [
        f"### {title}\n\n![{title}]({path.relative_to(out).as_posix()})\n"
        for title, path in made.items()
        if path is not None
    ]


def _mechanism_key(keys: Sequence[str]) -> list[str]:
    """The grid key that names a mechanism (``incentive.kind``...), else the first key."""
    for key in keys:
        if key.endswith(".kind") or key in ("incentive", "privacy", "selection", "policy"):
            return [key]
    return list(keys[:1])


SUMMARY_METRICS = (
    "final_accuracy",
    "rounds_to_target",
    "total_reward",
    "server_cost",
    "participation_rate",
    "final_epsilon_mean",
    "epsilon_p90",
    "reward",
    "sum_rho",
    "nash_gap_max",
)


def sweep_report(sweep_dir: Path, out: Path, *, target: float) -> Path:
    sweep = load_sweep(sweep_dir)
    keys, rounds = sweep.keys, sweep.rounds
    runs = sweep.runs
    lines = [f"# Sweep report: {sweep.info.get('name')}", "", f"Folder: `{sweep.path}`", ""]
    lines += [f"Grid: `{sweep.info.get('grid')}`, {sweep.info.get('replicates')} replicates.", ""]
    counts = runs["status"].value_counts().to_dict()
    lines += ["Runs: " + ", ".join(f"{v} {k}" for k, v in counts.items()), ""]
    if rounds.empty:
        (out / "report.md").write_text("\n".join([*lines, "No finished run yet.", ""]))
        return out / "report.md"
    summary = summarise(sweep, target=target)
    lines += [f"## Summary per grid point (mean [95% CI]; target accuracy {target})", ""]
    lines += [md_table(_with_ci(summary, keys, SUMMARY_METRICS)), ""]
    if keys:
        eq = equilibrium_table(rounds, by=keys)
        eq_cols = [c for c in eq.columns if c not in keys and not c.endswith(("_lo", "_hi"))]
        lines += ["## Equilibrium (mean of the last 5 rounds)", "", md_table(eq[[*keys, *eq_cols]])]
        x = "population.clients" if "population.clients" in keys else keys[0]
        if pd.api.types.is_numeric_dtype(eq[x]):
            lines += ["", f"### Response to `{x}`", "", md_table(response(eq, x=x)), ""]
    mech = _mechanism_key(keys)
    made = {
        "Test accuracy": figures.accuracy_curves(rounds, path=out / "accuracy.png", by=mech),
        "Participation": figures.participation_curves(
            rounds, path=out / "participation.png", by=mech
        ),
        "Reward and Σρ": figures.trajectories(rounds, path=out / "trajectories.png", by=mech),
        "ε spent (CDF)": figures.epsilon_cdf(sweep.clients, path=out / "epsilon_cdf.png", by=mech),
    }
    if len(keys) >= 2:
        for metric in ("final_accuracy", "participation_rate", "reward", "sum_rho"):
            made[f"Heatmap: {metric}"] = figures.heatmap(
                summary, x=keys[0], y=keys[1], value=metric, path=out / f"heatmap_{metric}.png"
            )
    lines += ["## Figures", "", *_figure_lines(made, out)]
    failed = runs[runs["status"] == "failed"]
    if len(failed):
        lines += ["## Failed runs", "", md_table(failed[["run_id", *keys, "message"]]), ""]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "report.md"


def run_report(run_dir: Path, out: Path, *, target: float) -> Path:
    run = load_run(run_dir)
    clients_n = run.scenario.get("population", {}).get(
        "clients", run.clients["client_id"].nunique()
    )
    rounds = run.rounds.assign(run_id=run.path.name, num_clients=clients_n)
    clients = run.clients.assign(run_id=run.path.name)
    m = run.manifest
    lines = [f"# Run report: {m.get('scenario')} / {run.path.name}", "", f"Folder: `{run.path}`"]
    lines += ["", f"Status: {run.status}; {m.get('rounds_completed')} rounds; seed {m.get('seed')}"]
    lines += [f"replicate {m.get('replicate')}; device {m.get('device')}.", ""]
    metrics = run_metrics(rounds, clients, target=target).drop(columns="run_id")
    lines += [
        "## Final metrics",
        "",
        md_table(metrics.T.reset_index().set_axis(["metric", "value"], axis=1)),
        "",
    ]
    made = {
        "Test accuracy": figures.accuracy_curves(rounds, path=out / "accuracy.png"),
        "Participation": figures.participation_curves(rounds, path=out / "participation.png"),
        "Reward and Σρ": figures.trajectories(rounds, path=out / "trajectories.png"),
        "ε spent (CDF)": figures.epsilon_cdf(clients, path=out / "epsilon_cdf.png"),
    }
    lines += ["## Figures", "", *_figure_lines(made, out)]
    (out / "report.md").write_text("\n".join(lines), encoding="utf-8")
    return out / "report.md"


def write_report(
    result_dir: str | Path, *, out: str | Path | None = None, target: float = 0.8
) -> Path:
    """Write ``report.md`` and its PNGs for the sweep or run at ``result_dir``; return its path."""
    root = Path(result_dir)
    sweep_dir: Path | None = None
    if not (root / "manifest.json").is_file():
        try:
            sweep_dir = find_sweep(root)
        except FedGameError:
            sweep_dir = None
    if sweep_dir is None and not find_runs(root):
        raise FedGameError(f"{root}: neither a run folder nor a sweep folder")
    folder = Path(out) if out else root / "report"
    folder.mkdir(parents=True, exist_ok=True)
    if sweep_dir is not None:
        return sweep_report(sweep_dir, folder, target=target)
    return run_report(root, folder, target=target)
