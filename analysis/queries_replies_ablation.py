"""Where paper 002's accuracy peak in T sits, and why: one change at a time.

Each row runs ``analysis/queries_replies.py``'s Laplace T sweep (FedSGD-DPC, N = 10 two-class
clients, round robin, noise 2ξ1·n_i/(d_i·ε) sized for each client's reply count) on the same
seeds, plus the planner (``optimal_queries``) for its T*, and changes exactly ONE thing from
the row it names: from fedgame's default setting of that script (digits, ξ1 = 30, constant lr
0.05, b = 1, T up to 80) toward the paper's (MNIST, N = 10 × 6,000 two-digit clients,
ξ1 = 300, lr 0.05 "decaying gradually", T up to 500). The closest setting that fits two
cores is full Fashion-MNIST (60,000 training images: the paper's d_i = 6,000 per client and
its 784 inputs), run at ε = 1 with T up to 80 (one round costs about 1 s there) and, in a
second table (``closer``), at ε = 5 and 10 with T up to 160 on 3 seeds (``fm60k_eps``;
ε = 10 also up to 320, ``fm60k_eps10``), beside the paper's bias-free logistic regression
(``no_bias``). Each run is kept in
``OUT/runs`` (named after its scenario and the code), so a ``--rows`` run or a rerun reuses
the runs it shares.

Per row and ε: the best T (highest mean final test accuracy), every T not significantly
below it (paired t-interval over seeds), the planner's T* (mean ± 95% CI), the ratio T*/best
T, the paper's T* (Table I, MNIST), the Laplace scale per reply 2ξ1·n_i/(d_i·ε) at T* and at
the best T (n_i = b·T/N replies; the paper's T* give 0.22-0.24 at b = 1), the planner's
γ = 2λ/μ, and the verdict of the main script's claim
"accuracy peaks near T* (within ×2)". ``b5`` rows also give the paired gap between b = 5
and b = 1, each at its best T.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import _shared
import queries_replies as qr

NAME = "queries_replies_ablation"
DEFAULTS = _shared.Defaults(seeds=5, rounds=80, quick_seeds=2, quick_rounds=10)
#: paper 002 Table I (MNIST): T* by b and ε
PAPER_T_STAR = {1: qr.PAPER_T_STAR, 5: {1.0: 5, 5.0: 32, 10.0: 67}}
#: η_t = η0·γ/(t + γ) with γ = 3.16, the value Table I implies (note 002 §2 and §5.5)
PAPER_DECAY = 3.16

#: fedgame's default setting of analysis/queries_replies.py (its b = 1 rows)
BASE: dict[str, Any] = {
    "data": "digits",
    "clip": 30.0,
    "b": 1,
    "top": 80,
    "tau": None,
    "bias": True,
}
FM6K = BASE | {"data": 6000, "clip": 300.0}
FM60K = BASE | {"data": 60000, "clip": 300.0}
EPS = (1.0, 5.0, 10.0)


@dataclass(frozen=True)
class Row:
    """One ablation row: a setting, its ε values and most seeds (None: ``--seeds``)."""

    key: str
    change: str
    setting: dict[str, Any]
    eps: tuple[float, ...] = EPS
    seeds: int | None = None
    parent: str | None = None
    #: the generated table the row goes to (``ablation``, or ``closer``: the rows added to
    #: come closer to the paper's setting, tabled on their own)
    table: str = "ablation"


ROWS = (
    Row("base", "fedgame default (queries_replies.py, b = 1)", BASE),
    Row("t320", "T grid extended to 320", BASE | {"top": 320}, parent="base"),
    Row(
        "lr_decay",
        f"lr decay η0·γ/(t+γ), γ = {PAPER_DECAY:g} (note 002 §2)",
        BASE | {"top": 320, "tau": PAPER_DECAY},
        parent="t320",
    ),
    Row("b5", "b = 5", BASE | {"top": 320, "b": 5}, parent="t320"),
    Row(
        "fm6k",
        "Fashion-MNIST 6k subset (d_i = 600), ξ1 = 300",
        FM6K | {"top": 320},
        parent="t320",
    ),
    Row("fm6k_b5", "b = 5 (ε = 5, T ≤ 80)", FM6K | {"b": 5}, eps=(5.0,), parent="fm6k"),
    Row(
        "fm60k",
        "full Fashion-MNIST (d_i = 6,000, the paper's); ε = 1, T ≤ 80",
        FM60K,
        eps=(1.0,),
        parent="fm6k",
    ),
    Row(
        "no_bias",
        "logistic regression without bias (logits W x, as in the paper)",
        BASE | {"top": 320, "bias": False},
        parent="t320",
        table="closer",
    ),
    Row(
        "fm60k_eps",
        "ε = 5 and 10 at the paper's d_i = 6,000 (full Fashion-MNIST), T ≤ 160",
        FM60K | {"top": 160},
        eps=(5.0, 10.0),
        seeds=3,
        parent="fm60k",
        table="closer",
    ),
    Row(
        "fm60k_eps10",
        "T grid extended to 320 (ε = 10)",
        FM60K | {"top": 320},
        eps=(10.0,),
        seeds=3,
        parent="fm60k_eps",
        table="closer",
    ),
)
#: rows of ``--quick`` (a smoke run on the digits)
QUICK_ROWS = ["base", "b5", "fm6k", "no_bias"]
#: title of each generated table (a row names its table)
TITLES = {
    "ablation": "Accuracy peak in T against the planner's T*, one change at a time; final test "
    "accuracy % and T*, mean ± 95% CI over seeds",
    "closer": "Closer to the paper: the bias-free model, and ε = 5, 10 at d_i = 6,000; final "
    "test accuracy % and T*, mean ± 95% CI over seeds",
}


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    return _shared.add_rows_option(p, ROWS)


def data_of(setting: dict[str, Any], args: Any) -> dict[str, Any]:
    """The ``data.dataset`` block of a setting (digits under ``--quick``)."""
    if args.quick or setting["data"] == "digits":
        return {"kind": "digits"}
    train = None if setting["data"] == 60000 else setting["data"]
    return _shared.dataset_spec(args, max_train=train)


def ts_of(setting: dict[str, Any], args: Any) -> list[int]:
    """The row's T grid: queries_replies.py's grid up to the row's top (scaled by --rounds)."""
    top = args.rounds if args.quick else max(1, round(setting["top"] * args.rounds / 80))
    return qr.t_grid(top)


def seeds_of(row: Row, args: Any) -> int:
    """``--seeds``, capped at the row's own count (its runs are slow)."""
    return int(args.seeds if args.quick or row.seeds is None else min(row.seeds, args.seeds))


def cell_key(setting: dict[str, Any], eps: float, seed: int, t: int) -> tuple:
    """Runs of rows that differ only in their T grid are shared."""
    s = setting
    return (s["data"], s["clip"], s["b"], s["tau"], s["bias"], eps, seed, t)


def jobs_of(rows: list[Row], args: Any) -> list[dict[str, Any]]:
    """One job per distinct (setting, ε, seed, T); T = 0 builds the planner only."""
    import yaml

    base = yaml.safe_load((_shared.ROOT / "scenarios" / "queries_replies.yaml").read_text())
    jobs: dict[tuple, dict[str, Any]] = {}
    for row in rows:
        s = row.setting
        clip, b = s["clip"], s["b"]
        dataset = data_of(s, args)
        for eps in row.eps:
            for seed in range(seeds_of(row, args)):
                job = {"eps": eps, "b": b, "seed": seed, "dataset": dataset, "clip": clip}
                job["overrides"] = args.overrides
                for t in [0, *ts_of(s, args)]:
                    key = cell_key(s, eps, seed, t)
                    if key in jobs:
                        continue
                    sel = (
                        {"kind": "optimal_queries", "clip_l1": clip, "b": b}
                        if t == 0
                        else {"kind": "round_robin", "b": b}
                    )
                    d = qr.scenario(base, job, sel, t or 1000)
                    if s["tau"] is not None:
                        d["training"] = {**d["training"], "lr_decay_tau": s["tau"]}
                    if not s["bias"]:
                        d["model"] = {**d["model"], "bias": False}
                    jobs[key] = job | {"t": t, "key": key, "scenario": d}
    return list(jobs.values())


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """queries_replies.py's run (accuracy, or the planner's T*), kept under ``--out``/runs
    (an interrupted or a ``--rows`` run reuses it)."""
    return qr.run_one(job)


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    rows = _shared.pick_rows(ROWS, args.rows, quick=QUICK_ROWS if args.quick else None)
    jobs = jobs_of(rows, args)
    _shared.validate_all(j["scenario"] for j in jobs)
    print(f"{NAME}: {len(rows)} rows, {len(jobs)} runs", flush=True)
    report = _shared.Report(NAME, args)
    # the largest runs first, so a slow run shows early in the progress lines
    first = sorted(jobs, key=lambda job: str(job["key"][0]) != "60000")
    kept = _shared.run_kept(run_one, first, args.out, args.workers, fresh=args.fresh, tags=qr.KEYS)
    by_key = {job["key"]: result for job, result in zip(first, kept)}
    done = [by_key[j["key"]] | {"key": j["key"]} for j in jobs]
    report.rows = [{k: v for k, v in r.items() if k != "key"} | cells(r["key"]) for r in done]
    from fedgame.analysis.guarantee import epsilon_header

    eps_head = epsilon_header("ε", [j["scenario"]["privacy"] for j in jobs])
    summarise(report, rows, args, {r["key"]: r for r in done}, eps_head)
    report.write()


def cells(key: tuple) -> dict[str, Any]:
    """The setting columns of a run's key, for runs.csv."""
    names = ("data", "clip", "b", "lr_decay_tau", "bias", "eps", "seed", "t")
    return dict(zip(names, key, strict=True))


def describe(setting: dict[str, Any], args: Any) -> str:
    """Short text of a row's setting."""
    data = setting["data"]
    name = "digits" if args.quick or data == "digits" else f"{args.dataset} {data // 1000}k"
    lr = "constant" if setting["tau"] is None else f"decay γ {setting['tau']:g}"
    top = ts_of(setting, args)[-1]
    bias = "" if setting["bias"] else ", no bias"
    return f"{name}, ξ1 {setting['clip']:g}, b {setting['b']}, T ≤ {top}, lr {lr}{bias}"


def summarise(
    report: _shared.Report,
    rows: list[Row],
    args: Any,
    by_key: dict[tuple, dict[str, Any]],
    eps_head: str = "ε",
) -> None:
    """One table per row group (``TITLES``; a group with no row chosen is left out): one line
    per (row, ε)."""
    import math

    import numpy as np

    from fedgame.analysis.stats import paired_difference, t_interval

    def accs(s: dict[str, Any], eps: float, n: int, t: int) -> list[float]:
        return [100 * by_key[cell_key(s, eps, seed, t)]["accuracy"] for seed in range(n)]

    def plans(s: dict[str, Any], eps: float, n: int) -> list[dict[str, Any]]:
        return [by_key[cell_key(s, eps, seed, 0)] for seed in range(n)]

    named = {r.key: r for r in rows}  # the parent's runs exist only if it ran too
    out: dict[str, list[list[Any]]] = {}
    for row in rows:
        s, n, ts = row.setting, seeds_of(row, args), ts_of(row.setting, args)
        for eps in row.eps:
            by_t = {t: accs(s, eps, n, t) for t in ts}
            best, region = qr.peak_region(by_t)
            planned = plans(s, eps, n)
            star = t_interval([p["t_star"] for p in planned])
            size = float(np.mean([p["client_size"] for p in planned]))
            per_t = 2 * s["clip"] * s["b"] / 10 / (size * eps)  # 2ξ1·n_i/(d_i·ε), n_i = b·T/N
            gamma = float(np.nanmean([p["gamma"] for p in planned]))
            gap = "—"
            parent = named.get(row.parent or "")
            if s["b"] != 1 and parent is not None and parent.setting["b"] == 1:
                pts = parent.setting
                other = {t: accs(pts, eps, n, t) for t in ts_of(pts, args)}
                pbest = qr.peak_region(other)[0]
                gap = paired_difference(by_t[best], other[pbest]).format()
            out.setdefault(row.table, []).append(
                [
                    row.key,
                    row.change + (f" (from {row.parent})" if row.parent else ""),
                    describe(s, args),
                    f"{eps:g}",
                    n,
                    t_interval(by_t[best]).format(),
                    best,
                    ", ".join(map(str, region)),
                    t_interval(by_t[ts[-1]]).format(),
                    star.format(),
                    f"{star.mean / best:.2f}" if math.isfinite(star.mean) else "—",
                    PAPER_T_STAR.get(s["b"], {}).get(eps, "—"),
                    f"{per_t * star.mean:.2f}",
                    f"{per_t * best:.2f}",
                    f"{gamma:.0f}",
                    qr.peak_verdict(best, region, ts, star.mean),
                    gap,
                ]
            )
    header = [
        "row",
        "change (one at a time, from)",
        "setting (data, ξ1, b, T grid, lr)",
        eps_head,
        "seeds",
        "acc. at best T %",
        "best T",
        "T not sig. below best",
        "acc. at largest T %",
        "planner T*",
        "T* / best T",
        "paper T* (MNIST)",
        "Laplace scale at T*",
        "Laplace scale at best T",
        "γ = 2λ/μ",
        "peak near T* (×2)?",
        "b = 5 − b = 1 (each at best T), pts",
    ]
    for key, title in TITLES.items():
        if key in out:
            report.table(key, title, header, out[key])


if __name__ == "__main__":
    _shared.main(main)
