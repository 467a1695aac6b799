"""Does exploring help a leader that does not know ν? Server-cost regret over prior errors.

A QI-DPFL leader with ``active_set: optimal`` and a belief about the clients' privacy values
(``incentive.belief``, ours) plays 30 clients (ν ~ U[0.3, 1.5], median 0.9; Dirichlet(0.5)
data sizes, so the optimal set is not just the cheapest clients) for R rounds. Its prior
median is the true median times a factor (0.25× to 4×, sd 1 on log ν). For each seed the
same population is also played by the leader that knows ν; the **regret** of a run is its
server cost summed over the rounds over the knowing leader's, minus 1 (in %: 0 is as cheap
as knowing ν; negative happens, since above 12 clients the optimal set is a local search).
Greedy is ``belief.explore: 0``; the explorer is ``belief.explore: κ`` (``--kappa``), the
rule of :class:`fedgame.mechanisms.incentive.belief.BeliefLeader`. Paired per seed.

    python analysis/belief_explore.py
"""

from __future__ import annotations

from typing import Any

import _shared

NAME = "belief_explore"
DEFAULTS = _shared.Defaults(seeds=10, rounds=10, quick_seeds=2, quick_rounds=3)
#: prior median / true median (U[0.3, 1.5] has median 0.9)
FACTORS = (0.25, 0.5, 1.0, 2.0, 4.0)
QUICK_FACTORS = (0.25, 1.0, 4.0)
TRUE_MEDIAN = 0.9
BASE: dict[str, Any] = {
    "name": NAME,
    "population": {
        "clients": 30,
        "privacy_value": {"dist": "uniform", "low": 0.3, "high": 1.5},
        "budget": {"epsilon": 1.0e6, "delta": 1e-5},  # never binding: a stationary market
        "straggle_prob": 0.0,
    },
    "data": {"dataset": {"kind": "digits"}, "partition": {"kind": "dirichlet", "alpha": 0.5}},
    "model": {"kind": "logreg"},
    "training": {"local_steps": 1, "batch_size": 16, "lr": 0.1},
    "incentive": {"kind": "qi_dpfl", "lam": 0.01, "active_set": "optimal"},
    "policy": {"kind": "best_response"},
    "selection": {"kind": "all"},
    "privacy": {"kind": "zcdp_gaussian", "clip": 1.0},
    "network": {"faults": {"kind": "independent", "link_failure": 0.0}},
}


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS)
    p.add_argument(
        "--kappa", type=float, default=0.5, help="the explorer's belief.explore (default 0.5)"
    )
    return p


def scenario(seed: int, rounds: int, factor: float | None, kappa: float) -> dict[str, Any]:
    """The market of ``seed``; ``factor`` None: the leader knows ν."""
    data = {**BASE, "seed": seed, "rounds": rounds, "incentive": dict(BASE["incentive"])}
    if factor is not None:
        prior = {"kind": "lognormal", "median": TRUE_MEDIAN * factor, "sd": 1.0}
        data["incentive"]["belief"] = {"prior": prior, "explore": kappa}
    return data


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Server cost per round and players admitted per round of one run."""
    rounds = _shared.simulate(job["scenario"]).rounds
    return {
        "server_cost": rounds["server_cost"].tolist(),
        "players": rounds["players"].tolist(),
    }


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    from fedgame.analysis.stats import paired_difference, t_interval

    report = _shared.Report(NAME, args)
    factors = QUICK_FACTORS if args.quick else FACTORS
    arms = {"greedy": 0.0, "explore": args.kappa}
    jobs = []
    for seed in range(args.seeds):
        jobs.append({"seed": seed, "factor": None, "arm": "known"})
        jobs += [{"seed": seed, "factor": f, "arm": arm} for f in factors for arm in arms]
    for job in jobs:
        kappa = arms.get(job["arm"], 0.0)
        data = scenario(job["seed"], args.rounds, job["factor"], kappa)
        job["scenario"] = _shared.apply_sets(data, args.overrides)
    _shared.validate_all(j["scenario"] for j in jobs)
    results = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=("seed", "factor", "arm")
    )
    known = {r["seed"]: sum(r["server_cost"]) for r in results if r["arm"] == "known"}
    rows = []
    for r in results:
        cost = sum(r["server_cost"])
        regret = 100.0 * (cost / known[r["seed"]] - 1.0) if r["arm"] != "known" else 0.0
        rows.append(
            {
                "seed": r["seed"],
                "factor": r["factor"],
                "arm": r["arm"],
                "server_cost": cost,
                "regret_pct": regret,
                "players_mean": sum(r["players"]) / len(r["players"]),
            }
        )
    report.rows = rows
    table = []
    for f in factors:

        def regrets(arm: str, f: float = f) -> list[float]:
            chosen = [r for r in rows if r["factor"] == f and r["arm"] == arm]
            return [r["regret_pct"] for r in sorted(chosen, key=lambda r: r["seed"])]

        greedy, explore = regrets("greedy"), regrets("explore")
        diff = paired_difference(explore, greedy)
        table.append(
            [
                f"{f:g}×",
                t_interval(greedy).format(1),
                t_interval(explore).format(1),
                diff.format(1),
            ]
        )
    report.table(
        "regret",
        f"Server-cost regret (%) against the leader that knows ν, κ = {args.kappa:g}",
        [
            "prior median / true median",
            "greedy (explore 0) regret %",
            f"explore {args.kappa:g} regret %",
            "explore − greedy (pts, paired)",
        ],
        table,
    )
    report.write()


if __name__ == "__main__":
    _shared.main(main)
