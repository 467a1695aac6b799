"""QI-DPFL grid (paper 003 §V): incentive × selection at each noise level λ, over seeds.

Cells: incentive ∈ {qi_dpfl, max, random, fixed} × selection ∈ {emd_threshold (lowest 75 % of
θ_h), all}, with best-responding clients and zCDP Gaussian noise, at every λ of ``--lam`` (the
server-cost weight that sets the rewards, hence the budgets ρ and the noise); plus FedAvg and
FedAvg-select (EMD selection) without DP. Scenario: scenarios/qi_dpfl.yaml (Fashion-MNIST
6k/2k, 20 clients, Dirichlet α = 1, logistic regression, 30 rounds) or, with ``--dataset
digits``, scenarios/qi_dpfl_digits.yaml. Accuracy = final test accuracy; server cost = Eq. 15
summed over the rounds (realised ρ); payments = rewards paid.

Paper setting (note 003 §6): EMNIST/CIFAR-10 (MNIST "similar"), IID and Dirichlet α = 1,
MNIST T = 30, π = 0.9429, lr 0.01, linear model; H, θ_th, λ, ν, batch size unreported.
"""

from __future__ import annotations

from typing import Any

import _shared

NAME = "qi_dpfl"
DEFAULTS = _shared.Defaults(seeds=5, rounds=30, quick_seeds=2, quick_rounds=5)
LAMS = "0.01,1"
EMD = {"kind": "emd_threshold", "quantile": 0.75, "reference": "population", "mode": "static"}
ALL = {"kind": "all"}
NO_DP = {"incentive": {"kind": "none"}, "policy": {"kind": "always"}, "privacy": {"kind": "none"}}
GAME_CELLS = {
    "QI-DPFL (qi_dpfl + emd)": ("qi_dpfl", EMD),
    "Max-select (max + emd)": ("max", EMD),
    "Random-select (random + emd)": ("random", EMD),
    "Fixed-select (fixed + emd)": ("fixed", EMD),
    "FedAvg-DP (qi_dpfl + all)": ("qi_dpfl", ALL),
    "Max (max + all)": ("max", ALL),
    "Random (random + all)": ("random", ALL),
    "Fixed (fixed + all)": ("fixed", ALL),
}
PLAIN_CELLS = {"FedAvg-select (emd, no DP)": EMD, "FedAvg (all, no DP)": ALL}
QI, MAX, RANDOM = (
    "QI-DPFL (qi_dpfl + emd)",
    "Max-select (max + emd)",
    "Random-select (random + emd)",
)
FEDAVG_DP, FEDAVG, SELECT = (
    "FedAvg-DP (qi_dpfl + all)",
    "FedAvg (all, no DP)",
    "FedAvg-select (emd, no DP)",
)

#: causes found by analysis/qi_dpfl_ablation.py (docs/qi_dpfl.md, "Why: one change at a time")
CLOSE_TO_MAX_WHY = (
    "the gap is the DP noise: σ_i² = 2C²/(ρ_i|D_i|²) ∝ λ/|D_i|, and at λ = 1 on the 6k subset "
    "the aggregated noise norm is about 3·C in round 1, which Max-select's 3× reward cuts by "
    "√3; in qi_dpfl_ablation.py QI ≈ Max-select wherever that norm stays below about C (λ ≤ "
    "0.1, or the full 60k set at λ = 1) and the gap grows with it (λ, T, H; the paper's lr "
    "0.01 shrinks the update instead); closest to the paper it holds to λ = 0.1, fails from 1"
)
SELECT_WHY = (
    "θ_h is the distance to the pooled label distribution, and with labels split per class "
    "the clients far from it hold most of some class: the kept 75 % hold about 77 % of the "
    "data but 57 % of the rarest class (qi_dpfl_ablation.py); no ablation row shows a gain "
    "(IID 0.0), stronger skew makes it worse (full set, α = 0.1: about −11 pts), and the "
    "paper's lr, θ_th = 50 % or uniform aggregation do not change it; Hsu et al.'s "
    "per-client Dir(α·p) split (equal sizes) does not either: the kept 75 % hold 35-38 % "
    "of the rarest class and selection costs −1.1 (α = 1) and −5.3 pts (α = 0.1), and −9.3 "
    "pts closest to the paper (60k, lr 0.01, α = 1: 23 % of the rarest class kept)"
)


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    p.add_argument("--lam", default=LAMS, help=f"comma-separated λ grid (default {LAMS})")
    p.add_argument("--partition", choices=["dirichlet", "iid"], default="dirichlet")
    p.add_argument("--alpha", type=float, default=1.0, help="Dirichlet α (default 1)")
    return p


def base_scenario(args: Any) -> dict[str, Any]:
    """The scenario file for ``--dataset`` with its dataset, partition and overrides set."""
    import yaml

    file = "qi_dpfl_digits.yaml" if args.dataset == "digits" else "qi_dpfl.yaml"
    d = yaml.safe_load((_shared.ROOT / "scenarios" / file).read_text())
    d.pop("sweep", None)
    if args.dataset != "digits":
        old = d["data"]["dataset"]
        d["data"]["dataset"] = _shared.dataset_spec(
            args, max_train=old.get("max_train"), max_test=old.get("max_test")
        )
    else:
        _shared.dataset_spec(args)
    partition = (
        {"kind": "iid"} if args.partition == "iid" else {"kind": "dirichlet", "alpha": args.alpha}
    )
    d["data"]["partition"] = partition
    d["rounds"] = args.rounds
    return d


def cell_scenario(base: dict[str, Any], cell: str, lam: float | None, seed: int) -> dict:
    d = {**base, "seed": seed}
    if cell in GAME_CELLS:
        kind, selection = GAME_CELLS[cell]
        d["incentive"] = {**base["incentive"], "kind": kind, "lam": lam}
    else:
        selection = PLAIN_CELLS[cell]
        d |= NO_DP
    d["selection"] = selection
    return d


#: a run's labels (jobs that share a scenario share its run, each with its own labels)
KEYS = ("lam", "cell", "seed")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Accuracy, server cost and payments of one (λ, cell, seed) run."""
    result = _shared.simulate(job["scenario"])
    r = result.rounds
    nan = float("nan")
    return {k: job[k] for k in KEYS} | {
        "accuracy": float(r["test_accuracy"].iloc[-1]),
        "server_cost": float(r["server_cost"].sum()) if "server_cost" in r else nan,
        "payments": float(r["payments_total"].sum()) if "payments_total" in r else nan,
        "uploaded_last": int(r["uploaded"].iloc[-1]),
        "status": result.manifest["status"],
    }


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    lams = [float(x) for x in args.lam.split(",")]
    base = base_scenario(args)
    jobs = [
        {"lam": lam, "cell": cell, "seed": seed}
        for lam in lams
        for cell in GAME_CELLS
        for seed in range(args.seeds)
    ]
    jobs += [{"lam": None, "cell": c, "seed": s} for c in PLAIN_CELLS for s in range(args.seeds)]
    for job in jobs:
        job["scenario"] = _shared.apply_sets(
            cell_scenario(base, job["cell"], job["lam"], job["seed"]), args.overrides
        )
    _shared.validate_all(j["scenario"] for j in jobs)
    print(
        f"{NAME}: data={base['data']['dataset']} partition={base['data']['partition']} "
        f"T={args.rounds} λ={lams} seeds={args.seeds}: {len(jobs)} runs",
        flush=True,
    )
    report = _shared.Report(NAME, args)
    report.rows = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=KEYS
    )
    summarise(report, lams)
    report.write()


def summarise(report: _shared.Report, lams: list[float]) -> None:
    """One table per λ and the paper's claims."""
    import pandas as pd

    from fedgame.analysis.stats import above, all_of, paired_difference, t_interval, within

    df = pd.DataFrame(report.rows).sort_values("seed")

    def values(cell: str, lam: float | None, col: str = "accuracy") -> list[float]:
        sel = df[(df.cell == cell) & ((df.lam == lam) if cell in GAME_CELLS else df.lam.isna())]
        scale = 100.0 if col == "accuracy" else 1.0
        return list(scale * sel[col])

    def fmt(cell: str, lam: float, col: str, digits: int) -> str:
        vals = values(cell, lam, col)
        return "–" if all(v != v for v in vals) else t_interval(vals).format(digits)

    for lam in lams:
        rows = [
            [
                cell,
                fmt(cell, lam, "accuracy", 2),
                fmt(cell, lam, "server_cost", 3),
                fmt(cell, lam, "payments", 2),
            ]
            for cell in [*GAME_CELLS, *PLAIN_CELLS]
        ]
        report.table(
            f"lam_{lam:g}",
            f"λ = {lam:g}: final accuracy %, server cost (Eq. 15, summed), payments; "
            "mean ± 95% CI over seeds",
            ["cell", "accuracy %", "server cost", "payments"],
            rows,
        )

    def diff(a: str, b: str, lam: float | None, col: str = "accuracy") -> Any:
        return paired_difference(values(a, lam, col), values(b, lam, col))

    costs = [
        (above(diff(RANDOM, QI, lam, "server_cost")), above(diff(MAX, RANDOM, lam, "server_cost")))
        for lam in lams
    ]
    report.claim(
        "cost_order",
        paper="003",
        claim="server cost QI-DPFL < Random-select < Max-select (true by construction: R* "
        "minimises Eq. 15)",
        paper_value="QI-DPFL lowest cost and reward (Figs. 3-6 c/d, no numbers)",
        measured="; ".join(
            f"λ={lam:g}: QI {fmt(QI, lam, 'server_cost', 3)}, Random "
            f"{fmt(RANDOM, lam, 'server_cost', 3)}, Max {fmt(MAX, lam, 'server_cost', 3)}"
            for lam in lams
        ),
        verdict=all_of(v for pair in costs for v in pair),
    )
    sel_gain = diff(SELECT, FEDAVG, None)
    for lam in lams:
        d = diff(QI, MAX, lam)
        report.claim(
            f"qi_close_to_max_lam_{lam:g}",
            paper="003",
            claim=f"QI-DPFL accuracy ≈ Max-select (within ±1 pt), λ = {lam:g}",
            paper_value="QI-DPFL on par with Max-select (Figs. 3-6 b, no numbers)",
            measured=f"QI − Max {d.format(2, seeds=True)} pts",
            verdict=within(d, 1.0),
            why_not=CLOSE_TO_MAX_WHY,
        )
        rivals = (QI, FEDAVG, SELECT)
        ds = [diff(r, FEDAVG_DP, lam) for r in rivals]
        report.claim(
            f"fedavg_dp_lowest_lam_{lam:g}",
            paper="003",
            claim=f"FedAvg-DP has the lowest accuracy (vs QI-DPFL, FedAvg, FedAvg-select), "
            f"λ = {lam:g}",
            paper_value="FedAvg-DP lowest (Figs. 3-6 a, no numbers)",
            measured="; ".join(
                f"{r.split(' (')[0]} − FedAvg-DP {x.format(2)}" for r, x in zip(rivals, ds)
            )
            + f" pts (n={report.args.seeds})",
            verdict=all_of(above(x) for x in ds),
            why_not={
                v: "QI-DPFL and FedAvg-DP carry the same noise (equal round-1 noise norms in "
                "qi_dpfl_ablation.py), so QI − FedAvg-DP is the selection effect, and EMD "
                f"selection gains nothing (FedAvg-select − FedAvg {sel_gain.format(2)} pts); "
                "no ablation row (λ, full data, IID, α, θ_th, lr, T, H, aggregation, closest "
                "to paper) puts QI-DPFL significantly above FedAvg-DP. DP costs FedAvg-DP "
                f"{ds[1].format(2)} pts against no-DP FedAvg"
                for v in ("no", "inconclusive")
            },
        )
    d = diff(SELECT, FEDAVG, None)
    report.claim(
        "select_vs_fedavg",
        paper="003",
        claim="FedAvg-select above FedAvg (EMD selection helps, no DP)",
        paper_value="FedAvg-select and QI-DPFL beat FedAvg (Figs. 3-6 a)",
        measured=f"select − FedAvg {d.format(2, seeds=True)} pts",
        verdict=above(d),
        why_not={v: SELECT_WHY for v in ("no", "inconclusive")},
    )


if __name__ == "__main__":
    _shared.main(main)
