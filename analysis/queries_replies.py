"""Optimal queries and replies (paper 002): Laplace T sweep for b in {1,5,10}, eps in {1,5,10}.

FedSGD-DPC on N = 10 clients holding two classes each (``shards``), logistic regression,
per-sample L1 clip xi1 (30 on 8x8 digits, 300 on 28x28 images, the paper's MNIST value),
Laplace noise of scale 2 xi1 n_i/(d_i eps) sized for each client's round-robin reply count
n_i (``laplace_local``, ``participations: auto``). For every (eps, b, seed) the script runs
one federation per T in the grid and records the final test accuracy and loss, and builds
the planner (``optimal_queries``) once to read its T* from the constants it estimates.

Paper setting (note 002 §5): MNIST 60k, N = 10 x 6,000 two-digit clients, logistic regression
without bias, lr 0.05 "decaying gradually", T in {10, 50, ..., 500}, 10 repetitions.
"""

from __future__ import annotations

import itertools
from typing import Any

import _shared

NAME = "queries_replies"
DEFAULTS = _shared.Defaults(seeds=5, rounds=80, quick_seeds=2, quick_rounds=10)
T_GRID = (2, 5, 10, 20, 40, 80, 160, 320)
EPS, QUICK_EPS = "1,5,10", "5"
BS, QUICK_BS = "1,5,10", "1,10"
PAPER_T_STAR = {1.0: 22, 5.0: 121, 10.0: 244}  # Table I, MNIST, b = 1
#: why a flat curve has no peak, and what the closest setting shows (queries_replies_ablation)
NO_PEAK = (
    "no T is significantly worse than the best: accuracy stays near chance because the clients "
    "hold too little data for the Laplace scale per reply 2ξ1·n_i/(d_i·ε) (0.42 at T = 10, "
    "ε = 1 on digits' d_i ≈ 144); with the paper's d_i = 6,000 (full Fashion-MNIST, "
    "queries_replies_ablation row fm60k, ε = 1) a peak appears at T = 20-40, around the "
    "paper's T* = 22, and the planner's T* = 8.8 ± 4.1 lies below it (verdict no there; at "
    "ε = 5 and 10 on the same data T* = 70.6 and 151.1 land at the best T, 80 and 160, rows "
    "fm60k_eps and fm60k_eps10, 3 seeds)"
)
#: the b = 5 gaps of queries_replies_ablation
B1_SPREAD = (
    " (the sign is the paper's at every ε, but with 5 seeds the gap is within the seed spread "
    "below ε = 10, also with T up to 320 and on 6k Fashion-MNIST: b = 5 − b = 1 = −2.1 ± 4.1 / "
    "−9.0 ± 10.5 pts at ε = 1 / 5 on digits, −3.7 ± 6.5 at ε = 5 on Fashion-MNIST, "
    "queries_replies_ablation)"
)


#: the settings reproduce.py reruns the claims on besides the default (other seeds; label
#: skew by a Dirichlet split instead of two classes per client, on other seeds again)
HOLDOUTS = (
    _shared.Holdout("seeds", "other seeds", ("--first-seed", "12345")),
    _shared.Holdout(
        "alpha",
        "Dirichlet α = 0.3, not two classes per client",
        ("--partition", "dirichlet", "--alpha", "0.3", "--first-seed", "777"),
    ),
)


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="digits")
    _shared.add_first_seed(p)
    p.add_argument(
        "--partition",
        choices=["shards", "dirichlet"],
        default="shards",
        help="shards: two classes per client, the paper's (default); dirichlet: Dir(--alpha)",
    )
    p.add_argument("--alpha", type=float, default=0.3, help="Dirichlet α (default 0.3)")
    p.add_argument("--eps", help=f"comma-separated eps grid (default {EPS}; --quick {QUICK_EPS})")
    p.add_argument("--b", help=f"comma-separated b grid (default {BS}; --quick {QUICK_BS})")
    p.add_argument("--clip", type=float, help="L1 clip xi1 (default 30 on digits, else 300)")
    return p


def t_grid(rounds: int) -> list[int]:
    """The T values of the sweep: the grid's values below ``rounds``, then ``rounds``."""
    return sorted({t for t in T_GRID if t < rounds} | {rounds})


def scenario(base: dict, job: dict[str, Any], selection: dict[str, Any], rounds: int) -> dict:
    d = {**base, "seed": job["seed"], "rounds": rounds}
    d["population"] = {**base["population"], "budget": {"epsilon": job["eps"], "delta": 1e-5}}
    d["data"] = {**base["data"], "dataset": job["dataset"]}
    if job.get("partition"):
        d["data"]["partition"] = job["partition"]
    d["selection"] = selection
    d["privacy"] = {**base["privacy"], "clip": job["clip"], "participations": "auto"}
    return _shared.apply_sets(d, job["overrides"])


#: a run's labels (jobs that share a scenario share its run, each with its own labels)
KEYS = ("eps", "b", "t", "seed")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Final accuracy and loss of one (eps, b, T, seed) run; T = 0 builds the planner only."""
    keys = {k: job[k] for k in KEYS}
    if job["t"] == 0:
        import torch

        from fedgame.model import FedGameModel
        from fedgame.scenario.load import validate

        torch.set_num_threads(1)
        model = FedGameModel(validate(job["scenario"]))
        planner = model.world.components.selection
        c = planner.constants
        mu = c.get("strong_convexity", 0.0)
        gamma = 2 * c["smoothness"] / mu if mu > 0 else float("nan")
        size = float(model.table.dataset_size.mean())
        plan = {"t_star": float(planner.t_star), "gamma": gamma, "client_size": size}
        return keys | plan | {"accuracy": float("nan"), "loss": float("nan")}
    rounds = _shared.simulate(job["scenario"]).rounds
    final = rounds.iloc[-1]
    acc, loss = float(final["test_accuracy"]), float(final["test_loss"])
    nan = float("nan")
    return keys | {"t_star": nan, "gamma": nan, "client_size": nan, "accuracy": acc, "loss": loss}


def peak_region(acc_by_t: dict[int, list[float]]) -> tuple[int, list[int]]:
    """The T with the highest mean accuracy, and every T not significantly below it (paired)."""
    from fedgame.analysis.stats import above, paired_difference, t_interval

    means = {t: t_interval(a).mean for t, a in acc_by_t.items()}
    best = max(means, key=lambda t: means[t])
    region = [
        t
        for t, a in acc_by_t.items()
        if t == best or above(paired_difference(acc_by_t[best], a)) != "yes"
    ]
    return best, region


PEAK_RULE = (
    "a peak is a best T (highest mean) such that accuracy is significantly lower (95% paired "
    "t-interval wholly above 0) at a smaller and at a larger T of the grid; the near-best "
    "region is every T not significantly below the best. yes when there is a peak and the "
    "planner's mean T* lies within ×2 of a T of the region, no when there is a peak and T* "
    "lies more than ×2 from all of them, inconclusive when there is no peak (the region "
    "reaches an end of the grid: a plateau, or the best T at the grid's edge)"
)


def peak_verdict(best: int, region: list[int], ts: list[int], star: float) -> str:
    """Claim "accuracy peaks near T* (within ×2)" under ``PEAK_RULE``: inconclusive unless
    the near-best region is bounded on both sides within the grid."""
    if min(region) == ts[0] or max(region) == ts[-1]:
        return "inconclusive"  # a plateau to an end of the grid, or no fall at all: no peak
    if any(t / 2 <= star <= 2 * t for t in region):
        return "yes"
    return "no"


def plateau(lo: int, hi: int, ts: list[int]) -> str:
    """Why a near-best region from T = ``lo`` to ``hi`` that reaches an end of ``ts`` is no
    peak."""
    end, t, side = ("largest", hi, "right") if hi == ts[-1] else ("smallest", lo, "left")
    return (
        f"no peak on the grid: every T from {lo} to {hi} is as good as the best (not "
        f"significantly below it), the grid's {end} T = {t} included, so accuracy does not "
        f"fall on the {side} within T = {ts[0]}-{ts[-1]} (a plateau or a best T at the edge) "
        "and there is no peak for T* to be near"
    )


def main() -> None:
    import yaml

    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    eps_grid = [float(e) for e in (args.eps or (QUICK_EPS if args.quick else EPS)).split(",")]
    b_grid = [int(b) for b in (args.b or (QUICK_BS if args.quick else BS)).split(",")]
    clip = args.clip or (30.0 if args.dataset == "digits" else 300.0)
    dataset = _shared.dataset_spec(args)
    base = yaml.safe_load((_shared.ROOT / "scenarios" / f"{NAME}.yaml").read_text())
    ts = t_grid(args.rounds)
    partition = (
        {"kind": "dirichlet", "alpha": args.alpha} if args.partition == "dirichlet" else None
    )
    jobs = []
    for eps in eps_grid:
        for b in b_grid:
            for seed in _shared.seed_list(args):
                job = {"eps": eps, "b": b, "seed": seed, "dataset": dataset, "clip": clip}
                job["partition"] = partition
                job["overrides"] = args.overrides
                plan = {"kind": "optimal_queries", "clip_l1": clip, "b": b}
                jobs.append(job | {"t": 0, "scenario": scenario(base, job, plan, 1000)})
                for t in ts:
                    rr = {"kind": "round_robin", "b": b}
                    jobs.append(job | {"t": t, "scenario": scenario(base, job, rr, t)})
    _shared.validate_all(j["scenario"] for j in jobs)
    print(
        f"{NAME}: data={dataset} N=10 clip={clip:g} T={ts} eps={eps_grid} b={b_grid} "
        f"{_shared.seeds_text(args)} partition={partition or 'shards'}: {len(jobs)} runs",
        flush=True,
    )
    report = _shared.Report(NAME, args, holdouts=HOLDOUTS)
    split = f"Dirichlet α = {args.alpha:g}" if partition else "two classes per client"
    report.setting = f"{dataset['kind']}, N = 10, {split}, ξ1 = {clip:g}, T up to {ts[-1]}"
    report.rows = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=KEYS
    )
    from fedgame.analysis.guarantee import epsilon_kind

    kind = epsilon_kind(next(j["scenario"]["privacy"] for j in jobs if j["t"] > 0))
    summarise(report, eps_grid, b_grid, ts, kind)
    report.write()


def summarise(
    report: _shared.Report,
    eps_grid: list[float],
    b_grid: list[int],
    ts: list[int],
    dp_kind: str = "",
) -> None:
    """Accuracy by T with CIs, planner T*, the figure and the paper's claims."""
    import pandas as pd

    from fedgame.analysis.stats import Rule, all_of, paired_difference, t_interval

    above0 = Rule("above", 0.0)

    df = pd.DataFrame(report.rows).sort_values("seed")
    runs = df[df.t > 0]

    def acc(eps: float, b: int, t: int) -> list[float]:
        sel = runs[(runs.eps == eps) & (runs.b == b) & (runs.t == t)]
        return list(100 * sel["accuracy"])

    def t_star(eps: float, b: int) -> Any:
        return t_interval(df[(df.t == 0) & (df.eps == eps) & (df.b == b)]["t_star"])

    def peak(eps: float, b: int) -> int:
        return peak_region({t: acc(eps, b, t) for t in ts})[0]

    rows = []
    for eps in eps_grid:
        for b in b_grid:
            best = peak(eps, b)
            cells = []
            for t in ts:
                text = t_interval(acc(eps, b, t)).format()
                cells.append(f"**{text}**" if t == best else text)
            rows.append([f"{eps:g}", b, *cells, t_star(eps, b).format()])
    report.table(
        "accuracy",
        "Final test accuracy % by T (round robin, Laplace), mean ± 95% CI; T* from the planner",
        [f"ε ({dp_kind})" if dp_kind else "eps", "b", *[f"T={t}" for t in ts], "T* (planner)"],
        rows,
    )
    figure(report, df, eps_grid, b_grid, ts)

    b0 = min(b_grid)
    for eps in eps_grid:
        best, region = peak_region({t: acc(eps, b0, t) for t in ts})
        star = t_star(eps, b0).mean
        verdict = peak_verdict(best, region, ts, star)
        lo, hi = min(region), max(region)
        report.claim(
            f"t_star_near_peak_eps_{eps:g}",
            paper="002",
            claim=f"accuracy peaks in T near the planner's T* (within ×2), ε = {eps:g}, b = {b0}",
            paper_value=f"T* = {PAPER_T_STAR.get(eps, '–')} (Table I, MNIST); (b*, T*) has the "
            "lowest final loss (Figs. 1-2)",
            measured=f"best T = {best}; T not significantly below it: "
            f"{', '.join(map(str, region))}; T* = {star:.1f}",
            verdict=verdict,
            rule=Rule("peak", custom=PEAK_RULE),
            why_not={
                "no": "T* is more than a factor 2 away from every T as good as the best; in "
                "queries_replies_ablation it lies below: accuracy peaks where the Laplace scale "
                "per reply 2ξ1·n_i/(d_i·ε) is 0.3-0.5, T* stops where it is 0.02-0.14 (on "
                "6k Fashion-MNIST and at ε = 1 on the full set T* is 0.02-0.23× the best T; "
                "at ε = 5 and 10 on the full set 0.88-0.94×)",
                "inconclusive": NO_PEAK if len(region) == len(ts) else plateau(lo, hi, ts),
            },
        )
    if len(b_grid) > 1:
        verdicts, parts = [], []
        for eps in eps_grid:
            others = [b for b in b_grid if b != b0]
            best_b0 = acc(eps, b0, peak(eps, b0))
            rival = max(others, key=lambda b: t_interval(acc(eps, b, peak(eps, b))).mean)
            d = paired_difference(best_b0, acc(eps, rival, peak(eps, rival)))
            verdicts.append(above0.verdict(d))
            parts.append(f"ε={eps:g}: {d.format()} vs b={rival}")
        report.claim(
            "b1_best",
            paper="002",
            claim=f"b = {b0} best under Laplace (each b at its best T)",
            paper_value="b* = 1 for Laplace (Figs. 3-4; Table I b*(T=50) = 1 / 3 / 5)",
            measured="; ".join(parts) + f" pts (n={report.args.seeds})",
            verdict=all_of(verdicts),
            rule=above0.every("ε (b = 1 at its best T − the best other b at its best T)"),
            why_not={
                v: f"b = {b0} is not significantly better at every ε: "
                + "; ".join(f"ε={e:g}: {x}" for e, x in zip(eps_grid, verdicts))
                + B1_SPREAD
                for v in ("no", "partly", "inconclusive")
            },
        )
    regions = [peak_region({t: acc(eps, b0, t) for t in ts}) for eps in eps_grid]
    peaks = [best for best, _ in regions]
    edges = [min(region) for _, region in regions]
    stars = [t_star(eps, b0).mean for eps in eps_grid]
    pairs = list(itertools.pairwise(edges)) + list(itertools.pairwise(stars))
    if len(eps_grid) < 2:
        moves = "inconclusive"
    elif any(b < a for a, b in pairs):
        moves = "no"
    elif all(b > a for a, b in itertools.pairwise(stars)) and edges[-1] > edges[0]:
        moves = "yes"
    else:
        moves = "inconclusive"
    report.claim(
        "moves_with_eps",
        paper="002",
        claim="T* and the accuracy peak move right as ε grows",
        paper_value="T* ∝ ε roughly: 22 → 121 → 244 (Table I, b = 1)",
        measured="smallest near-best T = "
        + " / ".join(map(str, edges))
        + " (best T = "
        + " / ".join(map(str, peaks))
        + "); T* = "
        + " / ".join(f"{s:.1f}" for s in stars),
        verdict=moves,
        rule=Rule(
            "order",
            custom="yes when the planner's mean T* rises with ε at every step and the smallest "
            "T not significantly below the best (the left edge of the near-best region, "
            "robust to plateaus) never falls and rises overall; no when either falls at a "
            "step; else inconclusive",
        ),
        why_not={
            "no": "the left edge of the near-best region or T* falls as ε grows",
            "inconclusive": "the left edge of the near-best region or T* stays put between "
            "two ε of the grid",
        },
    )
    if len(eps_grid) > 1:
        lo, hi = min(eps_grid), max(eps_grid)
        d = paired_difference(acc(hi, b0, peak(hi, b0)), acc(lo, b0, peak(lo, b0)))
        report.claim(
            "worse_at_small_eps",
            paper="002",
            claim=f"a smaller ε is worse (b = {b0}, each ε at its best T; ε = {hi:g} vs {lo:g})",
            paper_value="smaller ε is worse in every case (Figs. 5-6)",
            measured=f"{d.format(seeds=True)} pts",
            verdict=above0.verdict(d),
            rule=above0,
            why_not={v: "the difference is within the seed spread" for v in ("no", "inconclusive")},
        )
    report.not_run(
        "gaussian",
        paper="002",
        claim="under the Gaussian mechanism b* = 10 and a larger b gives higher accuracy",
        paper_value="Figs. 1-4 (b), loss minimised at b = 10, T = 100",
        reason="the script runs the Laplace mechanism only (the planner's Gaussian closed "
        "forms are implemented, no Gaussian sweep is)",
    )
    report.not_run(
        "practicality",
        paper="002",
        claim="accuracy drops with smaller ε and a smaller share of each client's data",
        paper_value="Figs. 7-8 (ε 1-10, data share 10-100 %)",
        reason="the script uses every client's whole dataset; no data-share sweep",
    )
    report.not_run(
        "femnist",
        paper="002",
        claim="the same T*, b* behaviour on FEMNIST",
        paper_value="Table I FEMNIST row: T* = 11 / 70 / 145",
        reason="FEMNIST is not implemented",
    )


def figure(
    report: _shared.Report, df: Any, eps_grid: list[float], b_grid: list[int], ts: list[int]
) -> None:
    """Accuracy vs T (b = min grid) with 95% bands and the planner's mean T* per ε."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedgame.analysis.stats import t_interval

    b0 = min(b_grid)
    top = 0.0
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for i, eps in enumerate(eps_grid):
        color = f"C{i}"
        sel = df[(df.eps == eps) & (df.b == b0)]
        ivs = [t_interval(100 * sel[sel.t == t]["accuracy"]) for t in ts]
        mean = [iv.mean for iv in ivs]
        half = [0.0 if not iv.defined else iv.half_width for iv in ivs]
        ax.plot(ts, mean, "o-", color=color, label=f"ε = {eps:g}")
        top = max(top, *[m + h for m, h in zip(mean, half)])
        ax.fill_between(
            ts,
            [m - h for m, h in zip(mean, half)],
            [m + h for m, h in zip(mean, half)],
            color=color,
            alpha=0.15,
        )
        star = t_interval(sel[sel.t == 0]["t_star"]).mean
        if star > 0:
            ax.axvline(star, color=color, ls="--", lw=1)
    ax.set_xscale("log")
    ax.set_xticks(ts, [str(t) for t in ts])
    ax.minorticks_off()
    ax.set_ylim(0, min(100.0, 10 * (top // 10 + 1)))
    ax.set(
        xlabel="T (queries); dashed: planner T*",
        ylabel="final test accuracy %",
        title=f"Round robin b = {b0}, Laplace; mean and 95% CI over {report.args.seeds} seeds",
    )
    ax.legend()
    fig.tight_layout()
    out = report.args.out / "figures"
    out.mkdir(parents=True, exist_ok=True)
    fig.savefig(out / f"{NAME}_accuracy_vs_T.png", dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    _shared.main(main)
