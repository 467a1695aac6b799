"""Paper 004 (LightDP-FL) Table II / III settings and the Fig. 3 baselines, over seeds.

Small federations (N = 50, every client selected, logistic regression, 5 local steps of 16 at
lr 0.1, per-round ε in {3, 6, 9} and δ = 1e-5, record-level NbAFL sensitivity 2C/|D_min| with
update clip C = 4, S ~ U{0..S̄} stragglers per round) run with ``fedgame.run.single.simulate``;
final test accuracy (%) beside the paper's CIFAR-10/ResNet-18 numbers (compare trends, not
levels). "5% link failures": every client-server link and client-client edge fails with
probability 0.05 per round, on top of the stragglers.

Paper setting (note 004 §6): CIFAR-10, ResNet-18, non-IID (method not given), N = 50,
T = 150, batch 32, lr 0.05, 5 trials; δ, clipping, local epochs and composition unreported.
"""

from __future__ import annotations

import json
from typing import Any

import _shared

NAME = "lightdp"
DEFAULTS = _shared.Defaults(seeds=5, rounds=30, quick_seeds=2, quick_rounds=5)
PAPER_II = {
    3.0: (50.8, 49.6, 47.5, 45.8),
    6.0: (54.5, 52.1, 50.6, 49.7),
    9.0: (61.9, 60.6, 57.9, 55.3),
}
PAPER_III = {
    3.0: (51.7, 50.2, 48.5, 47.2),
    6.0: (53.2, 51.7, 50.4, 48.8),
    9.0: (55.1, 53.4, 51.9, 50.9),
}
C_GRID = (10, 20, 30, 39)  # C̄ = 40 with S̄ = 10 is refused (C̄ + S̄ < N); paper's 40 -> 39
S_GRID = (0, 10, 20, 30)
CLIP = 4.0
EPS, QUICK_EPS = "3,6,9", "3"
SCHEMES = ("no DP", "ldp", "lightdp", "smpc_dp (p2p recovery)", "ideal_smpc")


#: the settings reproduce.py reruns the claims on besides the default (other seeds;
#: label skew by a Dirichlet split, on other seeds again)
HOLDOUTS = (
    _shared.Holdout("seeds", "other seeds", ("--first-seed", "12345")),
    _shared.Holdout(
        "alpha",
        "Dirichlet α = 0.3, not IID",
        ("--partition", "dirichlet", "--alpha", "0.3", "--first-seed", "777"),
    ),
)
#: the paper's "more than 15%" (Fig. 3), read as percentage points
PAPER_GAP = 15.0


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="digits")
    _shared.add_first_seed(p)
    p.add_argument(
        "--eps", help=f"comma-separated per-round ε (default {EPS}; --quick {QUICK_EPS})"
    )
    p.add_argument("--partition", choices=["iid", "dirichlet", "shards"], default="iid")
    p.add_argument("--alpha", type=float, default=0.5, help="Dirichlet α (default 0.5)")
    return p


def privacy(scheme: str, rounds: int, colluders: int) -> dict[str, Any]:
    if scheme == "no DP":
        return {"kind": "none"}
    kind = scheme.split(" ")[0]
    base = {"kind": kind, "clip": CLIP, "participations": rounds, "level": "sample"}
    return base if kind == "ldp" else base | {"max_colluders": colluders}


#: N, every one of them selected each round (so K = N)
CLIENTS = 50


def aggregation(scheme: str, *, s_bar: int) -> dict[str, Any]:
    """The plain mean, or for the SMPC schemes the secure sum of the mean with its recovery
    policy: p2p at threshold K − S̄ (every one of the 50 clients is selected; note 004 §5.2:
    the noise is sized for S̄ stragglers), or always (``ideal_smpc``)."""
    if not scheme.startswith(("smpc_dp", "ideal_smpc")):
        return {"kind": "mean"}
    secure: dict[str, Any] = {"kind": "secure", "inner": "mean", "recovery": "always"}
    if scheme.startswith("smpc_dp"):
        secure |= {"recovery": "p2p", "threshold": max(CLIENTS - s_bar, 1)}
    return secure


def scenario(cell: dict[str, Any], setup: dict[str, Any]) -> dict[str, Any]:
    """One federation: ``cell`` has scheme, eps, c_bar, s_bar, failures, seed."""
    rounds = setup["rounds"]
    faults: dict[str, Any] = {"kind": "bounded_stragglers", "max_stragglers": cell["s_bar"]}
    if cell["failures"]:
        faults |= {"link_failure": 0.05, "edge_failure": 0.05}
    d = {
        "name": "lightdp_analysis",
        "seed": cell["seed"],
        "rounds": rounds,
        "population": {
            "clients": CLIENTS,
            "budget": {"epsilon": cell["eps"] * rounds, "delta": 1e-5 * rounds},
            "colluders": 10,
        },
        "data": {"dataset": setup["dataset"], "partition": setup["partition"]},
        "model": {"kind": "logreg"},
        "training": {"local_steps": 5, "batch_size": 16, "lr": 0.1},
        "selection": {"kind": "all"},
        "aggregation": aggregation(cell["scheme"], s_bar=cell["s_bar"]),
        "privacy": privacy(cell["scheme"], rounds, cell["c_bar"]),
        "network": {"topology": {"kind": "complete"}, "faults": faults},
    }
    return _shared.apply_sets(d, setup["overrides"])


#: a run's labels (jobs that share a scenario, e.g. no DP at every ε, share its run)
KEYS = ("scheme", "eps", "c_bar", "s_bar", "failures", "seed")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Final accuracy (%) and the share of rounds whose aggregation failed."""
    from fedgame.analysis.totals import round_mean

    r = _shared.simulate(job["scenario"]).rounds
    return {k: job[k] for k in KEYS} | {
        "accuracy": 100 * float(r["test_accuracy"].iloc[-1]),
        "failed_share": round_mean(r["aggregation_failed"].astype(float)).value,
    }


def cells(eps_grid: list[float], seeds: list[int], quick: bool) -> list[dict[str, Any]]:
    """Every distinct (scheme, ε, C̄, S̄, failures, seed) the tables need."""
    c_grid = (C_GRID[0], C_GRID[-1]) if quick else C_GRID
    s_grid = (S_GRID[0], S_GRID[-1]) if quick else S_GRID
    out: dict[str, dict[str, Any]] = {}

    def add(**cell: Any) -> None:
        for seed in seeds:
            full = cell | {"seed": seed}
            out[json.dumps(full, sort_keys=True)] = full

    for eps in eps_grid:
        for c in c_grid:
            add(scheme="lightdp", eps=eps, c_bar=c, s_bar=10, failures=False)
        for s in s_grid:
            add(scheme="lightdp", eps=eps, c_bar=15, s_bar=s, failures=False)
        for scheme in SCHEMES:
            for failures in (False, True):
                add(scheme=scheme, eps=eps, c_bar=10, s_bar=10, failures=failures)
    return list(out.values())


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    eps_grid = [float(e) for e in (args.eps or (QUICK_EPS if args.quick else EPS)).split(",")]
    partition: dict[str, Any] = {"kind": args.partition}
    if args.partition == "dirichlet":
        partition["alpha"] = args.alpha
    setup = {"rounds": args.rounds, "dataset": _shared.dataset_spec(args)}
    setup |= {"partition": partition, "overrides": args.overrides}
    jobs = cells(eps_grid, _shared.seed_list(args), args.quick)
    for job in jobs:
        job["scenario"] = scenario(job, setup)
    _shared.validate_all(j["scenario"] for j in jobs)
    print(
        f"{NAME}: data={setup['dataset']} partition={partition} N=50 T={args.rounds} "
        f"ε={eps_grid} {_shared.seeds_text(args)}: {len(jobs)} runs",
        flush=True,
    )
    report = _shared.Report(NAME, args, holdouts=HOLDOUTS)
    split = f"Dirichlet α = {args.alpha:g}" if args.partition == "dirichlet" else args.partition
    report.setting = f"{setup['dataset']['kind']}, {split}, N = 50, T = {args.rounds}"
    report.rows = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=KEYS
    )
    from fedgame.analysis.guarantee import epsilon_header

    head = epsilon_header("per-round ε", [j["scenario"]["privacy"] for j in jobs])
    summarise(report, eps_grid, head)
    report.write()


def summarise(report: _shared.Report, eps_grid: list[float], eps_head: str = "ε") -> None:
    """Tables II, III and the Fig. 3 comparison, then the paper's claims."""
    import pandas as pd

    from fedgame.analysis.stats import Rule, all_of, paired_difference, t_interval

    above0, every_eps = Rule("above", 0.0), Rule("above", 0.0).every("ε")

    df = pd.DataFrame(report.rows).sort_values("seed")

    def acc(scheme: str, eps: float, c: int, s: int, failures: bool = False) -> list[float]:
        sel = df[(df.scheme == scheme) & (df.eps == eps) & (df.c_bar == c) & (df.s_bar == s)]
        return list(sel[sel.failures == failures]["accuracy"])

    def failed(scheme: str, eps: float) -> float:
        sel = df[(df.scheme == scheme) & (df.eps == eps) & df.failures]
        return float(sel["failed_share"].mean())

    lit = df[df.scheme == "lightdp"]
    c_grid = [c for c in C_GRID if ((lit.c_bar == c) & (lit.s_bar == 10)).any()]
    s_grid = [s for s in S_GRID if ((lit.c_bar == 15) & (lit.s_bar == s)).any()]

    def paper(table: dict[float, tuple[float, ...]], eps: float, grid: tuple, v: int) -> str:
        return f" ({table[eps][grid.index(v)]})" if eps in table and v in grid else ""

    rows = [
        [
            f"{eps:g}",
            *[
                t_interval(acc("lightdp", eps, c, 10)).format() + paper(PAPER_II, eps, C_GRID, c)
                for c in c_grid
            ],
        ]
        for eps in eps_grid
    ]
    report.table(
        "table2",
        "Table II: LightDP-FL accuracy % vs C̄ (S̄ = 10), mean ± 95% CI (paper, CIFAR-10)",
        [eps_head, *[f"C̄={c}" for c in c_grid]],
        rows,
    )
    rows = [
        [
            f"{eps:g}",
            *[
                t_interval(acc("lightdp", eps, 15, s)).format() + paper(PAPER_III, eps, S_GRID, s)
                for s in s_grid
            ],
        ]
        for eps in eps_grid
    ]
    report.table(
        "table3",
        "Table III: LightDP-FL accuracy % vs S̄ (C̄ = 15), mean ± 95% CI (paper, CIFAR-10)",
        [eps_head, *[f"S̄={s}" for s in s_grid]],
        rows,
    )
    rows = []
    for scheme in SCHEMES:
        row = [scheme]
        for failures in (False, True):
            for eps in eps_grid:
                text = t_interval(acc(scheme, eps, 10, 10, failures)).format()
                share = failed(scheme, eps) if failures else 0.0
                row.append(text + (f" [{100 * share:.0f}% rounds failed]" if share else ""))
        rows.append(row)
    head = [f"ε={e:g}" for e in eps_grid] + [f"ε={e:g}, 5% link failures" for e in eps_grid]
    report.table(
        "fig3",
        "Fig. 3 setting (C̄ = S̄ = 10): accuracy %, mean ± 95% CI",
        [f"scheme \\ {eps_head}", *head],
        rows,
    )

    def d(a: list[float], b: list[float]) -> Any:
        return paired_difference(a, b)

    gaps = {e: d(acc("lightdp", e, 10, 10), acc("ldp", e, 10, 10)) for e in eps_grid}
    gap_text = "; ".join(f"ε={e:g}: {g.format()}" for e, g in gaps.items())
    report.claim(
        "lightdp_above_ldp",
        paper="004",
        claim="LightDP-FL above vanilla LDP (C̄ = S̄ = 10)",
        paper_value="LightDP-FL above LDP at ε = 3 / 6 / 9 (Fig. 3)",
        measured=f"{gap_text} pts (n={report.args.seeds})",
        verdict=all_of(above0.verdict(g) for g in gaps.values()),
        rule=every_eps,
        why_not={v: "the gap is within the seed spread at some ε" for v in ("no", "inconclusive")},
    )
    margin = Rule("above", PAPER_GAP)
    report.claim(
        "lightdp_vs_ldp",
        paper="004",
        claim=f"LightDP-FL beats vanilla LDP by more than {PAPER_GAP:g} points",
        paper_value="> 15% (Fig. 3, ε = 3 / 6 / 9; read as points)",
        measured=f"{gap_text} pts (n={report.args.seeds})",
        verdict=all_of(margin.verdict(g) for g in gaps.values()),
        rule=margin.every("ε"),
        why_not={
            v: "LightDP's noise variance is 0.47× LDP's (note 004 §4.4; measured 0.46-0.48), "
            "a 0.68× std: the gap is about half of LDP's loss to no DP (14 points here) and "
            "stays at 8-19 where LDP loses 14-60; on full Fashion-MNIST the noise costs "
            "nothing and the gap is 0.1 ± 0.1 to 0.1 ± 0.9 (lightdp_ablation.py)"
            for v in ("no", "inconclusive")
        },
    )
    smpc = {e: d(acc("lightdp", e, 10, 10), acc("ideal_smpc", e, 10, 10)) for e in eps_grid}
    report.claim(
        "lightdp_vs_smpc",
        paper="004",
        claim="LightDP-FL beats SMPC+DP (no link failures)",
        paper_value="LightDP > SMPC+DP (Fig. 3)",
        measured="; ".join(f"ε={e:g}: {g.format()}" for e, g in smpc.items())
        + f" pts vs ideal_smpc (n={report.args.seeds})",
        verdict=all_of(above0.verdict(g) for g in smpc.values()),
        rule=every_eps,
        why_not="SMPC+DP carries about 14× less aggregate noise than LightDP (note 004 §8.8): "
        "it wins where noise costs accuracy and ties where it does not (F-MNIST + MLP: "
        "-0.0 ± 0.6, lightdp_ablation.py); the paper's ordering needs failures or time costs",
    )
    shares = [failed("smpc_dp (p2p recovery)", e) for e in eps_grid]
    report.claim(
        "secagg_fails",
        paper="004",
        claim="with 5% per-link failures, P2P-dependent secure aggregation fails to train",
        paper_value="SecAgg / SwiftAgg+ fail to train (Fig. 4 text)",
        measured="rounds failed: "
        + " / ".join(f"{100 * s:.0f}%" for s in shares)
        + " at ε = "
        + " / ".join(f"{e:g}" for e in eps_grid),
        verdict="yes" if min(shares) >= 0.9 else "no",
        rule=Rule(
            "share",
            0.9,
            "",
            "yes when at least 90% of the rounds' aggregations failed (mean over seeds) at "
            "every ε, else no",
        ),
        why_not="fewer than 90% of the rounds failed",
    )
    c_lo, c_hi = min(c_grid), max(c_grid)
    cs = {e: d(acc("lightdp", e, c_lo, 10), acc("lightdp", e, c_hi, 10)) for e in eps_grid}
    report.claim(
        "falls_with_c_bar",
        paper="004",
        claim=f"accuracy falls as C̄ grows (C̄ = {c_lo} vs {c_hi}, S̄ = 10)",
        paper_value="50.8 → 45.8 / 54.5 → 49.7 / 61.9 → 55.3 at ε = 3 / 6 / 9 (Table II)",
        measured="; ".join(f"ε={e:g}: {g.format()}" for e, g in cs.items())
        + f" pts (n={report.args.seeds})",
        verdict=all_of(above0.verdict(g) for g in cs.values()),
        rule=every_eps,
        why_not={
            v: "at large ε the noise barely matters for this small model"
            for v in ("no", "inconclusive")
        },
    )
    s_lo, s_hi = min(s_grid), max(s_grid)
    ss = {e: d(acc("lightdp", e, 15, s_lo), acc("lightdp", e, 15, s_hi)) for e in eps_grid}
    report.claim(
        "falls_with_s_bar",
        paper="004",
        claim=f"accuracy falls as S̄ grows (S̄ = {s_lo} vs {s_hi}, C̄ = 15)",
        paper_value="51.7 → 47.2 / 53.2 → 48.8 / 55.1 → 50.9 at ε = 3 / 6 / 9 (Table III)",
        measured="; ".join(f"ε={e:g}: {g.format()}" for e, g in ss.items())
        + f" pts (n={report.args.seeds})",
        verdict=all_of(above0.verdict(g) for g in ss.values()),
        rule=every_eps,
        why_not={
            v: "at ε = 9 even LDP's noise costs about 1 point against no DP (Fig. 3 table), "
            "and S̄ = 0 → 30 raises LightDP's noise below LDP's level (0.33× → 0.79×, note "
            "004 §4.4): a drop of at most ~1 point, within the seed spread"
            for v in ("no", "inconclusive")
        },
    )
    if len(eps_grid) > 1:
        lo, hi = min(eps_grid), max(eps_grid)
        g = d(acc("lightdp", hi, 10, 10), acc("lightdp", lo, 10, 10))
        report.claim(
            "rises_with_eps",
            paper="004",
            claim=f"accuracy rises with ε (ε = {hi:g} vs {lo:g}, C̄ = S̄ = 10)",
            paper_value="50.8 → 61.9 (Table II, C̄ = 10)",
            measured=f"{g.format(seeds=True)} pts",
            verdict=above0.verdict(g),
            rule=above0,
            why_not={v: "the difference is within the seed spread" for v in ("no", "inconclusive")},
        )
    report.not_run(
        "he_time",
        paper="004",
        claim="HE+DP converges at least 10 times slower in training time than LightDP-FL",
        paper_value="Fig. 4 (accuracy vs wall-clock time, 5% link failures)",
        reason="fedgame models no computation or communication time and has no homomorphic "
        "encryption baseline; rounds, not seconds, are simulated",
    )
    report.not_run(
        "faster_convergence",
        paper="004",
        claim="LightDP-FL speeds up convergence against LDP",
        paper_value="Fig. 3 (curves only)",
        reason="the script records final accuracy only; the paper gives no rate to test",
    )


if __name__ == "__main__":
    _shared.main(main)
