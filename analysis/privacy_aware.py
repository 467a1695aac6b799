"""Privacy-aware selection (paper 001) vs unbiased vs Power-of-Choice, three budget laws.

Budgets: eps ~ U(0, 1) (Tables III/IV) and the two mixtures of Fig. 6, written as fedgame
``mixture`` distributions of clipped normals (the paper discards negative draws; with these
means a clip at 0.01 almost never binds): case 1 0.3 N(0.5, 0.2²) + 0.7 N(10, 1), case 2
0.3 N(2, 0.2²) + 0.7 N(8, 1). Partition: paper 001's s %-similarity split (``s_similarity``,
s = 30 as in the tables' headline column, sizes ∝ U(0.5, 1.5)). 5 local DP-SGD steps of 64,
logistic regression, eta*D = 1e4, sigma_k from Eq. 6-7 with each client's realised T_k
(``dpsgd_local``, ``participations: auto``). Accuracy = mean of the last 5 rounds.

Paper setting (note 001 §6): N probably 100, 10 draws per round, F-MNIST/MNIST with a 26k-
parameter CNN, B = 128, T^g, T^l, lr, C and eta not reported.
"""

from __future__ import annotations

from typing import Any

import _shared

NAME = "privacy_aware"
DEFAULTS = _shared.Defaults(seeds=5, rounds=40, quick_seeds=2, quick_rounds=5)
SIZES = {"clients": 50, "k": 10, "train": 10000, "test": 2000}
QUICK = {"clients": 12, "k": 4, "train": 1000, "test": 500}
VARIANTS = ("privacy-aware", "unbiased", "power-of-choice")
#: Table IV (Fashion-MNIST): s -> (privacy-aware, unbiased, biased = power-of-choice)
TABLE_IV = {
    100.0: (53.53, 14.68, 23.63),
    70.0: (55.26, 16.47, 20.95),
    30.0: (54.80, 16.27, 15.39),
    0.0: (48.94, 10.69, 20.37),
}
#: the settings reproduce.py reruns the claims on besides the default (other seeds; the
#: paper's most heterogeneous split, s = 0, on other seeds again)
HOLDOUTS = (
    _shared.Holdout("seeds", "other seeds", ("--first-seed", "12345")),
    _shared.Holdout(
        "similarity",
        "s = 0 (no IID share)",
        ("--similarity", "0", "--first-seed", "777"),
    ),
)


def _mixture(low_mean: float, high_mean: float) -> dict[str, Any]:
    def normal(mean: float, std: float, weight: float) -> dict[str, Any]:
        return {"weight": weight, "dist": "normal", "mean": mean, "std": std, "low": 0.01}

    return {
        "dist": "mixture",
        "components": [normal(low_mean, 0.2, 0.3), normal(high_mean, 1.0, 0.7)],
    }


BUDGETS = {
    "eps ~ U(0, 1)": {"dist": "uniform", "low": 0.001, "high": 1.0},
    "Fig. 6 case 1": _mixture(0.5, 10.0),
    "Fig. 6 case 2": _mixture(2.0, 8.0),
}


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    _shared.add_first_seed(p)
    p.add_argument("--clients", type=int, help=f"N (default {SIZES['clients']})")
    p.add_argument("--k", type=int, help=f"draws per round (default {SIZES['k']})")
    p.add_argument("--train", type=int, help=f"training images (default {SIZES['train']})")
    p.add_argument("--similarity", type=float, default=30.0, help="s in %% (default 30)")
    p.add_argument("--eta-d", type=float, default=1e4, help="eta*D of Problem 1 (default 1e4)")
    return p


def selection(variant: str, k: int, eta_d: float) -> dict[str, Any]:
    if variant == "privacy-aware":
        return {"kind": "privacy_aware", "k": k, "eta_d": eta_d, "batch_size": 64}
    if variant == "unbiased":
        return {"kind": "unbiased", "k": k}
    return {"kind": "power_of_choice", "k": k, "d": 2 * k}


def scenario(base: dict, job: dict[str, Any]) -> dict[str, Any]:
    """The scenario of one (budget law, variant, seed) cell."""
    d = {**base, "seed": job["seed"], "rounds": job["rounds"]}
    budget = {**base["population"]["budget"], "epsilon": BUDGETS[job["budget"]]}
    d["population"] = {**base["population"], "clients": job["clients"], "budget": budget}
    partition = {"kind": "s_similarity", "s": job["similarity"]}
    d["data"] = {**base["data"], "dataset": job["dataset"], "partition": partition}
    d["selection"] = selection(job["variant"], job["k"], job["eta_d"])
    d["privacy"] = {**base["privacy"], "participations": "auto"}
    d.pop("sweep", None)
    return _shared.apply_sets(d, job["overrides"])


#: a run's labels (jobs that share a scenario share its run, each with its own labels)
KEYS = ("budget", "variant", "seed")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Accuracy (mean of the last 5 rounds) of one cell."""
    from fedgame.analysis.totals import round_mean

    result = _shared.simulate(job["scenario"])
    return {k: job[k] for k in KEYS} | {
        "accuracy": round_mean(result.rounds["test_accuracy"].iloc[-5:]).value,
        "status": result.manifest["status"],
    }


def main() -> None:
    import yaml

    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    sizes = QUICK if args.quick else SIZES
    size = {k: getattr(args, k) or sizes[k] for k in ("clients", "k", "train")}
    dataset = _shared.dataset_spec(args, max_train=size["train"], max_test=sizes["test"])
    base = yaml.safe_load((_shared.ROOT / "scenarios" / f"{NAME}.yaml").read_text())
    common = {"rounds": args.rounds, "dataset": dataset, "overrides": args.overrides}
    common |= {"clients": size["clients"], "k": size["k"], "similarity": args.similarity}
    common |= {"eta_d": args.eta_d}
    jobs = [
        common | {"budget": budget, "variant": variant, "seed": seed}
        for budget in BUDGETS
        for variant in VARIANTS
        for seed in _shared.seed_list(args)
    ]
    for job in jobs:
        job["scenario"] = scenario(base, job)
    _shared.validate_all(j["scenario"] for j in jobs)
    print(
        f"{NAME}: N={size['clients']} K={size['k']} T={args.rounds} s={args.similarity:g}% "
        f"data={dataset} {_shared.seeds_text(args)}: {len(jobs)} runs",
        flush=True,
    )
    report = _shared.Report(NAME, args, holdouts=HOLDOUTS)
    report.setting = (
        f"{dataset['kind']} {size['train']} images, s = {args.similarity:g} %, "
        f"N = {size['clients']}, {size['k']} draws, T = {args.rounds}, ηD = {args.eta_d:g}"
    )
    report.rows = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=KEYS
    )
    from fedgame.analysis.guarantee import epsilon_kind

    summarise(report, epsilon_kind(jobs[0]["scenario"]["privacy"]))
    report.write()


def summarise(report: _shared.Report, dp_kind: str = "") -> None:
    """Accuracy table, gains over the best baseline and the paper's claims."""
    import pandas as pd

    from fedgame.analysis.stats import Rule, paired_difference, t_interval

    df = pd.DataFrame(report.rows).sort_values("seed")
    s_pct = float(report.args.similarity)
    paper = TABLE_IV.get(s_pct)

    def acc(budget: str, variant: str) -> list[float]:
        sel = df[(df.budget == budget) & (df.variant == variant)]
        return list(100 * sel["accuracy"])

    def gain(budget: str, baseline: str) -> Any:
        return paired_difference(acc(budget, "privacy-aware"), acc(budget, baseline))

    def best_baseline(budget: str) -> str:
        means = {v: t_interval(acc(budget, v)).mean for v in VARIANTS[1:]}
        return max(means, key=lambda v: means[v])

    rows = []
    for budget in BUDGETS:
        cells = [t_interval(acc(budget, v)).format() for v in VARIANTS]
        best = best_baseline(budget)
        rows.append([budget, *cells, f"{gain(budget, best).format()} (vs {best})"])
    report.table(
        "accuracy",
        "Final test accuracy % (mean of the last 5 rounds), mean ± 95% CI over seeds",
        [
            f"ε budgets ({dp_kind})" if dp_kind else "budgets",
            *VARIANTS,
            "privacy-aware − best baseline",
        ],
        rows,
    )
    above0 = Rule("above", 0.0)
    u01 = "eps ~ U(0, 1)"
    g_u = gain(u01, "unbiased")
    best = best_baseline(u01)
    g_best = gain(u01, best)
    table = f"Table IV, F-MNIST, s = {s_pct:g}"
    report.claim(
        "u01_vs_unbiased",
        paper="001",
        claim="privacy-aware above unbiased selection, ε ~ U(0, 1)",
        paper_value=f"{paper[0]:.2f} vs {paper[1]:.2f} (+{paper[0] - paper[1]:.1f} pts; {table})"
        if paper
        else "above unbiased at every s (Tables III-IV)",
        measured=f"+{g_u.format(seeds=True)} pts" if g_u.mean >= 0 else g_u.format(seeds=True),
        verdict=above0.verdict(g_u),
        rule=above0,
        why_not={v: "the gain is within the seed spread" for v in ("no", "inconclusive")},
    )
    target = (paper[0] - max(paper[1:])) if paper else 38.53
    size_rule = Rule("magnitude", round(target, 2))
    report.claim(
        "u01_gain_size",
        paper="001",
        claim=f"gain over the best baseline about {target:.1f} pts, ε ~ U(0, 1)",
        paper_value=f"+{target:.2f} pts ({table})" if paper else "+38.53 pts (Table IV, s = 30)",
        measured=f"{g_best.format(seeds=True)} pts vs {best}",
        verdict=size_rule.verdict(g_best),
        rule=size_rule,
        why_not="clients hold about 200 samples here, the paper's about 600 (σ_k ∝ 1/|M_k| at "
        "small ε): in the closest setting (N 100, B 128, full 60k, ηD 1e6) privacy-aware reaches "
        "52.5 % (paper 54.8) but unbiased 30.0 % (paper 16.3; 18 to 46 % over the seeds), a gain "
        "of +22.4 ± 13.1 pts (5 seeds, privacy_aware_ablation) below 38.5; on seeds 0-2 the gain "
        "is +29.1 pts with logistic regression, +29.8 ± 18.4 with an MLP 784-32-10 (25,450 "
        "parameters, about the paper's 26k-parameter CNN) and +24.0 ± 12.3 with a CNN of that "
        "size (28,938 parameters): the model family does not change it; ηD, N, B, T, s, the "
        "model or the training set alone give +7.5 to +22.6 pts",
    )
    for case, paper_gain, key in (
        ("Fig. 6 case 1", "≈ 10", "case1"),
        ("Fig. 6 case 2", "≈ 4", "case2"),
    ):
        best = best_baseline(case)
        g = gain(case, best)
        same = acc(case, "privacy-aware") == acc(case, "unbiased")
        why = (
            "privacy-aware = unbiased on every seed: with every budget large, Problem 1 returns "
            f"p^u at ηD = {report.args.eta_d:g}, below ηD* (1.3e4 to 1.8e4) for these budgets; "
            "above it the gain stays within noise (ηD 1e5: −0.1 ± 3.0, 1e6: +0.5 ± 3.9 pts, 3 "
            "seeds; privacy_aware_ablation): with every ε above 1.4 the noise is too small "
            "for the selection to matter for logistic regression (the paper's 4 pts: CIFAR-10)"
            if same
            else f"{best} is as good as or better than the privacy-aware probabilities here"
        )
        report.claim(
            f"{key}_gain",
            paper="001",
            claim=f"privacy-aware above the best baseline, {case}",
            paper_value=f"gain {paper_gain} pts (CIFAR-10, s = 30)",
            measured=f"{g.format(seeds=True)} pts vs {best}",
            verdict=above0.verdict(g),
            rule=above0,
            why_not=why,
        )
    report.not_run(
        "mnist_table3",
        paper="001",
        claim="privacy-aware above both baselines on MNIST at every s (up to +40 pts)",
        paper_value="Table III: 68.71 / 65.12 / 68.50 / 67.63 vs ≤ 35.42 (s = 100 / 70 / 30 / 0)",
        reason="MNIST's IDX files are not on this machine (run with --dataset mnist --data-path "
        "DIR); the Fashion-MNIST rows above are Table IV's",
    )
    report.not_run(
        "batch_size",
        paper="001",
        claim="a larger batch gives higher accuracy, and privacy-aware wins at every batch size",
        paper_value="Fig. 5 (B ∈ {32, 64, 128, 256}, s = 30; curves only)",
        reason="the script runs one batch size (64); privacy_aware_ablation.py's B = 128 row "
        "is the only other",
    )
    report.not_run(
        "cifar10",
        paper="001",
        claim="privacy-aware reaches 32.35 % on CIFAR-10 while the baselines stay below 23 %",
        paper_value="Fig. 4(c), s = 30",
        reason="CIFAR-10 is not implemented; Fig. 6's budget laws run on Fashion-MNIST (rows "
        "case1/case2)",
    )


if __name__ == "__main__":
    _shared.main(main)
