"""``fedgame report``: a self-contained Markdown report (``report.md`` + PNGs) for a run or sweep.

The report folder (default ``RESULT_DIR/report``) holds ``report.md`` and the figures it links
by relative path, so the folder can be moved or attached as it is. It names the mechanisms
(from the runs' resolved scenarios) and writes only the sections that apply: the reward,
cost and Σρ columns, the equilibrium section, its elasticities and the market figures need
an incentive other than ``none``; the economics section (:mod:`fedgame.analysis.economics`)
needs the ``econ_*`` columns, which every incentive that reports its outcome writes; the
mechanism section (:mod:`fedgame.analysis.mechanism`) the incentive family's own columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from fedgame.analysis import figures
from fedgame.analysis.economics import economics_section
from fedgame.analysis.equilibrium import equilibrium_table, response
from fedgame.analysis.load import find_runs, load_run
from fedgame.analysis.markdown import (
    column_notes,
    count_note,
    denoise,
    grid_text,
    incentive_kinds,
    md_table,
    mechanism_table,
    readable_keys,
    with_ci,
)
from fedgame.analysis.market import is_market, market_section
from fedgame.analysis.mechanism import mechanism_section
from fedgame.analysis.quantities import format_number, plural, quantity
from fedgame.analysis.summary import run_metrics, summarise
from fedgame.analysis.sweep import find_sweep, load_sweep
from fedgame.errors import FedGameError
from fedgame.run.store import atomic_write_text, make_folders

__all__ = ["md_table", "run_report", "sweep_report", "write_report"]

SUMMARY_METRICS = (
    "final_accuracy",
    "rounds_to_target",
    "participation_rate",
    "upload_rate",
    "final_epsilon_mean",
    "epsilon_p90",
    "total_reward",
    "server_cost",
    "reward",
    "sum_rho",
    "nash_gap_max",
)
#: metrics that only mean something when the leader offers a reward
INCENTIVE_METRICS = ("total_reward", "server_cost", "reward", "sum_rho", "nash_gap_max")
SUMMARY_NOTE = (
    "Each cell is the mean over the grid point's replicates with its 95% Student-t interval "
    "in brackets, clipped to the range the quantity can take; – marks no value. A value "
    "that fewer than the row's n runs stand behind says how many: `rounds_to_target` is "
    'the mean over the runs that reached the target ("2 of 4 reached"; the others are '
    "censored at the run's last round, and the interval is clipped to [1, rounds run]), "
    "`upload_rate` the share of clients whose update reached the server."
)
BAND_NOTE = (
    "Lines are means over the runs of each grid point; bands and brackets are 95% Student-t "
    "intervals over those runs, clipped to the range the quantity can take. A grid point "
    "with fewer than 3 runs has no band: each of its runs is drawn. Heatmap colours are "
    "anchored to the quantity's range (from 0 for one bounded below) and reach the outermost "
    "interval end; the title says when the cells differ by less than a typical interval."
)


def _has_incentive(scenarios: Sequence[Mapping[str, Any]], rounds: pd.DataFrame) -> bool:
    if scenarios:
        return incentive_kinds(scenarios) != {"none"}
    return "reward" in rounds and bool(rounds["reward"].fillna(0).ne(0).any())


def _mechanisms(scenarios: Sequence[Mapping[str, Any]]) -> list[str]:
    table = mechanism_table(scenarios)
    if table.empty:
        return []
    return ["## Mechanisms", "", md_table(table), ""]


def _degenerate(rounds: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """Per grid point: runs with degenerate play, the share of degenerate rounds and the kinds
    (rounds flagged by each); nothing when no round was degenerate."""
    if "degenerate" not in rounds or not rounds["degenerate"].fillna(False).astype(bool).any():
        return []
    flagged = rounds.assign(degenerate=rounds["degenerate"].fillna(False).astype(bool))
    rows = []
    groups = flagged.groupby(list(keys), sort=True, dropna=False) if keys else [((), flagged)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        runs = group.groupby("run_id")["degenerate"].any()
        reasons = group.loc[group["degenerate"], "degenerate_reason"].str.split(";").explode()
        kinds = reasons[reasons != ""].value_counts()
        rows.append(
            {
                **dict(zip(keys, key)),
                "runs": f"{int(runs.sum())} of {runs.size}",
                "rounds": f"{group['degenerate'].mean():.1%}",
                "kinds (rounds)": ", ".join(f"{k} ({n})" for k, n in kinds.items()) or "–",
            }
        )
    table = readable_keys(pd.DataFrame(rows), keys)
    note = (
        "Rounds the round check flagged (`degenerate`, `degenerate_reason` in the rounds table; "
        "`warnings` in each run's manifest): runs with any, the share of rounds, and the rounds "
        "per kind."
    )
    return ["## Degenerate play", "", note, "", md_table(table), ""]


def _figure_lines(made: dict[str, Path | None], out: Path) -> list[str]:
    return [
        f"### {title}\n\n![{title}]({path.relative_to(out).as_posix()})\n"
        for title, path in made.items()
        if path is not None
    ]


CONVERGENCE_NOTE = (
    "A run converges at the first round after which its normalised Nash gap (ex ante, against "
    "expected delivery, when recorded) stays at most 0.05 and R and Σρ are stationary (drift "
    "at most 10% plus noise); `converged` is the share of runs that did, `converged_round` "
    "their mean round, `stationary_round` the mean round from which R and Σρ alone were "
    "stationary (play that settled away from equilibrium has one but does not converge); "
    "values average the converged rounds of the converged runs (empty when none converged; "
    '"3 of 4 runs" where fewer than n converged). A leader that discounts the future '
    "raises R every round: such play converges when R and Σρ are stationary around R's "
    "geometric trend (`trend`, growth per round). `stretch_accuracy` is the test accuracy "
    "averaged over that stretch, `final_accuracy` the last round's (every run)."
)


def _equilibrium(rounds: pd.DataFrame, keys: Sequence[str]) -> list[str]:
    """Equilibrium values per grid point (each with the runs behind it), and the response to
    the population (or first key)."""
    eq = equilibrium_table(rounds, by=keys)
    eq = denoise(eq, [c for c in eq.columns if c not in keys])
    suffixes = ("_lo", "_hi", "_n", "_km_median")
    cols = [c for c in eq.columns if c not in (*keys, "n") and not c.endswith(suffixes)]
    table = readable_keys(eq[[*keys, "n"]], keys)
    for c in cols:
        scale = float(eq[c].abs().max()) if eq[c].notna().any() else 1.0
        counts = eq[f"{c}_n"] if f"{c}_n" in eq else eq["n"]
        table[c] = [
            format_number(float(v), scale=scale) + count_note(c, int(k), int(n))
            for v, k, n in zip(eq[c], counts, eq["n"])
        ]
    lines = ["## Equilibrium (mean over each run's converged stretch)", "", CONVERGENCE_NOTE, ""]
    lines += [md_table(table), ""]
    numeric = [k for k in keys if pd.api.types.is_numeric_dtype(eq[k]) and eq[k].nunique() >= 2]
    if numeric:
        x = "population.clients" if "population.clients" in numeric else numeric[0]
        lines += [f"### Response to `{x}` (slope and elasticity d ln y / d ln x)", ""]
        others = [k for k in keys if k != x]
        lines += [md_table(readable_keys(response(eq, x=x), others)), ""]
    return lines


def _heatmaps(
    summary: pd.DataFrame, keys: Sequence[str], metrics: Sequence[str], out: Path
) -> dict[str, Path | None]:
    x, y, rest = keys[0], keys[1], list(keys[2:])
    return {
        f"Heatmap: {quantity(m).name} ({x} × {y})": figures.heatmap(
            summary, x=x, y=y, value=m, by=rest, path=out / f"heatmap_{m}.png"
        )
        for m in metrics
    }


def sweep_report(sweep_dir: Path, out: Path, *, target: float) -> Path:
    """Write the report of the sweep at ``sweep_dir`` into ``out``; return report.md's path."""
    sweep = load_sweep(sweep_dir)
    keys, rounds, runs = sweep.keys, sweep.rounds, sweep.runs
    scenarios = list(sweep.scenarios.values())
    replicates = int(sweep.info.get("replicates", 1))
    grid = sweep.info.get("grid", {})
    lines = [f"# Sweep report: {sweep.info.get('name')}", "", f"Folder: `{sweep.path}`", ""]
    lines += [f"Grid: {grid_text(grid)}; {plural(replicates, 'replicate')} per grid point.", ""]
    counts = runs["status"].value_counts().to_dict()
    lines += ["Runs: " + ", ".join(f"{v} {k}" for k, v in counts.items()), ""]
    lines += _mechanisms(scenarios)
    if rounds.empty:
        atomic_write_text(out / "report.md", "\n".join([*lines, "No finished run yet.", ""]))
        return out / "report.md"
    if is_market(rounds):  # several competing servers: per-server results (fedgame.market)
        return _market_sweep_report(sweep, rounds, lines, out)
    incentive = _has_incentive(scenarios, rounds)
    summary = summarise(sweep, target=target)
    metrics = [
        m for m in SUMMARY_METRICS if m in summary and (incentive or m not in INCENTIVE_METRICS)
    ]
    lines += [f"## Summary per grid point (target accuracy {target})", "", SUMMARY_NOTE, ""]
    lines += [md_table(with_ci(summary, keys, metrics)), "", column_notes(metrics) + ".", ""]
    lines += _degenerate(rounds, keys)
    if keys and incentive:
        lines += _equilibrium(rounds, keys)
    made = {
        "Test accuracy": figures.accuracy_curves(rounds, path=out / "accuracy.png", by=keys),
        "Participation": figures.participation_curves(
            rounds, path=out / "participation.png", by=keys
        ),
        "ε spent (CDF)": figures.epsilon_cdf(sweep.clients, path=out / "epsilon_cdf.png", by=keys),
    }
    if incentive:
        made["Reward and Σρ"] = figures.trajectories(rounds, path=out / "trajectories.png", by=keys)
    if len(keys) >= 2:
        maps = [
            "final_accuracy",
            "participation_rate",
            *(["reward", "sum_rho"] if incentive else []),
        ]
        made |= _heatmaps(summary, keys, [m for m in maps if m in summary], out)
    lines += ["## Figures", "", BAND_NOTE, "", *_figure_lines(made, out)]
    lines += economics_section(rounds, out, by=keys)
    lines += mechanism_section(rounds, sweep.clients, out, by=keys)
    failed = runs[runs["status"] == "failed"]
    if len(failed):
        failed = readable_keys(failed[["run_id", *keys, "message"]], keys)
        lines += ["## Failed runs", "", md_table(failed), ""]
    atomic_write_text(out / "report.md", "\n".join(lines))
    return out / "report.md"


MARKET_SWEEP_NOTE = (
    "These are market runs (`servers:`; docs/competition.md): the rounds table has one row "
    "per round and server, so the one-server summary, equilibrium and curves, which would "
    "mix the servers' rows, are replaced by the per-server tables and curves below."
)


def _market_sweep_report(sweep: Any, rounds: pd.DataFrame, lines: list[str], out: Path) -> Path:
    """A sweep of market runs: the Market section (per server and grid point), the clients'
    ε spent, failed runs."""
    keys, runs = sweep.keys, sweep.runs
    lines = [*lines, MARKET_SWEEP_NOTE, "", *market_section(rounds, out, by=keys)]
    lines += _degenerate(rounds, keys)
    made = {
        "ε spent (CDF)": figures.epsilon_cdf(sweep.clients, path=out / "epsilon_cdf.png", by=keys)
    }
    lines += ["## Figures", "", BAND_NOTE, "", *_figure_lines(made, out)]
    failed = runs[runs["status"] == "failed"]
    if len(failed):
        failed = readable_keys(failed[["run_id", *keys, "message"]], keys)
        lines += ["## Failed runs", "", md_table(failed), ""]
    atomic_write_text(out / "report.md", "\n".join(lines))
    return out / "report.md"


def run_report(run_dir: Path, out: Path, *, target: float) -> Path:
    """Write the report of the newest run at ``run_dir`` into ``out``; return its path."""
    run = load_run(run_dir)
    if "server" in run.rounds.columns:  # several competing servers (fedgame.market)
        from fedgame.market.report import market_report

        return market_report(run, out)
    clients_n = run.scenario.get("population", {}).get(
        "clients", run.clients["client_id"].nunique()
    )
    rounds = run.rounds.assign(run_id=run.path.name, num_clients=clients_n)
    clients = run.clients.assign(run_id=run.path.name)
    scenarios = [run.scenario] if run.scenario else []
    incentive = _has_incentive(scenarios, rounds)
    m = run.manifest
    lines = [f"# Run report: {m.get('scenario')} / {run.path.name}", "", f"Folder: `{run.path}`"]
    rounds_done = plural(int(m.get("rounds_completed") or 0), "round")
    lines += [
        "",
        f"Status: {run.status}; {rounds_done}; seed {m.get('seed')}; "
        f"replicate {m.get('replicate')}; device {m.get('device')}.",
    ]
    warned = m.get("warnings") or {}
    if warned:
        kinds = ", ".join(
            f"{kind} from round {w.get('first_round')} ({plural(int(w.get('rounds', 0)), 'round')})"
            for kind, w in warned.items()
        )
        lines += ["", f"Degenerate play in {m.get('degenerate_rounds')} rounds: {kinds}."]
    lines += ["", *_mechanisms(scenarios)]
    metrics = run_metrics(rounds, clients, target=target).drop(columns="run_id")
    if not incentive:
        metrics = metrics.drop(columns=[c for c in INCENTIVE_METRICS if c in metrics])
    table = metrics.T.reset_index().set_axis(["metric", "value"], axis=1)
    table["value"] = table["value"].astype(float)
    table["measures"] = [quantity(c).label for c in table["metric"]]
    lines += [f"## Final metrics (target accuracy {target})", "", md_table(table), ""]
    made = {
        "Test accuracy": figures.accuracy_curves(rounds, path=out / "accuracy.png"),
        "Participation": figures.participation_curves(rounds, path=out / "participation.png"),
        "ε spent (CDF)": figures.epsilon_cdf(clients, path=out / "epsilon_cdf.png"),
    }
    if incentive:
        made["Reward and Σρ"] = figures.trajectories(rounds, path=out / "trajectories.png")
    lines += ["## Figures", "", *_figure_lines(made, out)]
    lines += economics_section(rounds, out)
    lines += mechanism_section(rounds, clients, out)
    atomic_write_text(out / "report.md", "\n".join(lines))
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
    folder = make_folders(out) if out else make_folders(root, "report")
    if sweep_dir is not None:
        return sweep_report(sweep_dir, folder, target=target)
    return run_report(root, folder, target=target)
