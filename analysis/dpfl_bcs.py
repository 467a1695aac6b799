"""DPFL-BCS (paper 000) vs WeiAvg vs uniform selection, GM and LM, at a reduced size.

Each (mechanism, eps_max, variant) cell runs on seeds 0..N-1 (same partition, budgets and
noise streams across variants for one seed), plus a no-DP FedSGD reference. Logistic
regression, FedSGD lr 0.5/(1+t/200), per-sample clipping B = 1, c2 = 1.5, eps_n ~
U[0.1, eps_max], Dirichlet alpha = 3 (scenarios/dpfl_bcs.yaml). GM: ``gaussian_local``
(dpfl_bcs calibration); LM: ``laplace_local`` (per-sample L1 clip 1, basic composition, BCS
allocation for z = 2). Accuracy = mean test accuracy of the last 5 rounds.

Paper setting (note 000 §6.3): N=100, K=20, T=200, T0=10, full F-MNIST with LeNet-5, SGD
momentum 0.9, eps_n ~ U[0.5, 4]; its headline numbers compare PRIVATEFL with PRIVATEFL-BCS.
"""

from __future__ import annotations

from typing import Any

import _shared

NAME = "dpfl_bcs"
DEFAULTS = _shared.Defaults(seeds=5, rounds=40, quick_seeds=2, quick_rounds=10)
SIZES = {"clients": 40, "k": 8, "t0": 6, "train": 6000, "test": 2000, "eps_max": "1,3"}
QUICK = {"clients": 16, "k": 4, "t0": 2, "train": 1200, "test": 500, "eps_max": "3"}
C2 = 1.5
VARIANTS = ("uniform (DPSGD)", "WeiAvg", "DPFL-BCS")
LAPLACE = {
    "kind": "laplace_local",
    "level": "sample",
    "adjacency": "replace",
    "clip": 1.0,
    "participations": "auto",
}


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    p.add_argument("--clients", type=int, help=f"N (default {SIZES['clients']})")
    p.add_argument("--k", type=int, help=f"K selected per round (default {SIZES['k']})")
    p.add_argument("--t0", type=int, help=f"BCS stage-1 rounds T0 (default {SIZES['t0']})")
    p.add_argument("--train", type=int, help=f"training images (default {SIZES['train']})")
    p.add_argument("--eps-max", help=f"comma-separated eps_max grid (default {SIZES['eps_max']})")
    return p


def scenario(base: dict, job: dict[str, Any]) -> dict[str, Any]:
    """The scenario of one (mechanism, eps_max, variant, seed) cell."""
    k, t0 = job["k"], job["t0"]
    d = {**base, "seed": job["seed"], "rounds": job["rounds"]}
    budget = {**base["population"]["budget"]}
    if job["variant"] != "no DP":
        budget["epsilon"] = {"dist": "uniform", "low": 0.1, "high": job["eps_max"]}
    d["population"] = {**base["population"], "clients": job["clients"], "budget": budget}
    d["data"] = {**base["data"], "dataset": job["dataset"]}
    d["training"] = {**base["training"], "lr": 0.5}
    d["privacy"] = {**base["privacy"], "c2": C2, "participations": "auto"}
    variant = job["variant"]
    bcs = {**base["selection"], "k": k, "t0": t0, "c2": C2}
    d["selection"] = bcs if variant == "DPFL-BCS" else {"kind": "uniform", "k": k}
    d["aggregation"] = {"kind": "weighted_eps" if variant == "WeiAvg" else "mean"}
    if variant == "no DP":
        d["privacy"] = {"kind": "none"}
    elif job["mech"] == "LM":
        d["privacy"] = dict(LAPLACE)
        d["training"]["clip_norm"] = "l1"
        if variant == "DPFL-BCS":
            d["selection"] = {**bcs, "mechanism": "laplace", "clip_norm": "l1"}
    return _shared.apply_sets(d, job["overrides"])


#: a run's labels (jobs that share a scenario share its run, each with its own labels)
KEYS = ("mech", "eps_max", "variant", "seed")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Accuracy (mean of the last 5 rounds) and the scheduled clients BCS found missing."""
    result = _shared.simulate(job["scenario"])
    rounds = result.rounds
    missing = rounds["bcs_missing"].sum() if "bcs_missing" in rounds else 0.0
    return {k: job[k] for k in KEYS} | {
        "accuracy": float(rounds["test_accuracy"].iloc[-5:].mean()),
        "refused": float(missing),
        "status": result.manifest["status"],
        "dataset": result.manifest.get("dataset", ""),
    }


def main() -> None:
    import yaml

    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    sizes = QUICK if args.quick else SIZES
    size = {k: getattr(args, k) or sizes[k] for k in ("clients", "k", "t0", "train")}
    args.t0_share = size["t0"] / args.rounds
    eps_grid = [float(e) for e in (args.eps_max or sizes["eps_max"]).split(",")]
    test = sizes["test"]
    dataset = _shared.dataset_spec(args, max_train=size["train"], max_test=test)
    base = yaml.safe_load((_shared.ROOT / "scenarios" / f"{NAME}.yaml").read_text())
    common = {"rounds": args.rounds, "dataset": dataset, "overrides": args.overrides}
    common |= {k: size[k] for k in ("clients", "k", "t0")}
    jobs = [
        common | {"mech": mech, "eps_max": eps, "variant": variant, "seed": seed}
        for mech in ("GM", "LM")
        for eps in eps_grid
        for variant in VARIANTS
        for seed in range(args.seeds)
    ]
    jobs += [
        common | {"mech": "-", "eps_max": 0.0, "variant": "no DP", "seed": seed}
        for seed in range(args.seeds)
    ]
    for job in jobs:
        job["scenario"] = scenario(base, job)
    _shared.validate_all(j["scenario"] for j in jobs)
    print(
        f"{NAME}: N={size['clients']} K={size['k']} T={args.rounds} T0={size['t0']} "
        f"data={dataset} seeds={args.seeds}: {len(jobs)} runs",
        flush=True,
    )
    report = _shared.Report(NAME, args)
    report.rows = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=KEYS
    )
    summarise(report, eps_grid)
    report.write()


def summarise(report: _shared.Report, eps_grid: list[float]) -> None:
    """Accuracy table, paired differences and the paper's claims."""
    import pandas as pd

    from fedgame.analysis.stats import above, all_of, paired_difference, t_interval

    df = pd.DataFrame(report.rows).sort_values("seed")

    def acc(mech: str, eps: float, variant: str) -> list[float]:
        sel = df[(df.mech == mech) & (df.eps_max == eps) & (df.variant == variant)]
        return list(100 * sel["accuracy"])

    def diff(mech: str, eps: float, a: str, b: str) -> Any:
        return paired_difference(acc(mech, eps, a), acc(mech, eps, b))

    rows = []
    for mech in ("GM", "LM"):
        for eps in eps_grid:
            cells = [t_interval(acc(mech, eps, v)).format() for v in VARIANTS]
            d_w = diff(mech, eps, "DPFL-BCS", "WeiAvg").format()
            d_u = diff(mech, eps, "DPFL-BCS", "uniform (DPSGD)").format()
            sel = df[(df.mech == mech) & (df.eps_max == eps) & (df.variant == "DPFL-BCS")]
            rows.append([mech, f"{eps:g}", *cells, d_w, d_u, f"{sel['refused'].sum():.0f}"])
    nodp = t_interval(acc("-", 0.0, "no DP")).format()
    rows.append(["none", "-", nodp, "-", "-", "-", "-", "-"])
    report.table(
        "accuracy",
        "Final test accuracy % (mean of the last 5 rounds), mean ± 95% CI over seeds",
        ["mech", "eps_max", *VARIANTS, "BCS − WeiAvg", "BCS − uniform", "BCS refused"],
        rows,
    )
    lm = df[df.mech == "LM"]
    lm_best = 100 * lm.groupby(["eps_max", "variant"])["accuracy"].mean().max()
    t0_share = report.args.t0_share
    seeds = report.args.seeds

    def across(label: str, diffs: dict[float, Any]) -> tuple[str, Any]:
        """``label d ± h at every ε_max`` and the verdict over the whole ε_max grid."""
        text = "; ".join(f"ε_max {e:g}: {d.format()}" for e, d in diffs.items())
        return f"{label} {text} pts (n={seeds})", all_of(above(d) for d in diffs.values())

    def grid(mech: str, a: str, b: str) -> dict[float, Any]:
        return {e: diff(mech, e, a, b) for e in eps_grid}

    bcs, wei, uni = "DPFL-BCS", "WeiAvg", "uniform (DPSGD)"
    measured, verdict = across("BCS − WeiAvg:", grid("GM", bcs, wei))
    report.claim(
        "gm_bcs_vs_weiavg",
        paper="000",
        claim="DPFL-BCS above WeiAvg (GM), at every ε_max",
        paper_value="BCS best at every ε_max (Figs. 2 and 4, curves only)",
        measured=measured,
        verdict=verdict,
        why_not=f"stage 1 (T0/T = {t0_share:.0%}): with B = 1 its loss reports make the "
        "sensitivity 2η(B+Θ)/D_n 3.3 times larger, so BCS releases 2.2 times WeiAvg's noise; "
        "without stage 1 BCS is above WeiAvg (+2.6 ± 2.0, dpfl_bcs_ablation.py); N, T (the "
        "paper's T = 200, T0 = 10: −2.1 ± 2.6), ε range, 60k data, an MLP and the paper's "
        "4,266-parameter MNIST CNN (−2.9 ± 8.6; at T = 200: −1.9 ± 13.6) do not close the "
        "gap; the paper's B = 25 (1.09 times) "
        "ties them (+0.2 ± 1.0, both near 20 %), but in the closest setting BCS loses again "
        "with B = 25 (−5.1 ± 1.3; 60k images: −3.4 ± 9.9, 3 seeds): the underdetermined P2 "
        "fit to noisy stage-1 losses can leave stage 2 to about K clients (23 of 100; 60k: "
        "20); at T = 200 without loss reports BCS is above (+4.2 ± 1.4), and with every value "
        "the paper gives (T = 200, B = 25, full 60k) above on every seed, by +1.5 ± 0.5 "
        "(5 seeds): the sign, not the size",
    )
    measured, verdict = across("BCS − uniform:", grid("GM", bcs, uni))
    report.claim(
        "gm_bcs_vs_uniform",
        paper="000",
        claim="DPFL-BCS above uniform selection (GM), at every ε_max",
        paper_value="+23.6 pts F-MNIST (Table I, PRIVATEFL → PRIVATEFL-BCS)",
        measured=measured,
        verdict=verdict,
        why_not="BCS's gain over uniform selection is not significant at every ε_max",
    )
    measured, verdict = across("BCS − uniform:", grid("LM", bcs, uni))
    report.claim(
        "lm_bcs_vs_uniform",
        paper="000",
        claim="DPFL-BCS above uniform selection (LM), the largest gains",
        paper_value="+54.5 pts F-MNIST (Table I, PRIVATEFL → PRIVATEFL-BCS)",
        measured=measured,
        verdict=verdict,
        why_not={
            v: f"every LM variant ends at or below {lm_best:.0f}% (10 classes: chance 10%): "
            "the L1 clip to B = 1 shrinks the update to ≈ 0.0026 in L2 while one client's "
            "Laplace noise has L2 norm ≈ 4.3 (ratio ≈ 1,660; Gaussian ≈ 68)"
            for v in ("no", "partly", "inconclusive")
        },
    )
    measured, verdict = across("WeiAvg − uniform:", grid("GM", wei, uni))
    report.claim(
        "weiavg_vs_uniform",
        paper="000",
        claim="WeiAvg above uniform selection (GM), at every ε_max",
        paper_value="WeiAvg > DPSGD (Fig. 2, curves only)",
        measured=measured,
        verdict=verdict,
        why_not="WeiAvg's gain over uniform selection is not significant at every ε_max",
    )
    gm_lm = {e: paired_difference(acc("GM", e, bcs), acc("LM", e, bcs)) for e in eps_grid}
    measured, verdict = across("GM − LM:", gm_lm)
    report.claim(
        "lm_worse_than_gm",
        paper="000",
        claim="LM hurts utility more than GM (BCS), at every ε_max",
        paper_value="GM 80.7% vs LM 69.4% F-MNIST (Table I, PRIVATEFL-BCS)",
        measured=measured,
        verdict=verdict,
    )


if __name__ == "__main__":
    _shared.main(main)
