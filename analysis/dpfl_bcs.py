"""DPFL-BCS (paper 000) vs WeiAvg vs uniform selection, GM and LM, at a reduced size.

Each (mechanism, eps_max, variant) cell runs on seeds 0..N-1 (same partition, budgets and
noise streams across variants for one seed), plus a no-DP FedSGD reference. Logistic
regression, FedSGD lr 0.5/(1+t/200), per-sample clipping B = 1, c2 = 1.5, eps_n ~
U[0.1, eps_max], Dirichlet alpha = 3 (scenarios/dpfl_bcs.yaml; ``--alpha``). GM:
``gaussian_local`` (dpfl_bcs calibration); LM: ``laplace_local`` (per-sample L1 clip 1, basic
composition, BCS allocation for z = 2). Accuracy = mean test accuracy of the last 5 rounds.
Fig. 5's small-α end: the three GM variants also run at ``--small-alpha`` (default 0.5, the
paper's smallest α) and the largest eps_max.

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


#: the settings reproduce.py reruns the claims on besides the default; GM only (LM ends at
#: chance in the default setting, and the Laplace runs cost as much as the Gaussian ones)
HOLDOUTS = (
    _shared.Holdout("seeds", "other seeds, GM only", ("--first-seed", "12345", "--mechs", "GM")),
    _shared.Holdout(
        "alpha",
        "Dirichlet α = 0.3, GM only",
        ("--alpha", "0.3", "--first-seed", "777", "--mechs", "GM"),
    ),
)
ALPHA, SMALL_ALPHA = 3.0, 0.5
#: 10 classes: an arm whose mean accuracy stays below CHANCE + CHANCE_MARGIN has not trained
CHANCE, CHANCE_MARGIN = 10.0, 5.0


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    _shared.add_first_seed(p)
    p.add_argument("--alpha", type=float, default=ALPHA, help=f"Dirichlet α (default {ALPHA:g})")
    p.add_argument(
        "--mechs",
        default="GM,LM",
        help="comma-separated mechanisms to run: GM, LM (default both; the LM claims need LM)",
    )
    p.add_argument(
        "--small-alpha",
        type=float,
        default=SMALL_ALPHA,
        help=f"the Fig. 5 small-α arm's Dirichlet α (default {SMALL_ALPHA:g})",
    )
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
    if "alpha" in job:  # dpfl_bcs_ablation's jobs keep the scenario's α
        d["data"]["partition"] = {**base["data"]["partition"], "alpha": job["alpha"]}
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
KEYS = ("mech", "eps_max", "variant", "alpha", "seed")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Accuracy (mean of the last 5 rounds) and the scheduled clients BCS found missing
    (``bcs_missing`` per round; a variant without BCS misses none: 0)."""
    from fedgame.analysis.totals import round_mean, round_total

    result = _shared.simulate(job["scenario"])
    rounds = result.rounds
    missing = round_total(rounds["bcs_missing"]).value if "bcs_missing" in rounds else 0.0
    return {k: job[k] for k in KEYS} | {
        "accuracy": round_mean(rounds["test_accuracy"].iloc[-5:]).value,
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
    common |= {k: size[k] for k in ("clients", "k", "t0")} | {"alpha": args.alpha}
    from fedgame.errors import ScenarioError

    seeds = _shared.seed_list(args)
    mechs = [m for m in ("GM", "LM") if m in args.mechs.split(",")]
    if not mechs or set(args.mechs.split(",")) - {"GM", "LM"}:
        raise ScenarioError("--mechs", args.mechs, "a comma-separated subset of GM, LM")
    jobs = [
        common | {"mech": mech, "eps_max": eps, "variant": variant, "seed": seed}
        for mech in mechs
        for eps in eps_grid
        for variant in VARIANTS
        for seed in seeds
    ]
    jobs += [
        common | {"mech": "-", "eps_max": 0.0, "variant": "no DP", "seed": seed} for seed in seeds
    ]
    if args.small_alpha != args.alpha:
        jobs += [
            common
            | {"mech": "GM", "eps_max": max(eps_grid), "variant": v, "seed": seed}
            | {"alpha": args.small_alpha}
            for v in VARIANTS
            for seed in seeds
        ]
    for job in jobs:
        job["scenario"] = scenario(base, job)
    _shared.validate_all(j["scenario"] for j in jobs)
    print(
        f"{NAME}: N={size['clients']} K={size['k']} T={args.rounds} T0={size['t0']} "
        f"data={dataset} α={args.alpha:g} {_shared.seeds_text(args)}: {len(jobs)} runs",
        flush=True,
    )
    report = _shared.Report(NAME, args, holdouts=HOLDOUTS)
    report.setting = (
        f"{dataset['kind']} {size['train']} images, Dirichlet α = {args.alpha:g}, "
        f"N = {size['clients']}, K = {size['k']}, T = {args.rounds}, T0 = {size['t0']}"
    )
    report.rows = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=KEYS
    )
    from fedgame.analysis.guarantee import epsilon_kind

    kinds = {m: next(j["scenario"]["privacy"] for j in jobs if j["mech"] == m) for m in mechs}
    head = "eps_max (" + "; ".join(f"{m}: {epsilon_kind(p)}" for m, p in kinds.items()) + ")"
    summarise(report, eps_grid, head)
    report.write()


def summarise(report: _shared.Report, eps_grid: list[float], eps_head: str = "eps_max") -> None:
    """Accuracy table, paired differences and the paper's claims."""
    import pandas as pd

    from fedgame.analysis.stats import Rule, all_of, paired_difference, t_interval

    df = pd.DataFrame(report.rows).sort_values("seed")
    args = report.args
    alpha = args.alpha

    def acc(mech: str, eps: float, variant: str, a: float = alpha) -> list[float]:
        sel = df[(df.mech == mech) & (df.eps_max == eps) & (df.variant == variant)]
        return list(100 * sel[sel.alpha == a]["accuracy"])

    def diff(mech: str, eps: float, a: str, b: str) -> Any:
        return paired_difference(acc(mech, eps, a), acc(mech, eps, b))

    main = df[df.alpha == alpha]
    mechs = [m for m in ("GM", "LM") if (main.mech == m).any()]
    rows = []
    for mech in mechs:
        for eps in eps_grid:
            cells = [t_interval(acc(mech, eps, v)).format() for v in VARIANTS]
            d_w = diff(mech, eps, "DPFL-BCS", "WeiAvg").format()
            d_u = diff(mech, eps, "DPFL-BCS", "uniform (DPSGD)").format()
            sel = main[(main.mech == mech) & (main.eps_max == eps) & (main.variant == "DPFL-BCS")]
            rows.append([mech, f"{eps:g}", *cells, d_w, d_u, f"{sel['refused'].sum():.0f}"])
    nodp = t_interval(acc("-", 0.0, "no DP")).format()
    rows.append(["none", "-", nodp, "-", "-", "-", "-", "-"])
    small = args.small_alpha
    has_small = small != alpha and (df.alpha == small).any()
    if has_small:
        e = max(eps_grid)
        cells = [t_interval(acc("GM", e, v, small)).format() for v in VARIANTS]
        d_w = paired_difference(acc("GM", e, "DPFL-BCS", small), acc("GM", e, "WeiAvg", small))
        d_u = paired_difference(
            acc("GM", e, "DPFL-BCS", small), acc("GM", e, "uniform (DPSGD)", small)
        )
        rows.append([f"GM, α = {small:g}", f"{e:g}", *cells, d_w.format(), d_u.format(), "-"])
    report.table(
        "accuracy",
        f"Final test accuracy % (mean of the last 5 rounds), mean ± 95% CI over seeds; "
        f"Dirichlet α = {alpha:g} unless the row says otherwise",
        ["mech", eps_head, *VARIANTS, "BCS − WeiAvg", "BCS − uniform", "BCS refused"],
        rows,
    )
    lm = main[main.mech == "LM"]
    lm_best = 100 * lm.groupby(["eps_max", "variant"])["accuracy"].mean().max() if len(lm) else 0.0
    lm_trains = lm_best >= CHANCE + CHANCE_MARGIN
    t0_share = args.t0_share
    seeds = args.seeds
    above0 = Rule("above", 0.0)
    chance = (
        f"a comparison with an arm whose mean accuracy stays below {CHANCE + CHANCE_MARGIN:g}% "
        f"(chance {CHANCE:g}% + {CHANCE_MARGIN:g} pts: it has not trained) is inconclusive"
    )

    def across(label: str, diffs: dict[float, Any]) -> tuple[str, Any]:
        """``label d ± h at every ε_max`` and the verdict over the whole ε_max grid."""
        text = "; ".join(f"ε_max {e:g}: {d.format()}" for e, d in diffs.items())
        return f"{label} {text} pts (n={seeds})", all_of(above0.verdict(d) for d in diffs.values())

    def grid(mech: str, a: str, b: str) -> dict[float, Any]:
        return {e: diff(mech, e, a, b) for e in eps_grid}

    every_eps = above0.every("ε_max")
    bcs, wei, uni = "DPFL-BCS", "WeiAvg", "uniform (DPSGD)"
    measured, verdict = across("BCS − WeiAvg:", grid("GM", bcs, wei))
    report.claim(
        "gm_bcs_vs_weiavg",
        paper="000",
        claim="DPFL-BCS above WeiAvg (GM), at every ε_max",
        paper_value="BCS best at every ε_max (Figs. 2 and 4, curves only)",
        measured=measured,
        verdict=verdict,
        rule=every_eps,
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
        rule=every_eps,
        why_not="BCS's gain over uniform selection is not significant at every ε_max",
    )
    if "LM" in mechs:
        measured, verdict = across("BCS − uniform:", grid("LM", bcs, uni))
        lm_why = (
            f"every LM variant ends at or below {lm_best:.0f}% (10 classes: chance 10%): "
            "the L1 clip to B = 1 shrinks the update to ≈ 0.0026 in L2 while one client's "
            "Laplace noise has L2 norm ≈ 4.3 (ratio ≈ 1,660; Gaussian ≈ 68)"
        )
        report.claim(
            "lm_bcs_vs_uniform",
            paper="000",
            claim="DPFL-BCS above uniform selection (LM), the largest gains",
            paper_value="+54.5 pts F-MNIST (Table I, PRIVATEFL → PRIVATEFL-BCS)",
            measured=measured,
            verdict=verdict if lm_trains else "inconclusive",
            rule=every_eps.also(chance),
            why_not={v: lm_why for v in ("no", "partly", "inconclusive")},
        )
    measured, verdict = across("WeiAvg − uniform:", grid("GM", wei, uni))
    report.claim(
        "weiavg_vs_uniform",
        paper="000",
        claim="WeiAvg above uniform selection (GM), at every ε_max",
        paper_value="WeiAvg > DPSGD (Fig. 2, curves only)",
        measured=measured,
        verdict=verdict,
        rule=every_eps,
        why_not="WeiAvg's gain over uniform selection is not significant at every ε_max",
    )
    if "LM" in mechs:
        gm_lm = {e: paired_difference(acc("GM", e, bcs), acc("LM", e, bcs)) for e in eps_grid}
        measured, verdict = across("GM − LM:", gm_lm)
        report.claim(
            "lm_worse_than_gm",
            paper="000",
            claim="LM hurts utility more than GM (BCS), at every ε_max",
            paper_value="GM 80.7% vs LM 69.4% F-MNIST (Table I, PRIVATEFL-BCS)",
            measured=measured,
            verdict=verdict if lm_trains else "inconclusive",
            rule=every_eps.also(chance),
            why_not={
                v: f"LM never trains here ({lm_why}), so GM − LM measures how far GM trains, not "
                "what the Laplace mechanism costs a model that learns"
                for v in ("no", "partly", "inconclusive")
            },
        )
    if len(eps_grid) > 1:
        lo, hi = min(eps_grid), max(eps_grid)

        def gain(variant: str) -> Any:
            return paired_difference(acc("GM", hi, variant), acc("GM", lo, variant))

        gains = {v: gain(v) for v in (bcs, wei)}
        report.claim(
            "improves_with_eps",
            paper="000",
            claim=f"BCS and WeiAvg improve as ε_max grows (GM, ε_max {hi:g} vs {lo:g})",
            paper_value="BCS, WeiAvg and PFA improve with ε_max (Fig. 4, curves only)",
            measured="; ".join(f"{v}: {g.format()}" for v, g in gains.items())
            + f" pts (n={seeds})",
            verdict=all_of(above0.verdict(g) for g in gains.values()),
            rule=above0.every("variant (accuracy at the largest − the smallest ε_max)"),
            why_not={
                v: "the gain from the larger budgets is within the seed spread"
                for v in ("no", "inconclusive")
            },
        )
        d = paired_difference(
            [a - b for a, b in zip(acc("GM", hi, bcs), acc("GM", lo, bcs))],
            [a - b for a, b in zip(acc("GM", hi, uni), acc("GM", lo, uni))],
        )
        report.claim(
            "dpsgd_improves_less",
            paper="000",
            claim="uniform selection (DPSGD) improves less with ε_max than BCS (GM)",
            paper_value="DPSGD, DMLDP and PRIVATEFL barely improve with ε_max (Fig. 4)",
            measured=f"BCS's gain − uniform's gain (ε_max {lo:g} → {hi:g}): "
            f"{d.format(seeds=True)} pts",
            verdict=above0.verdict(d),
            rule=above0,
            why_not={
                v: "uniform selection gains from the larger budgets about as much as BCS"
                for v in ("no", "inconclusive")
            },
        )
    if has_small:
        e = max(eps_grid)
        d = paired_difference(acc("GM", e, bcs, small), acc("GM", e, uni, small))
        target = Rule("magnitude", 30.0)
        report.claim(
            "small_alpha_gain",
            paper="000",
            claim=f"at extremely small α BCS improves accuracy by 30-40 pts (GM, α = {small:g}, "
            f"ε_max {e:g}, vs uniform)",
            paper_value='"30~40%" when α is extremely small (Fig. 5, α ∈ [0.5, 8]; abstract)',
            measured=f"BCS − uniform at α = {small:g}: {d.format(seeds=True)} pts",
            verdict=target.verdict(d),
            rule=target,
            why_not={
                v: "the gain at small α is far below 30 points here (the paper's gain is "
                'over DPSGD/PRIVATEFL curves on its own setting; "30~40%" may be relative)'
                for v in ("no", "partly", "inconclusive")
            },
        )
        big, little = max(alpha, small), min(alpha, small)
        drop = paired_difference(acc("GM", e, bcs, big), acc("GM", e, bcs, little))
        report.claim(
            "drops_with_alpha",
            paper="000",
            claim=f"utility drops as α decreases (BCS, GM, α = {big:g} vs {little:g}, ε_max {e:g})",
            paper_value="utility drops as α decreases (Fig. 5, curves only)",
            measured=f"BCS at α {big:g} − at α {little:g}: {drop.format(seeds=True)} pts",
            verdict=above0.verdict(drop),
            rule=above0,
            why_not={
                v: "the accuracy difference between the two α is within the seed spread"
                for v in ("no", "inconclusive")
            },
        )
    else:
        report.not_run(
            "small_alpha_gain",
            paper="000",
            claim="at extremely small α BCS improves accuracy by 30-40 pts",
            paper_value='"30~40%" when α is extremely small (Fig. 5; abstract)',
            reason=f"--small-alpha equals --alpha ({alpha:g}): no small-α arm",
        )
    report.not_run(
        "privatefl_pfa_dmldp",
        paper="000",
        claim="PRIVATEFL-BCS above PRIVATEFL; PFA above DPSGD and DMLDP; PRIVATEFL above DPSGD "
        "under GM",
        paper_value="Table I; Fig. 2 items 4-5",
        reason="PRIVATEFL, PFA and DMLDP are not implemented; fedgame compares DPFL-BCS with "
        "WeiAvg and uniform selection (DPSGD), the rows above",
    )
    report.not_run(
        "non_convex",
        paper="000",
        claim="BCS also works for non-convex models",
        paper_value="Fig. 2 item 3 (LeNet-5, CNNs; curves only)",
        reason="this script runs logistic regression; dpfl_bcs_ablation.py's MLP, CNN and "
        "LeNet-5 rows measure BCS − WeiAvg there (not rerun on hold-outs)",
    )


if __name__ == "__main__":
    _shared.main(main)
