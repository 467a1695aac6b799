"""Which incentive family buys accuracy cheapest, pays fairly, and can be manipulated?

Six leaders from five families play the same worlds: the QI-DPFL **contest** (Theorem 2's
reward, best-responding followers), a **posted price** per unit ρ (price-taking sellers), a
truthful **threshold auction** and a pay-as-bid **first-price auction** (Hedge bidders that
learn their bids), a screening **contract** menu (self-selecting clients) and **Shapley**
contribution payments (a fixed reward split by each delivered client's estimated Shapley
value). Every family buys zCDP ρ, which sets the client's noise (``zcdp_gaussian``).

Worlds: a thin (``--thin`` clients) and a thick (``--thick``) market; no stragglers and
stragglers (probability ``--straggle``); complete information (the leader knows each ν) and
incomplete (a log-normal belief, median 1, sd 1 on log ν, for the two families whose leader
uses ν: contest and posted price; auctions, contracts and Shapley payments do not read ν,
so their two information worlds are one run). Population: ν ~ U[0.5, 1.5], ε budgets ~
U[8, 16] at δ = 1e-5, Dirichlet(1) digits, logistic regression. Demand is matched where
a family fixes it: the posted price buys at most ρ = 0.05 per seller a round, the auctions
buy ρ = 0.05 from each of half the market's clients (the lowest bids), Shapley payments'
clients take part at ρ = 0.05 whatever they are paid (a fixed reward R = 1 a round); the
contest (``budgets: cap`` with budget-aware followers: the paper's leader ignores budgets
and its followers run dry in a few rounds) and the contract choose ρ themselves. Economics
columns are those of ``docs/economics.md`` (money units; ρ units for privacy bought).

Payment fairness (1 − ½·L1 distance between the payment shares and the clipped Shapley shares
of each round, averaged over the rounds that paid someone) needs a Shapley estimate every
round: the thin market runs the audit (``game.audit_contributions``) under every family; the
thick market does not (its cells read –).

Per run: final test accuracy, the server's total payments, welfare summed over rounds,
rounds with an individual-rationality violation, the largest ex-post regret of truthful play
(deviation search), accuracy per unit of payment, the mean ε spent, and the payments made
until the test accuracy first reaches ``--target``. Mean ± 95% t-interval over seeds.

    python analysis/mechanisms.py
"""

from __future__ import annotations

import math
from typing import Any

import _shared

NAME = "mechanisms"
DEFAULTS = _shared.Defaults(seeds=5, rounds=20, quick_seeds=2, quick_rounds=3)
#: the economic parameters every leader shares (QI-DPFL Eq. 15's server cost)
ECON = {"phi": 1.0, "gamma": 0.5, "discount": 0.9429, "lam": 0.05}
BELIEF = {"prior": {"kind": "lognormal", "median": 1.0, "sd": 1.0}}
#: arm -> (incentive, policy, whether the leader reads ν)
ARMS: dict[str, tuple[dict[str, Any], dict[str, Any], bool]] = {
    "contest": ({"kind": "qi_dpfl", "budgets": "cap", **ECON}, {"kind": "budget_aware"}, True),
    "posted price": (
        {"kind": "optimal_price", "cap": 0.05, **ECON},
        {"kind": "seller"},
        True,
    ),
    "threshold auction": (
        {"kind": "threshold_auction", "rho": 0.05, "reserve": 3.0, **ECON},
        {"kind": "hedge_bidder"},
        False,
    ),
    "first-price auction": (
        {"kind": "first_price_auction", "rho": 0.05, "reserve": 3.0, **ECON},
        {"kind": "hedge_bidder"},
        False,
    ),
    "contract": ({"kind": "contract", "bins": 3, **ECON}, {"kind": "self_select"}, False),
    "shapley": (
        {"kind": "shapley", "reward": 1.0, "estimator": "auto", "exact_max": 8},
        {"kind": "fixed", "rho": 0.05},
        False,
    ),
}
#: the auctions buy ``winners`` = half the market's clients, ρ = 0.05 each (the posted price's cap)
AUCTIONS = ("threshold_auction", "first_price_auction")
#: markets up to this many clients get the Shapley audit (``game.audit_contributions``)
AUDIT_MAX = 10


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS)
    p.add_argument("--thin", type=int, default=10, help="clients of the thin market (10)")
    p.add_argument("--thick", type=int, default=30, help="clients of the thick market (30)")
    p.add_argument("--straggle", type=float, default=0.2, help="straggle probability (0.2)")
    p.add_argument(
        "--target", type=float, default=0.8, help="test accuracy whose cost is reported (0.8)"
    )
    return p


def scenario(
    seed: int, rounds: int, arm: str, clients: int, straggle: float, informed: bool
) -> dict[str, Any]:
    """The world (``clients``, ``straggle``, ``informed``) under ``arm``'s leader."""
    incentive, policy, reads_nu = ARMS[arm]
    incentive = dict(incentive)
    if incentive["kind"] in AUCTIONS:  # half the market wins, as many units as the price caps
        incentive["winners"] = max(1, clients // 2)
    if reads_nu and not informed:
        incentive["belief"] = BELIEF
    return {
        "name": f"{NAME}-{arm}".replace(" ", "_"),
        "seed": seed,
        "rounds": rounds,
        "population": {
            "clients": clients,
            "privacy_value": {"dist": "uniform", "low": 0.5, "high": 1.5},
            "budget": {"epsilon": {"dist": "uniform", "low": 8.0, "high": 16.0}, "delta": 1e-5},
            "straggle_prob": straggle,
        },
        "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "dirichlet", "alpha": 1.0}},
        "model": {"kind": "logreg"},
        "training": {"mode": "local_sgd", "local_steps": 3, "batch_size": 32, "lr": 0.2},
        "incentive": incentive,
        "policy": policy,
        "selection": {"kind": "all"},
        "privacy": {"kind": "zcdp_gaussian", "clip": 1.0},
        "aggregation": {"kind": "fedavg"},
        "network": {"topology": {"kind": "star"}, "faults": {"kind": "independent"}},
        # payment fairness needs each round's Shapley estimate: audited in the thin market
        # (exact up to 8 delivered clients, else GTG-Shapley), where it is cheap
        "game": {"audit_contributions": clients <= AUDIT_MAX},
    }


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """The per-round columns the tables need, of one run."""
    result = _shared.simulate(job["scenario"])
    rounds = result.rounds
    keep = (
        "test_accuracy",
        "econ_server_cost",
        "econ_welfare",
        "econ_ir_violations",
        "econ_regret_max",
        "econ_client_surplus",
        "econ_sellers",
        "econ_fairness",
    )
    out: dict[str, Any] = {c: [float(v) for v in rounds[c]] for c in keep}
    out["epsilon_spent"] = float(rounds["epsilon_spent_mean"].iloc[-1])
    return out


def cost_to(accuracy: list[float], cost: list[float], target: float) -> float:
    """Payments made up to and including the first round whose accuracy reaches ``target``
    (NaN when no round does)."""
    total = 0.0
    for acc, paid in zip(accuracy, cost, strict=True):
        total += paid
        if acc >= target:
            return total
    return math.nan


def summarise(r: dict[str, Any], target: float) -> dict[str, float]:
    """One run's figures (see the module doc)."""
    paid = sum(r["econ_server_cost"])
    final = r["test_accuracy"][-1]
    return {
        "accuracy": final,
        "payments": paid,
        "welfare": sum(r["econ_welfare"]),
        "ir_rounds": float(sum(v > 0 for v in r["econ_ir_violations"])),
        "regret": max(r["econ_regret_max"]),
        "acc_per_pay": final / paid if paid > 0 else math.nan,
        "epsilon": r["epsilon_spent"],
        "cost_to_target": cost_to(r["test_accuracy"], r["econ_server_cost"], target),
        "surplus": sum(r["econ_client_surplus"]),
        "fairness": nanmean(r["econ_fairness"]),
    }


def nanmean(values: list[float]) -> float:
    """Mean of the finite values (NaN when there is none: e.g. no audit, nobody paid)."""
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    from fedgame.analysis.stats import t_interval

    report = _shared.Report(NAME, args)
    thin, thick = args.thin, args.thick
    if args.quick:  # smaller markets: a smoke run of every world
        thin, thick = min(thin, 6), min(thick, 10)
    report.setting = f"digits, logreg, ν ~ U[0.5, 1.5], ε ~ U[8, 16]; {thin} / {thick} clients"
    worlds = [
        (market, clients, straggle, informed)
        for market, clients in (("thin", thin), ("thick", thick))
        for straggle in (0.0, args.straggle)
        for informed in (True, False)
    ]
    jobs = []
    for seed in range(args.seeds):
        for market, clients, straggle, informed in worlds:
            for arm in ARMS:
                data = scenario(seed, args.rounds, arm, clients, straggle, informed)
                jobs.append(
                    {
                        "seed": seed,
                        "arm": arm,
                        "market": market,
                        "straggle": straggle,
                        "informed": informed,
                        "scenario": _shared.apply_sets(data, args.overrides),
                    }
                )
    _shared.validate_all(j["scenario"] for j in jobs)
    results = _shared.run_kept(
        run_one,
        jobs,
        args.out,
        args.workers,
        fresh=args.fresh,
        tags=("seed", "arm", "market", "straggle", "informed"),
    )
    rows = [
        {k: r[k] for k in ("seed", "arm", "market", "straggle", "informed")}
        | summarise(r, args.target)
        for r in results
    ]
    report.rows = rows

    def cell(arm: str, world: tuple[Any, ...], key: str, digits: int) -> str:
        market, _, straggle, informed = world
        values = [
            r[key]
            for r in rows
            if (r["arm"], r["market"], r["straggle"], r["informed"])
            == (arm, market, straggle, informed)
        ]
        finite = [v for v in values if math.isfinite(v)]
        if not finite:
            return "not reached" if key == "cost_to_target" else "–"
        text = t_interval(finite).format(digits) if len(finite) > 1 else f"{finite[0]:.{digits}f}"
        missing = len(values) - len(finite)
        return f"{text} ({missing} of {len(values)} not reached)" if missing else text

    for market, clients, straggle, informed in worlds:
        world = (market, clients, straggle, informed)
        info = "complete" if informed else "incomplete"
        key = f"{market}-{'stragglers' if straggle else 'reliable'}-{info}"
        table = [
            [
                arm,
                cell(arm, world, "accuracy", 3),
                cell(arm, world, "payments", 2),
                cell(arm, world, "cost_to_target", 2),
                cell(arm, world, "acc_per_pay", 3),
                cell(arm, world, "welfare", 1),
                cell(arm, world, "surplus", 2),
                cell(arm, world, "ir_rounds", 1),
                cell(arm, world, "regret", 3),
                cell(arm, world, "fairness", 2),
                cell(arm, world, "epsilon", 2),
            ]
            for arm in ARMS
        ]
        report.table(
            key,
            f"{market} market ({clients} clients), straggle {straggle:g}, {info} information",
            [
                "family",
                "final accuracy",
                "payments",
                f"payments to accuracy {args.target:g}",
                "accuracy per payment",
                "welfare",
                "client surplus",
                "rounds with IR violations",
                "max regret of truthful play",
                "payment fairness",
                "mean ε spent",
            ],
            table,
        )
    figures = args.out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    print(f"figure: {figure(rows, worlds, figures / f'{NAME}.png')}")
    report.write()


def figure(rows: list[dict[str, Any]], worlds: list[tuple[Any, ...]], path: Any) -> Any:
    """One panel per world: each family's final accuracy against its payments (mean ± 95% CI
    over seeds, both axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedgame.analysis.stats import t_interval

    cols = (len(worlds) + 1) // 2
    fig, axes = plt.subplots(
        2 if len(worlds) > 1 else 1, cols, figsize=(max(4.2 * cols, 8.0), 7.6), squeeze=False
    )
    markers = dict(zip(ARMS, "os^vDP"))
    for ax, (market, clients, straggle, informed) in zip(axes.flat, worlds, strict=False):
        for arm in ARMS:
            mine = [
                r
                for r in rows
                if (r["arm"], r["market"], r["straggle"], r["informed"])
                == (arm, market, straggle, informed)
            ]
            if not mine:
                continue
            pay = t_interval([r["payments"] for r in mine])
            acc = t_interval([r["accuracy"] for r in mine])
            ax.errorbar(
                pay.mean,
                acc.mean,
                xerr=0 if math.isnan(pay.half_width) else pay.half_width,
                yerr=0 if math.isnan(acc.half_width) else acc.half_width,
                fmt=markers[arm],
                capsize=3,
                label=arm,
            )
        info = "complete" if informed else "incomplete"
        ax.set_title(f"{market} ({clients}), straggle {straggle:g}, {info}", fontsize=9)
        ax.set_xlabel("payments over the run")
        ax.set_ylabel("final test accuracy")
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(worlds) :]:
        ax.axis("off")
    n = len({r["seed"] for r in rows})
    return _shared.save_figure(
        fig,
        path,
        legend_from=axes[0, 0],
        ncol=3 if len(worlds) < 4 else len(ARMS),
        rect=(0, 0.1 if len(worlds) < 4 else 0.06, 1, 0.95),
        dpi=100,
        title=f"Incentive families: accuracy against payments, mean ± 95% CI over {n} seeds",
    )


if __name__ == "__main__":
    _shared.main(main)
