"""Competition for one client population: monopoly vs duopoly vs four servers (issue 35).

Markets of S = 1, 2, 4 QI-DPFL servers (``market.competition: best_response``: each round
the leaders play iterated best responses on their rewards, the clients' joint play inside;
docs/competition.md) bid for ``scenarios/duopoly.yaml``'s clients and task: ``--clients``
clients (ν ~ U[0.98, 1.02], one (ε, δ) = (30, 1e-5) ledger each), Dirichlet(1) digits,
logistic regression, zCDP Gaussian noise. Symmetric markets: every server ``gamma`` 0.5;
asymmetric: server S0 weighs accuracy more (``--gamma-big``, 0.8: a bigger reward budget),
the others 0.5. Without and with stragglers (``--straggle``). The monopoly (S = 1) is the
same world with one server.

Per run (rounds table, one row per round and server):

* client payments: Σ rewards paid over the run, all servers;
* ε spent: the clients' mean ε spent at the end (one ledger each, every server's releases);
* each owner's final test accuracy, payments, and server cost: Σ over the rounds it bought
  anything of the leader's cost (paper 003 Eq. 15; undefined in a round where nobody
  delivered, so those rounds are counted apart, as "rounds it bought");
* each owner's market share: its mean share of the delivered ρ over the rounds where anything
  was delivered;
* welfare: Σ of the incentive's ``welfare`` column (clients' game utilities Σ(payment − φνρ)
  less the server cost) over rounds and servers;
* HHI: the mean Herfindahl index Σ_s share_s² over the rounds where anything was delivered;
* leaders' equilibrium: the share of rounds whose leaders' best responses converged
  (``leaders_converged``; a one-server round has no rivals and counts as converged).

Mean ± 95% t-interval over seeds. ``--quick`` (a smoke run of every world) shrinks the
market to 8 clients with ε = 60 (budgets do not bind in its 3 rounds) and the leaders'
play to 3 sweeps a round.

    python analysis/competition.py
"""

from __future__ import annotations

import math
from typing import Any

import _shared

NAME = "competition"
DEFAULTS = _shared.Defaults(seeds=5, rounds=12, quick_seeds=2, quick_rounds=3)
BASE = _shared.ROOT / "scenarios" / "duopoly.yaml"
#: (servers, asymmetric) of each market, in table order
MARKETS = ((1, False), (2, False), (2, True), (4, False), (4, True))
#: the quick run's market size, ε budget and leaders' sweeps per round (budgets do not bind
#: in its 3 rounds: the leaders' bidding once they bind is most of a full run's time)
QUICK_CLIENTS, QUICK_EPSILON, QUICK_LEADER_ITERATIONS = 8, 60.0, 3


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS)
    p.add_argument("--clients", type=int, default=20, help="clients in the market (20)")
    p.add_argument("--straggle", type=float, default=0.2, help="straggle probability (0.2)")
    p.add_argument(
        "--gamma-big",
        type=float,
        default=0.8,
        help="server S0's gamma in the asymmetric markets (0.8; the others 0.5)",
    )
    return p


def scenario(
    seed: int,
    rounds: int,
    servers: int,
    *,
    asymmetric: bool,
    straggle: float,
    clients: int,
    gamma_big: float,
    epsilon: float | None = None,
    leader_iterations: int | None = None,
) -> dict[str, Any]:
    """The market of ``servers`` QI-DPFL servers on ``scenarios/duopoly.yaml``'s world."""
    import yaml

    data: dict[str, Any] = yaml.safe_load(BASE.read_text(encoding="utf-8"))
    data.update(name=f"{NAME}-{servers}", seed=seed, rounds=rounds)
    data["population"]["clients"] = clients
    data["population"]["straggle_prob"] = straggle
    if epsilon is not None:
        data["population"]["budget"]["epsilon"] = epsilon
    data["servers"] = [{"name": f"S{j}"} for j in range(servers)]
    if asymmetric:
        data["servers"][0]["incentive"] = {"gamma": gamma_big}
    if leader_iterations is not None:
        data["market"]["leader_iterations"] = leader_iterations
    return data


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Per server, its rounds' columns; per round, the market's (JSON data, kept)."""
    rounds = _shared.simulate(job["scenario"]).rounds.sort_values(["round", "server"])
    owners = {}
    for name, part in rounds.groupby("server", sort=True):
        owners[str(name)] = {
            c: [float(v) for v in part[c]]
            for c in ("test_accuracy", "payments_total", "server_cost", "welfare", "market_share")
        }
    market = rounds.groupby("round", sort=True).first()
    return {
        "owners": owners,
        "hhi": [float(v) for v in market["hhi"]],
        "leaders_converged": [float(bool(v)) for v in market["leaders_converged"]],
        "epsilon_spent_mean": [float(v) for v in market["epsilon_spent_mean"]],
    }


def finite(values: list[float]) -> list[float]:
    return [v for v in values if math.isfinite(v)]


def mean_or_nan(values: list[float]) -> float:
    kept = finite(values)
    return sum(kept) / len(kept) if kept else math.nan


def summarise(r: dict[str, Any]) -> tuple[dict[str, float], list[dict[str, Any]]]:
    """One run's market figures and one row per owner (see the module doc)."""
    owners = []
    for name, o in r["owners"].items():
        bought = finite(o["server_cost"])
        owners.append(
            {
                "owner": name,
                "accuracy": o["test_accuracy"][-1],
                "payments": sum(o["payments_total"]),
                "server_cost": sum(bought) if bought else math.nan,
                "rounds_bought": float(len(bought)),
                "market_share": mean_or_nan(o["market_share"]),
            }
        )
    welfare = [w for o in r["owners"].values() for w in finite(o["welfare"])]
    market = {
        "payments": sum(o["payments"] for o in owners),
        "epsilon": r["epsilon_spent_mean"][-1],
        "accuracy_mean": sum(o["accuracy"] for o in owners) / len(owners),
        "accuracy_min": min(o["accuracy"] for o in owners),
        "accuracy_max": max(o["accuracy"] for o in owners),
        "server_cost": sum(finite([o["server_cost"] for o in owners])),
        "welfare": sum(welfare) if welfare else math.nan,
        "hhi": mean_or_nan(r["hhi"]),
        "leaders_converged": sum(r["leaders_converged"]) / len(r["leaders_converged"]),
        "rounds_traded": float(len(finite(r["hhi"]))),
    }
    return market, owners


def world_label(servers: int, asymmetric: bool) -> str:
    """``"monopoly"``, ``"2 servers"``, ``"4 servers, S0 bigger reward"``."""
    if servers == 1:
        return "monopoly"
    return f"{servers} servers" + (", S0 bigger reward" if asymmetric else "")


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    clients, epsilon, leader_iterations = args.clients, None, None
    if args.quick:  # a smaller market, fewer leaders' sweeps: a smoke run of every world
        clients, epsilon = min(clients, QUICK_CLIENTS), QUICK_EPSILON
        leader_iterations = QUICK_LEADER_ITERATIONS
    report = _shared.Report(NAME, args)
    report.setting = (
        f"digits, logreg, {clients} clients, ε = {epsilon or 30:g}, {args.rounds} rounds, "
        f"QI-DPFL leaders playing best responses; asymmetric: S0's gamma {args.gamma_big:g}"
    )
    straggles = (0.0, args.straggle)
    jobs: list[dict[str, Any]] = []
    for seed in range(args.seeds):
        for straggle in straggles:
            for servers, asymmetric in MARKETS:
                data = scenario(
                    seed,
                    args.rounds,
                    servers,
                    asymmetric=asymmetric,
                    straggle=straggle,
                    clients=clients,
                    gamma_big=args.gamma_big,
                    epsilon=epsilon,
                    leader_iterations=leader_iterations,
                )
                jobs.append(
                    {
                        "seed": seed,
                        "servers": servers,
                        "asymmetric": asymmetric,
                        "straggle": straggle,
                        "scenario": _shared.apply_sets(data, args.overrides),
                    }
                )
    _shared.validate_all(j["scenario"] for j in jobs)
    tags = ("seed", "servers", "asymmetric", "straggle")
    results = _shared.run_kept(run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=tags)
    rows, owner_rows = [], []
    for r in results:
        market, owners = summarise(r)
        head = {k: r[k] for k in tags}
        rows.append(head | market)
        owner_rows += [head | o for o in owners]
    report.rows = rows
    worlds = [(s, a, g) for g in straggles for s, a in MARKETS]

    def cells(data: list[dict[str, Any]], match: dict[str, Any], spec: list[tuple[str, int]]):
        mine = [d for d in data if all(d[k] == v for k, v in match.items())]
        return [_shared.interval_cell([d[key] for d in mine], digits) for key, digits in spec]

    market_spec = [
        ("payments", 1),
        ("epsilon", 2),
        ("accuracy_mean", 3),
        ("accuracy_min", 3),
        ("accuracy_max", 3),
        ("server_cost", 1),
        ("welfare", 1),
        ("hhi", 3),
        ("leaders_converged", 3),
        ("rounds_traded", 1),
    ]
    report.table(
        "markets",
        "Markets: one row per world",
        [
            "stragglers",
            "market",
            "client payments",
            "mean ε spent",
            "final accuracy (mean over owners)",
            "worst owner",
            "best owner",
            "server cost (all owners)",
            "welfare",
            "HHI",
            "leaders' equilibrium found (share of rounds)",
            "rounds with trade",
        ],
        [
            [
                f"{g:g}",
                world_label(s, a),
                *cells(rows, {"servers": s, "asymmetric": a, "straggle": g}, market_spec),
            ]
            for s, a, g in worlds
        ],
    )
    owner_spec = [
        ("accuracy", 3),
        ("payments", 1),
        ("server_cost", 1),
        ("rounds_bought", 1),
        ("market_share", 3),
    ]
    report.table(
        "owners",
        "Owners: one row per world and server",
        [
            "stragglers",
            "market",
            "owner",
            "final accuracy",
            "payments",
            "server cost (rounds it bought)",
            "rounds it bought",
            "market share",
        ],
        [
            [
                f"{g:g}",
                world_label(s, a),
                f"S{j}",
                *cells(
                    owner_rows,
                    {"servers": s, "asymmetric": a, "straggle": g, "owner": f"S{j}"},
                    owner_spec,
                ),
            ]
            for s, a, g in worlds
            for j in range(s)
        ],
    )
    figures = args.out / "figures"
    figures.mkdir(parents=True, exist_ok=True)
    print(f"figure: {figure(rows, owner_rows, straggles, figures / f'{NAME}.png')}")
    report.write()


def figure(
    rows: list[dict[str, Any]], owner_rows: list[dict[str, Any]], straggles: Any, path: Any
) -> Any:
    """Six panels over the five markets (x), one series per straggle probability: client
    payments (log scale; each seed a dot), mean ε spent, final accuracy and server cost of S0
    (filled) and of its rivals' mean (open), welfare, HHI; mean ± 95% CI over seeds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from fedgame.analysis.stats import t_interval

    fig, axes = plt.subplots(2, 3, figsize=(13.5, 7.6))
    xs = list(range(len(MARKETS)))
    labels = [world_label(s, a).replace(", ", "\n") for s, a in MARKETS]
    colours = ("tab:blue", "tab:orange")

    def plot(ax: Any, values: list[list[float]], x_shift: float, **style: Any) -> None:
        means, errs, at = [], [], []
        for x, vals in zip(xs, values, strict=True):
            vals = finite(vals)
            if not vals:
                continue
            iv = t_interval(vals)
            means.append(iv.mean)
            errs.append(0.0 if math.isnan(iv.half_width) else iv.half_width)
            at.append(x + x_shift)
        ax.errorbar(at, means, yerr=errs, capsize=3, **style)

    def market_values(key: str, g: float) -> list[list[float]]:
        return [
            [r[key] for r in rows if (r["servers"], r["asymmetric"], r["straggle"]) == (s, a, g)]
            for s, a in MARKETS
        ]

    def owner_values(key: str, g: float, leader: bool) -> list[list[float]]:
        out = []
        for s, a in MARKETS:
            mine = [
                o
                for o in owner_rows
                if (o["servers"], o["asymmetric"], o["straggle"]) == (s, a, g)
                and (o["owner"] == "S0") == leader
            ]
            by_seed: dict[int, list[float]] = {}
            for o in mine:
                by_seed.setdefault(o["seed"], []).append(o[key])
            out.append([mean_or_nan(v) for v in by_seed.values()])
        return out

    panels = (
        ("client payments (log)", "payments", None),
        ("clients' mean ε spent", "epsilon", None),
        ("final test accuracy", "accuracy", "owner"),
        ("server cost (rounds bought)", "server_cost", "owner"),
        ("welfare", "welfare", None),
        ("HHI", "hhi", None),
    )
    for ax, (title, key, kind) in zip(axes.flat, panels, strict=True):
        for i, (g, colour) in enumerate(zip(straggles, colours, strict=True)):
            shift = -0.12 + 0.24 * i
            name = f"straggle {g:g}"
            if kind == "owner":
                vals = owner_values(key, g, leader=True)
                plot(ax, vals, shift, fmt="o", color=colour, label=name)
                vals = owner_values(key, g, leader=False)
                plot(ax, vals, shift + 0.06, fmt="o", mfc="none", color=colour)
            else:
                vals = market_values(key, g)
                plot(ax, vals, shift, fmt="o", color=colour, label=name)
                if key == "payments":
                    for x, v in zip(xs, vals, strict=True):
                        ax.plot([x + shift] * len(v), v, ".", color=colour, alpha=0.4, ms=4)
        if key == "payments":
            ax.set_yscale("log")
        ax.set_title(title + ("; open: rivals' mean" if kind == "owner" else ""), fontsize=10)
        ax.set_xticks(xs, labels, fontsize=8)
        ax.grid(alpha=0.3)
    n = len({r["seed"] for r in rows})
    return _shared.save_figure(
        fig,
        path,
        legend_from=axes[0, 0],
        ncol=2,
        rect=(0, 0.05, 1, 0.95),
        dpi=100,
        title=f"Competing servers: mean ± 95% CI over {n} seeds",
    )


if __name__ == "__main__":
    _shared.main(main)
