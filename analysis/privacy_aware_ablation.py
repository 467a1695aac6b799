"""Why privacy-aware selection (paper 001) gains less than the paper: one change at a time.

Two parts. (1) Problem 1 alone, no training: for the populations of fedgame's default setting
(N = 50, 10k Fashion-MNIST, B = 64, s = 30) and of the closest setting, the selection gap
||p^s - p^u||_1 and the clients moved up/down over a grid of eta*D, and eta*D* below which
p^s = p^u exactly. From the KKT conditions at p = p^u (a = 0, R = sqrt(sum c_k p_k^2)),
p^u is optimal iff some theta has |theta - c_k p^u_k / R| <= 1 for every k, i.e.

    eta*D <= eta*D* = 4 sum_k V_k (p^u_k)^2 / (max_k V_k p^u_k - min_k V_k p^u_k)^2.

(2) Training: privacy-aware minus unbiased accuracy (points, paired per seed, mean of the
last 5 rounds) for eps ~ U(0, 1) and Fig. 6 case 2, at fedgame's default setting of
``analysis/privacy_aware.py``, at the closest setting that fits 2 CPU cores, and with one
difference changed at a time: eta*D, N, B, the training set, the model, s, T. The MLP (one
hidden layer of 32, 25,450 parameters, about the paper's 26,010-parameter CNN) is the
slowest one-change row; ``--no-mlp`` leaves it out. A second table (``models``) runs the
closest setting with the paper's model family: the MLP (``closest_mlp``) and a CNN of 16 and
32 channels of 5 x 5 (``closest_cnn``, 28,938 parameters, about 10 s a round on one loaded
core).

Paper setting (note 001 §6): N probably 100, 10 draws per round, B = 128, full (F-)MNIST,
26k-parameter CNN, s in {0, 30, 70, 100}; T^g, T^l, lr, C and eta not reported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import _shared

NAME = "privacy_aware_ablation"
DEFAULTS = _shared.Defaults(seeds=5, rounds=40, quick_seeds=2, quick_rounds=5)
U01, CASE2 = "eps ~ U(0, 1)", "Fig. 6 case 2"
#: fedgame's default setting of analysis/privacy_aware.py, and the closest to the paper's
DEFAULT = {"clients": 50, "train": 10000, "batch": 64, "model": "logreg", "s": 30, "eta_d": 1e4}
CLOSEST = DEFAULT | {"clients": 100, "train": 60000, "batch": 128, "eta_d": 1e6}
QUICK_CLIENTS = {50: 12, 100: 24}
MLP = ["model.kind=mlp", "model.hidden=[32]"]
#: a same-padded CNN of about the paper's size (16 and 32 channels of 5 x 5, 28,938 parameters
#: on 28 x 28 inputs; the paper's Tramer-Boneh CNN: 26,010)
CNN = ["model.kind=cnn", "model.channels=[16, 32]", "model.kernel_size=5"]
CNN_LABEL = "CNN 16-32 (5 × 5, 28,938 parameters)"
CLOSEST_MLP = CLOSEST | {"model": "mlp"}
CLOSEST_CNN = CLOSEST | {"model": "cnn"}
RUNS_PER_PROCESS = 4
ETA_GRID = (1e2, 1e3, 1e4, 3e4, 1e5, 3e5, 1e6, 1e8)


@dataclass(frozen=True)
class Row:
    """One row of a training table: ``--rows`` key, label, budget law, seed kind ("headline":
    ``--seeds``; "ablation": ``--ablation-seeds``), setting, and the table it belongs to."""

    key: str
    label: str
    budget: str
    kind: str
    setting: dict[str, Any]
    table: str = "ablation"


def all_rows() -> list[Row]:
    """Every row of the training tables, in table order."""
    d = DEFAULT
    one = [
        ("eta_1e2", "ηD 1e4 → 1e2", d | {"eta_d": 1e2}),
        ("eta_1e6", "ηD 1e4 → 1e6", d | {"eta_d": 1e6}),
        ("n100", "N 50 → 100", d | {"clients": 100}),
        ("b128", "B 64 → 128", d | {"batch": 128}),
        ("train60k", "train 10k → 60k (full)", d | {"train": 60000}),
        ("mlp", "model logreg → MLP 784-32-10", d | {"model": "mlp"}),
        *((f"s{s}", f"s 30 → {s}", d | {"s": s}) for s in (0, 70, 100)),
        ("t100", "T × 2.5 (40 → 100 rounds)", d | {"rounds_factor": 2.5}),
    ]
    default = "fedgame default (N 50, B 64, 10k, logreg, s 30, ηD 1e4, T 40)"
    out = [Row("default", default, U01, "headline", d)]
    out += [Row(key, label, U01, "ablation", setting) for key, label, setting in one]
    out.append(
        Row(
            "closest", "closest (N 100, B 128, 60k, logreg, s 30, ηD 1e6)", U01, "headline", CLOSEST
        )
    )
    out += [
        Row("case2", "fedgame default, ηD 1e4", CASE2, "ablation", d),
        Row("case2_eta_1e5", "ηD 1e4 → 1e5", CASE2, "ablation", d | {"eta_d": 1e5}),
        Row("case2_eta_1e6", "ηD 1e4 → 1e6", CASE2, "ablation", d | {"eta_d": 1e6}),
    ]
    closest = "closest (N 100, B 128, 60k, s 30, ηD 1e6)"
    out += [
        Row("closest_mlp", f"{closest}, MLP 784-32-10", U01, "ablation", CLOSEST_MLP, "models"),
        Row(
            "closest_cnn",
            f"{closest}, {CNN_LABEL}",
            U01,
            "ablation",
            CLOSEST_CNN,
            "models",
        ),
    ]
    return out


def rows(*, mlp: bool, similarity: bool, chosen: str | None = None) -> list[Row]:
    """The rows to run: ``--rows``' keys (else every row), less the MLP/CNN rows
    (``--no-mlp``) and the s rows (``--no-s``) when asked."""
    picked = _shared.pick_rows(all_rows(), chosen, quick=None)
    return [
        r
        for r in picked
        if (mlp or r.setting["model"] == "logreg") and (similarity or r.setting["s"] == 30)
    ]


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    p.add_argument(
        "--ablation-seeds",
        type=int,
        default=3,
        help="seeds of the one-change rows (default 3; --seeds sets the headline rows)",
    )
    p.add_argument("--no-mlp", action="store_true", help="leave out the (slow) MLP and CNN rows")
    p.add_argument("--no-s", action="store_true", help="leave out the s = 0, 70, 100 rows")
    return _shared.add_rows_option(p, all_rows())


def scenario_of(
    base: dict, args: Any, setting: dict[str, Any], budget: str, variant: str, seed: int
) -> dict[str, Any]:
    """The scenario of one cell: ``analysis/privacy_aware.py``'s, with ``setting`` applied."""
    import privacy_aware as main_script

    clients = QUICK_CLIENTS[setting["clients"]] if args.quick else setting["clients"]
    k = 4 if args.quick else 10
    dataset = _shared.dataset_spec(args, max_train=setting["train"], max_test=2000)
    overrides = [f"training.batch_size={setting['batch']}"]
    if variant == "privacy-aware":
        overrides.append(f"selection.batch_size={setting['batch']}")
    overrides += {"logreg": [], "mlp": MLP, "cnn": CNN}[setting["model"]]
    job = {
        "seed": seed,
        "rounds": round(args.rounds * setting.get("rounds_factor", 1)),
        "budget": budget,
        "clients": clients,
        "similarity": float(setting["s"]),
        "dataset": dataset,
        "variant": variant,
        "k": k,
        "eta_d": setting["eta_d"],
        "overrides": [*overrides, *args.overrides],
    }
    return main_script.scenario(base, job)


def dead_zone_limit(pu: Any, v: Any) -> float:
    """eta*D* = 4 sum V p^2 / (max V p - min V p)^2: p^s = p^u iff eta*D <= eta*D*."""
    import numpy as np

    vp = np.asarray(v) * np.asarray(pu)
    spread = float(vp.max() - vp.min())
    return float("inf") if spread == 0 else 4.0 * float(np.sum(vp * pu)) / spread**2


def population(data: dict[str, Any]) -> tuple[Any, Any]:
    """(p^u, V_k) of a scenario's drawn population (data, partition and budgets; no training)."""
    import numpy as np

    from fedgame.game import privacy_aware as pa
    from fedgame.scenario.build import build_world
    from fedgame.scenario.load import validate
    from fedgame.seeding import SeedPlan

    sc = validate(data)
    world = build_world(sc, plan=SeedPlan(sc.seed, 0))
    sizes = world.population["dataset_size"].astype(float)
    batch = sc.config("selection").batch_size or sc.training.batch_size  # unset: the learner's
    v = pa.noise_factors(
        epsilons=world.population["epsilon_total"],
        deltas=world.population["delta"],
        sample_rates=np.minimum(1.0, batch / sizes),
        sizes=sizes,
    )
    return pa.unbiased_probabilities(sizes), v


def solver_table(report: _shared.Report, base: dict, args: Any) -> None:
    """Problem 1 over the eta*D grid: gap, clients up/down, and eta*D*, per population."""
    import numpy as np

    from fedgame.game import privacy_aware as pa

    columns = [
        (U01, DEFAULT, "U(0, 1), default"),
        (CASE2, DEFAULT, "case 2, default"),
        (CASE2, CLOSEST, "case 2, closest"),
    ]
    pops = {
        label: [
            population(scenario_of(base, args, s, b, "privacy-aware", seed))
            for seed in range(args.seeds)
        ]
        for b, s, label in columns
    }
    table = []
    for eta_d in ETA_GRID:
        cells = []
        for _, _, label in columns:
            gaps, up, down, noise = [], [], [], []
            for pu, v in pops[label]:
                p = pa.selection_probabilities(sizes=pu, v=v, eta_d=eta_d)
                d = p - pu
                gaps.append(np.abs(d).sum())
                up.append(int((d > 1e-9).sum()))
                down.append(int((d < -1e-9).sum()))
                noise.append(np.sum(v * p * p) / np.sum(v * pu * pu))
            cells.append(
                f"{np.mean(gaps):.3f}, noise × {np.mean(noise):.2g} "
                f"(↑{np.mean(up):.0f} ↓{np.mean(down):.0f})"
            )
        table.append([f"{eta_d:.0e}", *cells])
    limits = [[dead_zone_limit(pu, v) for pu, v in pops[label]] for _, _, label in columns]
    table.append(["ηD* (p^s = p^u up to)", *(f"{min(x):.2g} – {max(x):.2g}" for x in limits)])
    checks = []
    for (_, _, label), lims in zip(columns, limits):
        for (pu, v), lim in zip(pops[label], lims):
            below = pa.selection_probabilities(sizes=pu, v=v, eta_d=0.99 * lim)
            above = pa.selection_probabilities(sizes=pu, v=v, eta_d=1.01 * lim)
            checks.append((np.abs(below - pu).sum(), np.abs(above - pu).sum()))
    worst_below = max(c[0] for c in checks)
    least_above = min(c[1] for c in checks)
    table.append(
        [
            "check: gap at 0.99 ηD* / at 1.01 ηD*",
            f"max {worst_below:.1e} / min {least_above:.1e}",
            "",
            "",
        ]
    )
    n = len(pops[columns[0][2]])
    report.table(
        "solver",
        f"Problem 1 alone, means over {n} seeds' populations: selection gap ||p^s − p^u||_1, "
        "aggregate DP noise sum p_k^2 V_k relative to p^u's (Eq. 40), clients moved up/down",
        ["ηD", *(label for _, _, label in columns)],
        table,
    )


def _cost(job: dict[str, Any]) -> tuple[bool, bool, int, bool]:
    """Cheap runs first (logreg, s = 30, small N, the first three seeds): an interrupted run
    keeps the most rows (``--no-mlp``/``--no-s`` then table what it has)."""
    data = job["scenario"]
    s_row = data["data"]["partition"]["s"] != 30
    return (
        data["model"]["kind"] != "logreg",
        s_row,
        data["population"]["clients"],
        data["seed"] >= 3,
    )


def run_fresh(fn: Callable[[Any], Any], jobs: Sequence[Any], workers: int) -> list[Any]:
    """``[fn(job) for job in jobs]`` in spawned processes, each replaced after a few runs (a
    long series of runs in one process grew past the machine's memory); the runner of
    ``_shared.run_kept`` here."""
    import multiprocessing
    import time

    start = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    results = []
    with ctx.Pool(
        workers, initializer=_shared.init_worker, maxtasksperchild=RUNS_PER_PROCESS
    ) as pool:
        for i, result in enumerate(pool.imap(fn, jobs)):
            results.append(result)
            took = time.perf_counter() - start
            print(f"{i + 1}/{len(jobs)} runs, {took:.0f} s", flush=True)
    return results


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Accuracy (mean of the last 5 rounds) of one scenario."""
    import time

    from fedgame.analysis.totals import round_mean

    start = time.perf_counter()
    result = _shared.simulate(job["scenario"])
    return {
        "accuracy": round_mean(result.rounds["test_accuracy"].iloc[-5:]).value,
        "status": result.manifest["status"],
        "seconds": round(time.perf_counter() - start, 1),
    }


def main() -> None:
    import yaml

    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    base = yaml.safe_load((_shared.ROOT / "scenarios" / "privacy_aware.yaml").read_text())
    report = _shared.Report(NAME, args)
    solver_table(report, base, args)
    ablation = min(args.ablation_seeds, args.seeds)
    plan: list[dict[str, Any]] = []
    unique: dict[str, dict[str, Any]] = {}  # identical scenarios (unbiased at any ηD) run once
    chosen = rows(mlp=not args.no_mlp, similarity=not args.no_s, chosen=args.rows)
    for row in chosen:
        seeds = args.seeds if row.kind == "headline" else ablation
        cell = {"label": row.label, "budget": row.budget, "seeds": seeds, "keys": {}}
        cell["table"] = row.table
        for variant in ("privacy-aware", "unbiased"):
            for seed in range(seeds):
                data = scenario_of(base, args, row.setting, row.budget, variant, seed)
                key = json.dumps(data, sort_keys=True)
                unique.setdefault(key, {"key": key, "scenario": data})
                cell["keys"][(variant, seed)] = key
        plan.append(cell)
    jobs = sorted(unique.values(), key=_cost)
    _shared.validate_all(j["scenario"] for j in jobs)
    print(f"{NAME}: {len(plan)} rows, {len(jobs)} distinct runs, T={args.rounds}", flush=True)
    # --quick's seconds-long runs: one process, no start-up cost per run
    runner = _shared.run_jobs if args.quick else run_fresh
    results = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, runner=runner
    )
    by_key = {j["key"]: r for j, r in zip(jobs, results)}
    summarise(report, plan, by_key)
    report.rows = [
        {"row": c["label"], "budget": c["budget"], "variant": variant, "seed": seed}
        | {k: by_key[key].get(k) for k in ("accuracy", "status", "seconds")}
        for c in plan
        for (variant, seed), key in c["keys"].items()
    ]
    report.write()


def _interval(values: list[float]) -> str:
    from fedgame.analysis.stats import t_interval

    return t_interval(values).format()


TITLES = {
    "ablation": "Privacy-aware − unbiased accuracy (pts, mean of the last 5 rounds), paired per "
    "seed, mean ± 95% CI; each one-change row changes one thing from fedgame's default",
    "models": "The closest setting with the paper's model family: privacy-aware − unbiased "
    "accuracy (pts, mean of the last 5 rounds), paired per seed, mean ± 95% CI",
}


def summarise(report: _shared.Report, plan: list[dict[str, Any]], by_key: dict) -> None:
    """One table per row group (``ablation``, ``models``; a group with no row chosen is left
    out): privacy-aware − unbiased accuracy (pts), paired per seed, and the mean wall time of
    one run."""
    from fedgame.analysis.stats import paired_difference

    for key, title in TITLES.items():
        table = []
        for cell in (c for c in plan if c["table"] == key):
            pa_acc, u_acc = (
                [100 * by_key[cell["keys"][(v, s)]]["accuracy"] for s in range(cell["seeds"])]
                for v in ("privacy-aware", "unbiased")
            )
            same = " (identical on every seed)" if pa_acc == u_acc else ""
            gain = paired_difference(pa_acc, u_acc).format() + same
            row = [cell["budget"], cell["label"], cell["seeds"], *map(_interval, (pa_acc, u_acc))]
            table.append([*row, gain])
        if table:
            header = ["budgets", "setting", "seeds", "privacy-aware %", "unbiased %"]
            report.table(key, title, [*header, "privacy-aware − unbiased, pts"], table)


if __name__ == "__main__":
    _shared.main(main)
