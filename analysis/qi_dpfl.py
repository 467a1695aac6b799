"""QI-DPFL grid (paper 003 §V): incentive × selection at each noise level λ, over seeds.

Cells: incentive ∈ {qi_dpfl, max, random, fixed} × selection ∈ {emd_threshold (lowest 75 % of
θ_h), all}, with best-responding clients and zCDP Gaussian noise, at every λ of ``--lam`` (the
server-cost weight that sets the rewards, hence the budgets ρ and the noise); plus FedAvg and
FedAvg-select (EMD selection) without DP. Scenario: scenarios/qi_dpfl.yaml (Fashion-MNIST
6k/2k, 20 clients, Dirichlet α = 1, logistic regression, 30 rounds) or, with ``--dataset
digits``, scenarios/qi_dpfl_digits.yaml. Accuracy = final test accuracy; server cost = Eq. 15
summed over the rounds (realised ρ); payments = rewards paid.

A round in which no client delivered a budget (Σρ = 0: e.g. every selected client has spent
its ε budget of 100 and declines) has no Eq. 15 cost (its accuracy term Σ 1/(ρ_i|D_i|²) does
not exist): such a run's total cost is refused (n/a, counted per cell), never a sum over the
other rounds; its payments are 0 in that round (nobody is paid), counted as such. The cost
ordering compares the three arms of a seed over the same rounds: those in which every one of
them had an upload.

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


#: the settings reproduce.py reruns the claims on besides the default (other seeds; a
#: stronger label skew on other seeds again)
HOLDOUTS = (
    _shared.Holdout("seeds", "other seeds", ("--first-seed", "12345")),
    _shared.Holdout("alpha", "Dirichlet α = 0.3", ("--alpha", "0.3", "--first-seed", "777")),
)
#: the tolerance of "QI-DPFL ≈ Max-select" and "≈ FedAvg-select", in points
TOLERANCE = 1.0


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    _shared.add_first_seed(p)
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
    """Accuracy, server cost (total and per round) and payments of one (λ, cell, seed) run.

    ``server_cost`` is refused (NaN) when a round has none (no delivered budget); the
    per-round costs are kept (``cost_by_round``) so that arms can be compared over the same
    rounds. Payments are 0 in a round without deliveries (nobody is paid).
    """
    from fedgame.analysis.totals import first_missing_round, round_total

    result = _shared.simulate(job["scenario"])
    r = result.rounds.sort_values("round")
    nan = float("nan")
    game = "server_cost" in r
    cost = round_total(r["server_cost"]) if game else None
    no_upload = r["uploaded"].to_numpy() == 0
    return {k: job[k] for k in KEYS} | {
        "accuracy": float(r["test_accuracy"].iloc[-1]),
        "server_cost": cost.value if cost else nan,
        "cost_rounds_missing": cost.missing if cost else 0,
        "first_round_without_cost": first_missing_round(r["server_cost"]) if game else None,
        "cost_by_round": [float(x) for x in r["server_cost"]] if game else [],
        "payments": round_total(r["payments_total"]).value if "payments_total" in r else nan,
        "rounds_without_upload": int(no_upload.sum()),
        "budget_withdrawn": int(r["withdrawn_budget"].sum()),
        "uploaded_last": int(r["uploaded"].iloc[-1]),
        "status": result.manifest["status"],
    }


def setting(args: Any, base: dict[str, Any]) -> str:
    """The claims' setting in words (besides the seeds)."""
    data = base["data"]["dataset"]
    size = f" {data['max_train']}/{data['max_test']}" if data.get("max_train") else ""
    part = base["data"]["partition"]
    split = "IID" if part["kind"] == "iid" else f"Dirichlet α = {part['alpha']:g}"
    return f"{data['kind']}{size}, {split}, 20 clients, T = {args.rounds}, ε budget 100"


def epsilon_kind(privacy: dict[str, Any]) -> str:
    from fedgame.analysis.guarantee import epsilon_kind as kind

    return kind(privacy)


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    lams = [float(x) for x in args.lam.split(",")]
    base = base_scenario(args)
    jobs = [
        {"lam": lam, "cell": cell, "seed": seed}
        for lam in lams
        for cell in GAME_CELLS
        for seed in _shared.seed_list(args)
    ]
    jobs += [
        {"lam": None, "cell": c, "seed": s} for c in PLAIN_CELLS for s in _shared.seed_list(args)
    ]
    for job in jobs:
        job["scenario"] = _shared.apply_sets(
            cell_scenario(base, job["cell"], job["lam"], job["seed"]), args.overrides
        )
    _shared.validate_all(j["scenario"] for j in jobs)
    print(
        f"{NAME}: data={base['data']['dataset']} partition={base['data']['partition']} "
        f"T={args.rounds} λ={lams} {_shared.seeds_text(args)}: {len(jobs)} runs",
        flush=True,
    )
    report = _shared.Report(NAME, args, holdouts=HOLDOUTS)
    report.setting = setting(args, base)
    report.rows = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=KEYS
    )
    summarise(report, lams, epsilon_kind(base["privacy"]))
    report.write()


def summarise(report: _shared.Report, lams: list[float], dp_kind: str) -> None:
    """One table per λ and the paper's claims (rules: ``fedgame.analysis.stats.Rule``)."""
    import numpy as np
    import pandas as pd

    from fedgame.analysis.stats import Rule, all_of, paired_difference, t_interval

    df = pd.DataFrame(report.rows).sort_values("seed")
    n = report.args.seeds

    def sel(cell: str, lam: float | None) -> Any:
        return df[(df.cell == cell) & ((df.lam == lam) if cell in GAME_CELLS else df.lam.isna())]

    def values(cell: str, lam: float | None, col: str = "accuracy") -> list[float]:
        scale = 100.0 if col == "accuracy" else 1.0
        return list(scale * sel(cell, lam)[col])

    def fmt(cell: str, lam: float | None, col: str, digits: int) -> str:
        vals = values(cell, lam, col)
        if all(v != v for v in vals) and cell in PLAIN_CELLS:
            return "–"
        refused = sum(v != v for v in vals)
        if refused:  # a total with an undefined round: refused, never the other rounds' sum
            return f"n/a (refused on {refused} of {len(vals)} seeds)"
        return t_interval(vals).format(digits)

    def no_upload(cell: str, lam: float | None) -> str:
        rounds = sel(cell, lam)["rounds_without_upload"].to_numpy()
        hit = int((rounds > 0).sum())
        return f"{rounds.mean():.1f} ({hit} of {rounds.size} seeds)" if hit else "0"

    for lam in lams:
        rows = [
            [
                cell,
                fmt(cell, lam, "accuracy", 2),
                fmt(cell, lam, "server_cost", 3),
                fmt(cell, lam, "payments", 2),
                no_upload(cell, lam),
            ]
            for cell in [*GAME_CELLS, *PLAIN_CELLS]
        ]
        report.table(
            f"lam_{lam:g}",
            f"λ = {lam:g}: final accuracy %, server cost (Eq. 15, summed), payments; "
            "mean ± 95% CI over seeds",
            [
                f"cell (DP: {dp_kind})",
                "accuracy %",
                "server cost (Eq. 15 summed; n/a if a round had no upload)",
                "payments (0 in a round without uploads)",
                "rounds without upload",
            ],
            rows,
        )

    def diff(a: str, b: str, lam: float | None, col: str = "accuracy") -> Any:
        return paired_difference(values(a, lam, col), values(b, lam, col))

    def common_costs(lam: float, arms: tuple[str, ...]) -> tuple[dict[str, list[float]], int]:
        """Each arm's cost per seed over the rounds every arm had an upload, and the fewest
        such rounds over the seeds."""
        by_arm = {a: sel(a, lam).set_index("seed")["cost_by_round"] for a in arms}
        out: dict[str, list[float]] = {a: [] for a in arms}
        fewest = report.args.rounds
        for seed in by_arm[arms[0]].index:
            costs = np.array([by_arm[a][seed] for a in arms], dtype=float)
            ok = np.all(np.isfinite(costs), axis=0)
            fewest = min(fewest, int(ok.sum()))
            for a, row in zip(arms, costs):
                out[a].append(float(row[ok].sum()))
        return out, fewest

    above0 = Rule("above", 0.0)
    cost_rule = Rule(
        "order",
        custom="yes when Random − QI and Max − Random both have 95% paired t-intervals (over "
        "seeds) wholly above 0 at every λ, each seed's three costs summed over the same "
        "rounds (those in which all three arms had an upload: Eq. 15 is undefined in a round "
        "without one); no if an interval lies wholly below 0; else inconclusive",
    )
    cost_parts, cost_verdicts = [], []
    for lam in lams:
        costs, fewest = common_costs(lam, (QI, RANDOM, MAX))
        d1 = paired_difference(costs[RANDOM], costs[QI])
        d2 = paired_difference(costs[MAX], costs[RANDOM])
        cost_verdicts += [above0.verdict(d1), above0.verdict(d2)]
        span = (
            f" (over the fewest common rounds: {fewest} of {report.args.rounds})"
            if fewest < report.args.rounds
            else ""
        )
        cost_parts.append(
            f"λ={lam:g}: Random − QI {d1.format(3)}, Max − Random {d2.format(3)}{span}"
        )
    exhausted = {
        lam: sorted(
            {c.split(" (")[0] for c in GAME_CELLS if (sel(c, lam).rounds_without_upload > 0).any()}
        )
        for lam in lams
    }
    exhaust_text = "; ".join(
        f"λ = {lam:g}: {', '.join(cells)} had rounds without any upload (budgets spent)"
        for lam, cells in exhausted.items()
        if cells
    )
    report.claim(
        "cost_order",
        paper="003",
        claim="server cost QI-DPFL < Random-select < Max-select (by construction where every "
        "arm plays: R* minimises Eq. 15)",
        paper_value="QI-DPFL lowest cost and reward (Figs. 3-6 c/d, no numbers)",
        measured="; ".join(cost_parts) + f" (n={n})",
        verdict=all_of(cost_verdicts),
        rule=cost_rule,
        why_not={
            v: "the ordering is not significant on the rounds every arm played"
            for v in ("no", "inconclusive")
        },
        caveat=exhaust_text,
    )
    pay_verdicts, pay_parts = [], []
    for lam in lams:
        d1, d2 = diff(RANDOM, QI, lam, "payments"), diff(MAX, RANDOM, lam, "payments")
        pay_verdicts += [above0.verdict(d1), above0.verdict(d2)]
        pay_parts.append(f"λ={lam:g}: Random − QI {d1.format(2)}, Max − Random {d2.format(2)}")
    report.claim(
        "payments_order",
        paper="003",
        claim="rewards paid QI-DPFL < Random-select < Max-select",
        paper_value="QI-DPFL lowest allocated reward (Figs. 3-6 d, no numbers)",
        measured="; ".join(pay_parts) + f" (n={n})",
        verdict=all_of(pay_verdicts),
        rule=above0.every(
            "λ and pair (Random − QI, Max − Random; payments 0 in a round without uploads)"
        ),
        why_not={v: "the ordering is not significant" for v in ("no", "inconclusive")},
        caveat=exhaust_text,
    )
    sel_gain = diff(SELECT, FEDAVG, None)
    close = Rule("within", TOLERANCE)
    close_rule = close.also(
        "a yes where no-DP FedAvg − FedAvg-DP itself lies within the tolerance is marked "
        "uninformative (the noise is too small for any two DP arms to differ by that much)"
    )
    for lam in lams:
        d = diff(QI, MAX, lam)
        dp_cost = diff(FEDAVG, FEDAVG_DP, lam)
        verdict = close.verdict(d)
        trivial = close.verdict(dp_cost) == "yes"
        report.claim(
            f"qi_close_to_max_lam_{lam:g}",
            paper="003",
            claim=f"QI-DPFL accuracy ≈ Max-select (within ±{TOLERANCE:g} pt), λ = {lam:g}",
            paper_value="QI-DPFL on par with Max-select (Figs. 3-6 b, no numbers)",
            measured=f"QI − Max {d.format(2, seeds=True)} pts; DP cost FedAvg − FedAvg-DP "
            f"{dp_cost.format(2)}",
            verdict=verdict,
            rule=close_rule,
            why_not=CLOSE_TO_MAX_WHY,
            caveat=f"uninformative: DP costs FedAvg-DP only {dp_cost.format(2)} pts at "
            f"λ = {lam:g}, so no DP arm can fall a point below another"
            if verdict == "yes" and trivial
            else "",
        )
        d = diff(QI, SELECT, lam)
        report.claim(
            f"qi_close_to_select_lam_{lam:g}",
            paper="003",
            claim=f"QI-DPFL accuracy ≈ FedAvg-select (within ±{TOLERANCE:g} pt) despite the "
            f"noise, λ = {lam:g}",
            paper_value="QI-DPFL similar to FedAvg-select (Figs. 4-6, no numbers)",
            measured=f"QI − FedAvg-select {d.format(2, seeds=True)} pts; DP cost FedAvg − "
            f"FedAvg-DP {dp_cost.format(2)}",
            verdict=close.verdict(d),
            rule=close_rule,
            why_not={
                v: "QI-DPFL is FedAvg-select plus the game's noise: where that noise costs "
                "FedAvg-DP several points it costs QI-DPFL as much"
                for v in ("no", "inconclusive")
            },
            caveat=f"uninformative: DP costs FedAvg-DP only {dp_cost.format(2)} pts at λ = {lam:g}"
            if close.verdict(d) == "yes" and trivial
            else "",
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
            + f" pts (n={n})",
            verdict=all_of(above0.verdict(x) for x in ds),
            rule=above0.every("rival (QI-DPFL, FedAvg, FedAvg-select) − FedAvg-DP"),
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
        verdict=above0.verdict(d),
        rule=above0,
        why_not={v: SELECT_WHY for v in ("no", "inconclusive")},
    )
    report.not_run(
        "faster_convergence",
        paper="003",
        claim="QI-DPFL and FedAvg-select converge faster than FedAvg",
        paper_value="faster convergence rate (Figs. 3-6 a, curves only)",
        reason="the script records final accuracy only; the papers' curves give no rate to "
        "test against",
    )
    report.not_run(
        "non_iid_more_pronounced",
        paper="003",
        claim="the advantages are more pronounced on non-IID data than IID",
        paper_value="Figs. 4 and 6 vs 3 and 5 (no numbers)",
        reason="one partition per call and no gain to compare: EMD selection shows no gain "
        "under IID or Dirichlet (select_vs_fedavg; qi_dpfl_ablation.py's IID and α rows)",
    )
    report.not_run(
        "emnist_cifar",
        paper="003",
        claim="the same orderings on EMNIST and CIFAR-10 with CNNs",
        paper_value="Figs. 3-6",
        reason="EMNIST and CIFAR-10 are not implemented (fedgame runs Fashion-MNIST with the "
        "paper's MNIST linear model)",
    )


if __name__ == "__main__":
    _shared.main(main)
