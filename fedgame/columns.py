"""The column dictionary: what each column of ``rounds``, ``clients`` and ``sweep.parquet`` is.

Every column has a meaning, a unit (empty for a count of nothing in particular, a flag, an id
or a pure number), a dtype (``int64``, ``float64``, ``bool`` or ``string``) and the writer
that adds it. The entries come from

* the client schema (:mod:`fedgame.agents.schema`: each field's ``doc``, ``unit``, ``dtype``)
  for the clients table's own columns;
* :data:`ROUNDS` for the rounds table's own columns (``fedgame.collect.ROUND_COLUMNS``);
* :data:`PLUGIN_COLUMNS`, keyed by column name, for the columns plug-ins declare
  (``round_columns`` / ``client_columns``); which plug-ins write each one is read from the
  registry (every registered class's declaration) and from the game monitor
  (:mod:`fedgame.game.monitor`);
* :data:`SWEEP` for the columns a sweep adds to the rounds table (and the swept keys, named
  by their dotted scenario key).

A run writes the entries of its files' columns into each Parquet file
(:func:`arrow_table`): the schema's ``fedgame.columns`` metadata holds them as JSON, and each
field carries ``meaning``, ``unit`` and ``writer``; :func:`read_dictionary` reads them back.
An integer or boolean column that a plug-in leaves empty in some rows is stored with nulls
(pandas' nullable ``Int64`` / ``boolean``); a complete one is plain ``int64`` / ``bool``.
``docs/columns.md`` is :func:`markdown` (``make docs-columns``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

TABLES = ("rounds", "clients", "sweep")
DTYPES = ("int64", "float64", "bool", "string")
#: the writer of the columns every run has
CORE = "fedgame"
#: Parquet schema metadata key holding the dictionary of the file's columns (JSON)
METADATA_KEY = "fedgame.columns"


@dataclass(frozen=True)
class Spec:
    """Meaning, unit and dtype of a column (its writer is found elsewhere)."""

    meaning: str
    unit: str = ""
    dtype: str = "float64"


@dataclass(frozen=True)
class Column:
    """One entry of the column dictionary."""

    name: str
    table: str
    meaning: str
    unit: str
    dtype: str
    writer: str
    #: the column this one repeats under another name ("" when it is no alias)
    alias_of: str = ""


#: the old names kept as aliases for one release: old -> new (both are written)
DEPRECATED = {"participants": "willing"}

#: the rounds table's own columns (``fedgame.collect.ROUND_COLUMNS`` and ``round``)
ROUNDS: dict[str, Spec] = {
    "round": Spec("round number t, 1..rounds (step t of the Mesa model)", "", "int64"),
    "test_accuracy": Spec(
        "accuracy of the global model on the test set after the round's update (NaN in a "
        "round training.eval_every skips whose update changed the model)",
        "fraction",
    ),
    "test_loss": Spec(
        "mean cross-entropy of the global model on the test set (NaN where test_accuracy is)",
        "nats",
    ),
    "train_loss": Spec(
        "mean of the trained clients' local minibatch losses (NaN when nobody trained)", "nats"
    ),
    "willing": Spec(
        "clients that answered the offer with yes (and whose release the budget did not "
        "withdraw); the selection rule picks among them",
        "clients",
        "int64",
    ),
    "participants": Spec(
        "the old name of willing (same values), kept for one release: read willing",
        "clients",
        "int64",
    ),
    "trained": Spec(
        "clients that trained this round: chosen by the selection rule and admitted by the "
        "privacy budget",
        "clients",
        "int64",
    ),
    "selected": Spec(
        "the count trained has (the clients table's selected flags summed)", "clients", "int64"
    ),
    "uploaded": Spec(
        "trained clients whose update reached the server (not stragglers)", "clients", "int64"
    ),
    "stragglers": Spec("trained clients that missed the upload deadline", "clients", "int64"),
    "failed_links": Spec(
        "client-server links down this round (client-client edges: failed_edges)",
        "links",
        "int64",
    ),
    "active_clients": Spec(
        "clients whose budget pays one more default participation (ε after it <= ε_total)",
        "clients",
        "int64",
    ),
    "epsilon_spent_min": Spec("smallest ε spent over all clients (accountant, at δ)", "ε"),
    "epsilon_spent_mean": Spec("mean ε spent over all clients (accountant, at δ)", "ε"),
    "epsilon_spent_max": Spec("largest ε spent over all clients (accountant, at δ)", "ε"),
    "reward_total": Spec("payments made this round, summed over clients", "reward units"),
    "withdrawn_budget": Spec(
        "releases the privacy budget refused this round (those clients never trained)",
        "releases",
        "int64",
    ),
    "aggregation_failed": Spec(
        "the server could not combine the round's updates (the global model is unchanged)",
        "",
        "bool",
    ),
    "degenerate": Spec("the round's play is degenerate (game.degeneracy thresholds)", "", "bool"),
    "degenerate_reason": Spec(
        "kinds of degeneracy of the round, joined by ';' (empty when sound)", "", "string"
    ),
    "lr": Spec("local learning rate of the round (training.lr, decayed)"),
    "wall_time_s": Spec("wall-clock time the round took to simulate", "s"),
}

#: the clients table's ``round`` (its other own columns come from the client schema)
CLIENT_ROUND = Spec("round number t, 1..rounds", "", "int64")

#: columns a sweep adds to the rounds table in ``sweep.parquet`` (beside the swept keys)
SWEEP: dict[str, Spec] = {
    "replicate": Spec("replicate index: an independent seed stream of the seed", "", "int64"),
    "run_id": Spec("the run's folder under runs/", "", "string"),
    "status": Spec(
        "the run's status (completed, diverged, degenerate; a privacy_violation run is failed)",
        "",
        "string",
    ),
    "num_clients": Spec("population.clients of the run", "clients", "int64"),
}
#: what a swept key column (named by its dotted scenario key) is
SWEPT_KEY = "swept scenario key: its value in this run (fedgame explain scenario KEY)"

#: the writer of the columns a market (a scenario with ``servers:``) adds
MARKET_WRITER = "fedgame market (scenarios with servers)"
#: the columns a market's rounds table adds, one row per round and server
#: (:mod:`fedgame.market.tables`)
MARKET_ROUNDS: dict[str, Spec] = {
    "server": Spec("the server this row is about (servers.<i>.name)", "", "string"),
    "market_share": Spec(
        "Σρ delivered to this server / Σρ delivered to all servers this round: the share of "
        "the clients' privacy supply it won (NaN when nobody delivered)",
        "fraction",
    ),
    "client_share": Spec(
        "this server's share of the round's (client, server) deliveries (NaN when nobody "
        "delivered)",
        "fraction",
    ),
    "hhi": Spec(
        "Herfindahl-Hirschman index Σ_s market_share_s² on [1/S, 1] (the same on every "
        "server's row of a round)",
    ),
    "leaders_converged": Spec(
        "the leaders' iterated best responses on rewards met market.leader_tol this round "
        "(market.competition independent, or one server: no game, true)",
        "",
        "bool",
    ),
    "leaders_iterations": Spec(
        "rounds of the leaders' best responses this round (0: no game)", "iterations", "int64"
    ),
    "followers_converged": Spec(
        "the clients' joint best response (budgets split among the servers) met "
        "market.follower_tol",
        "",
        "bool",
    ),
    "followers_iterations": Spec(
        "sweeps of the clients' joint best response this round", "iterations", "int64"
    ),
}
#: the columns a market's clients table adds (``<server>``: each server's name)
MARKET_CLIENTS: dict[str, Spec] = {
    "rho_<server>": Spec(
        "ρ_i of the update it delivered to that server (0 when it delivered none)", "ρ (zCDP)"
    ),
    "payment_<server>": Spec("what that server paid it this round", "reward units"),
    "served": Spec(
        "the servers it delivered an update to this round, joined by ',' (empty: none)",
        "",
        "string",
    ),
    "servers_served": Spec("how many servers it delivered an update to", "servers", "int64"),
}
#: the per-server columns of a market's clients table: prefix -> dictionary key
MARKET_PER_SERVER = {"rho_": "rho_<server>", "payment_": "payment_<server>"}

_R = "reward units"
#: columns plug-ins declare (``round_columns`` / ``client_columns``), by name: one entry each
PLUGIN_COLUMNS: dict[str, Spec] = {
    # incentives with a Stackelberg contest (fedgame.mechanisms.incentive.game), rounds
    "reward": Spec("R_t, the reward the leader offers this round", _R),
    "sum_rho": Spec("Σρ_i of the clients whose updates were delivered", "ρ (zCDP)"),
    "players": Spec("clients admitted to the round's contest", "clients", "int64"),
    "server_cost_accuracy": Spec("accuracy term of the server's cost (QI-DPFL Eq. 15)", _R),
    "server_cost_payment": Spec("payment term of the server's cost (QI-DPFL Eq. 15)", _R),
    "server_cost": Spec("the server's cost: accuracy term + payment term (Eq. 15)", _R),
    "payments_total": Spec("payments to the delivered clients, summed", _R),
    "welfare": Spec("clients' game utilities Σ(r_i − φν_iρ_i) minus the server's cost", _R),
    "removed_for_feasibility": Spec(
        "players the leader removed so that Theorem 1's interior condition holds",
        "clients",
        "int64",
    ),
    "solver_converged": Spec("the leader's numeric solve of the round converged", "", "bool"),
    "solver_residual": Spec("residual of the leader's numeric solve (0 for closed forms)"),
    # the same incentives, clients
    "rho": Spec("ρ_i, the zCDP budget of its delivered update", "ρ (zCDP)"),
    "payment": Spec("its share (ρ_i/Σρ_j)·R_t of the reward", _R),
    "privacy_cost": Spec("its privacy cost φ·ν_i·ρ_i (ρ_i² for quadratic costs)", _R),
    "game_utility": Spec("payment − privacy_cost", _R),
    "removed": Spec(
        "removed by the leader for feasibility (true) or admitted (false); empty for "
        "clients that were not players",
        "",
        "bool",
    ),
    "nu_believed": Spec(
        "ν̂_i, the leader's belief about its privacy value (an incentive with a belief)",
        "cost per unit ρ",
    ),
    # posted price and procurement auctions (fedgame.mechanisms.incentive.posted_price,
    # .auction), rounds
    "price": Spec("p_t, the posted price per unit of zCDP budget ρ", "reward units per unit ρ"),
    "sellers": Spec("delivered clients that sold a positive ρ", "clients", "int64"),
    "nu_error": Spec("mean |log ν̂_i − log ν_i| over the clients offered the price (0: ν known)"),
    "bids": Spec("clients that bid in the auction", "clients", "int64"),
    "winners": Spec("clients that won a unit (they alone train)", "clients", "int64"),
    "clearing_price": Spec(
        "the winners' mean price per unit ρ (threshold: the critical value; first price: the "
        "mean winning bid)",
        "reward units per unit ρ",
    ),
    "shading": Spec("mean b_i/κ_i − 1 over the bidders, κ_i the true per-unit cost (0: truthful)"),
    # the auctions, clients
    "bid": Spec("b_i, its bid per unit ρ", "reward units per unit ρ"),
    "unit_price": Spec("its price per unit ρ (0 when it lost)", "reward units per unit ρ"),
    # the game monitor (fedgame.game.monitor), rounds
    "nash_gap_max": Spec("largest ex-post Nash gap of the delivered clients", _R),
    "nash_gap_mean": Spec("mean ex-post Nash gap of the delivered clients", _R),
    "nash_gap_norm_max": Spec("largest ex-post Nash gap divided by the client's payment"),
    "nash_gap_ante_max": Spec("largest ex-ante Nash gap of the players against the offer", _R),
    "nash_gap_ante_norm_max": Spec("largest ex-ante Nash gap divided by the client's payment"),
    "eq_distance": Spec("Σ|ρ − ρ*|/Σρ* over the players, ρ* the complete-information equilibrium"),
    "sum_rho_played": Spec("Σρ of every response, delivered or not", "ρ (zCDP)"),
    "client_surplus": Spec("delivered clients' payments minus their privacy costs", _R),
    "knife_edge_impact": Spec(
        "|R*_{−m} − R*|/R*: how much the leader's optimal reward changes without the marginal "
        "player m (1 when no contest is left without it)"
    ),
    "noise_norm_over_clip": Spec(
        "the released average's noise L2 norm over the clipping bound C, "
        "sqrt(d·Σ w_k²σ_k²)/C (NaN when nothing was delivered or the noise is central)"
    ),
    "failed_edges": Spec("client-client links down this round", "links", "int64"),
    "belief_error": Spec("mean |log ν̂_i − log ν_i| over the round's players"),
    "belief_error_max": Spec("largest |log ν̂_i − log ν_i| over the round's players"),
    "belief_error_active": Spec(
        "mean |log ν̂_i − log ν_i| over the players that contributed (ρ_i > 0)"
    ),
    # the economics monitor (fedgame.game.economics_monitor; docs/economics.md), rounds
    "econ_units": Spec("privacy bought this round, Σ units_i (ρ for zCDP, ε otherwise)", "ρ or ε"),
    "econ_sellers": Spec("clients the incentive bought a positive amount from", "clients", "int64"),
    "econ_server_cost": Spec("the server's money cost of the round, Σ payments", _R),
    "econ_true_cost": Spec(
        "Σ of the sellers' true privacy costs of what they sold (at their true types)", _R
    ),
    "econ_client_surplus": Spec("Σ (payment_i − true_cost_i) over the clients dealt with", _R),
    "econ_value": Spec(
        "the server's value of the round's accuracy gain: game.economics.value_per_point × "
        "accuracy points gained",
        _R,
    ),
    "econ_welfare": Spec("econ_value − econ_true_cost (payments are transfers)", _R),
    "econ_ir_violations": Spec(
        "clients dealt with whose surplus is negative (ex-post IR violated)", "clients", "int64"
    ),
    "econ_regret_max": Spec(
        "largest ex-post deviation gain over the sampled clients (NaN: not measured)", _R
    ),
    "econ_regret_mean": Spec(
        "mean ex-post deviation gain over the sampled clients (NaN: not measured)", _R
    ),
    "econ_regret_sampled": Spec(
        "clients whose deviation gains were searched (game.economics.regret_sample)",
        "clients",
        "int64",
    ),
    "econ_fairness": Spec(
        "1 − ½·L1 distance of payment shares and clipped contribution shares, in [0, 1] "
        "(NaN: no contribution estimate, nobody paid or valued)"
    ),
    "econ_accuracy_per_cost": Spec(
        "accuracy points gained this round per reward unit paid (0 when nothing was paid)",
        "points per reward unit",
    ),
    "econ_cost_to_date": Spec("econ_server_cost summed over the rounds so far", _R),
    "econ_accuracy_per_cost_to_date": Spec(
        "accuracy points gained since round 1 per reward unit paid so far (0 before any payment)",
        "points per reward unit",
    ),
    # the game monitor, clients
    "rho_equilibrium": Spec("ρ_i*, its complete-information equilibrium budget", "ρ (zCDP)"),
    "nash_gap": Spec("its ex-post Nash gap (best-response utility − its utility)", _R),
    "nash_gap_ante": Spec("its ex-ante Nash gap against the offer", _R),
    # selection emd_threshold
    "emd_threshold": Spec("θ_th, the label-skew (EMD) threshold in force"),
    "emd_eligible": Spec("clients below the threshold (eligible this round)", "clients", "int64"),
    "emd_theta": Spec("θ_h, its label-skew distance used by the threshold"),
    # selection round_robin, optimal_queries
    "queries_active": Spec("the round queries clients (false after the active rounds)", "", "bool"),
    "queries_b": Spec("b, clients queried per round", "clients", "int64"),
    "queries_T": Spec("T, rounds that query clients", "rounds", "int64"),
    "queries_t_star": Spec("T*, the planner's optimal number of queries (unrounded)", "rounds"),
    "queries_invalid": Spec(
        "the planner's constants were not positive: b = 1 over all rounds instead", "", "bool"
    ),
    # selection privacy_aware, unbiased
    "presampled_missing": Spec(
        "pre-drawn clients that were no candidates this round (skipped)", "clients", "int64"
    ),
    "pa_selection_gap": Spec("Σ|p_k − p_k^u|, L1 distance of p from the unbiased probabilities"),
    "pa_objective": Spec("objective of paper 001's Problem 1 at the probabilities p"),
    "selection_prob": Spec("p_k, its probability in each of the round's draws", "probability"),
    "planned_participations": Spec(
        "T_k, the times it was pre-drawn over the run (its noise is sized for them)",
        "rounds",
        "int64",
    ),
    # selection power_of_choice
    "poc_proxy_emd": Spec(
        "the label-skew proxy stood in for local losses (no learner to query)", "", "bool"
    ),
    # selection bcs
    "bcs_stage": Spec("the DPFL-BCS stage of the round (1 or 2)", "", "int64"),
    "bcs_missing": Spec(
        "scheduled clients that were no candidates this round (skipped)", "clients", "int64"
    ),
    "bcs_infeasible": Spec(
        "stage 2 could not schedule K clients per round (too few budgets, or no stage-1 "
        "loss reports)",
        "",
        "bool",
    ),
    "bcs_rho_min": Spec("ρ̂_min, the estimated smallest loss decrease (paper 000 Eq. 9)"),
    "bcs_L": Spec("L, the smoothness constant fitted by P2 (Eq. 10)"),
    "bcs_mu": Spec("μ, the strong-convexity constant fitted by P2 (Eq. 10)"),
    "bcs_gamma": Spec("γ, the constant fitted by P2 (Eq. 10)"),
    "bcs_p2_residual": Spec("residual of the P2 fit"),
    "bcs_p2_at_bound": Spec("a constant of the P2 fit ran to the optimiser's bound", "", "bool"),
    "bcs_planned": Spec("T_n, its planned participations in the current stage", "rounds", "int64"),
    "bcs_gamma_hat": Spec("Γ̂_n, its estimated non-IID degree (paper 000 Eq. 8)"),
    # aggregation secure
    "secure_dropped": Spec("selected clients whose masked upload is missing", "clients", "int64"),
    "secure_recovered": Spec(
        "the dropped clients' masks were removed (SecAgg recovery)", "", "bool"
    ),
    "secure_error": Spec(
        "largest |secure − plain aggregate| (fixed-point error; NaN when the sum failed)",
        "parameter units",
    ),
    "secure_status": Spec(
        "secure sum by the recovery policy: 0 ok, 1 masks unrecoverable, 2 timed out",
        "",
        "int64",
    ),
    # privacy central_gaussian
    "central_noise_std": Spec("std of the server's noise per coordinate", "parameter units"),
    # privacy lightdp, ldp, smpc_dp, ideal_smpc
    "colluders": Spec("colluders among the round's selected clients", "clients", "int64"),
    "residual_noise_var": Spec(
        "noise variance per coordinate left in the average of the received uploads",
        "parameter units²",
    ),
    "update_norm": Spec(
        "L2 norm of the mean clipped update of the selected clients, before noise",
        "parameter units",
    ),
    "smpc_status": Spec(
        "secure sum with ideal masks (aggregation: mean, deprecated): 0 ok, 1 masks "
        "unrecoverable, 2 timed out (too few uploads); -1 not decided here (no upload arrived, "
        "or aggregation: secure decided: see secure_status)",
        "",
        "int64",
    ),
    "effective_noise_var": Spec(
        "noise variance per coordinate on its update that the server and the colluders "
        "cannot remove (0 for a colluder)",
        "parameter units²",
    ),
    # privacy gaussian_local, dpsgd_local
    "epsilon_closed_form": Spec("ε the paper's closed form gives for what it released", "ε"),
    # faults deadline
    "compute_time": Spec("its simulated local compute time this round", "s"),
    "finish_time": Spec("its simulated compute plus upload time this round", "s"),
    # incentive contract (screening menu), rounds
    "menu_items": Spec("distinct items (ρ_k, r_k) of the round's menu", "items"),
    "menu_rho_low": Spec("smallest ρ_k of the round's menu", "ρ (zCDP)"),
    "menu_rho_high": Spec("largest ρ_k of the round's menu", "ρ (zCDP)"),
    "menu_pay_low": Spec("smallest payment r_k of the round's menu", _R),
    "menu_pay_high": Spec("largest payment r_k of the round's menu", _R),
    # policy self_select, clients
    "menu_item": Spec("index in the offer's menu of the item it took (empty: declined)"),
    # incentive shapley, rounds
    "shapley_sum": Spec("Σφ_i of the delivered clients (exact: v(N) − v(∅))", "accuracy"),
    "shapley_evals": Spec("coalitions evaluated for the round's estimate", "coalitions"),
    "shapley_s": Spec("seconds the round's Shapley estimate took", "s"),
    # incentive shapley, clients
    "shapley": Spec("φ_i, its estimated Shapley value in the round's accuracy gain", "accuracy"),
}


def _monitor_declarations() -> list[tuple[str, str, tuple[str, ...]]]:
    """(writer, table, names) of the columns the game monitor and a believing leader add."""
    from fedgame.game import economics_monitor, monitor

    contest = "game monitor (incentives that offer a contest)"
    return [
        (
            "economics monitor (incentives that report outcomes)",
            "rounds",
            economics_monitor.ECONOMICS_COLUMNS,
        ),
        ("game monitor (every run)", "rounds", monitor.NOISE_COLUMNS),
        (contest, "rounds", monitor.ROUND_COLUMNS),
        (contest, "clients", monitor.CLIENT_COLUMNS),
        ("game monitor (leaders that learn ν)", "rounds", monitor.BELIEF_COLUMNS),
    ]


def declarations() -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(family, name, table, columns) of every declaration: each registered plug-in's class
    attributes, the game monitor's, and the columns a leader with a belief adds."""
    from fedgame import registry

    out = []
    for family, entries in registry.catalogue().items():
        for e in entries:
            for attr, table in (("round_columns", "rounds"), ("client_columns", "clients")):
                names = tuple(getattr(e.cls, attr, ()) or ())
                if names:
                    out.append((family, e.name, table, names))
            if family == "incentive" and getattr(e.cls, "offers_contest", False):
                out.append((family, e.name, "clients", ("nu_believed",)))  # with a ``belief``
    for writer, table, names in _monitor_declarations():
        out.append(("", writer, table, names))
    return out


@cache
def _writers() -> dict[tuple[str, str], tuple[tuple[str, str], ...]]:
    """(table, column) -> the (family, name) pairs that declare it (family "" for others)."""
    found: dict[tuple[str, str], list[tuple[str, str]]] = {}
    for family, name, table, names in declarations():
        for column in names:
            pairs = found.setdefault((table, column), [])
            if (family, name) not in pairs:
                pairs.append((family, name))
    return {key: tuple(pairs) for key, pairs in found.items()}


def _writer_text(pairs: Iterable[tuple[str, str]]) -> str:
    """``selection bcs``; ``privacy ideal_smpc, ldp, lightdp, smpc_dp``; monitor names."""
    by_family: dict[str, list[str]] = {}
    for family, name in pairs:
        by_family.setdefault(family, []).append(name)
    parts = []
    for family, names in by_family.items():
        parts += names if not family else [f"{family} {', '.join(sorted(names))}"]
    return "; ".join(parts)


@cache
def _client_specs() -> dict[str, Spec]:
    from fedgame.agents.schema import FIELDS

    specs = {"round": CLIENT_ROUND}
    for f in FIELDS:
        if f.written:
            specs[f.column] = Spec(f.doc, f.unit, _dtype_name(f.dtype))
    return specs


def _dtype_name(dtype: Any) -> str:
    if dtype is object or dtype is str:
        return "string"
    kind = np.dtype(dtype).kind
    return {"b": "bool", "i": "int64", "u": "int64", "f": "float64"}.get(kind, "string")


def spec_of(table: str, name: str) -> Spec | None:
    """The spec of column ``name`` of ``table`` (None for a column nobody describes)."""
    if table == "clients":
        own = _client_specs().get(name)
    else:
        own = ROUNDS.get(name) or (SWEEP.get(name) if table == "sweep" else None)
    return own or PLUGIN_COLUMNS.get(name) or _market_spec(table, name)


def _market_key(table: str, name: str) -> str | None:
    """The market dictionary's key of column ``name`` (``rho_<server>`` for ``rho_A``), or
    None; asked only for a column nothing else describes."""
    if table == "clients":
        if name in MARKET_CLIENTS:
            return name
        for prefix, key in MARKET_PER_SERVER.items():
            if name.startswith(prefix) and len(name) > len(prefix):
                return key
        return None
    return name if name in MARKET_ROUNDS else None


def _market_spec(table: str, name: str) -> Spec | None:
    key = _market_key(table, name)
    if key is None:
        return None
    return (MARKET_CLIENTS if table == "clients" else MARKET_ROUNDS)[key]


def _is_core(table: str, name: str) -> bool:
    if table == "clients":
        return name in _client_specs()
    return name in ROUNDS or (table == "sweep" and name in SWEEP)


def column(
    table: str, name: str, *, plugins: Mapping[str, str] | None = None, dtype: str = ""
) -> Column:
    """The dictionary entry of column ``name`` of ``table``.

    ``plugins`` ({family: kind} of a run) names only the run's plug-ins as the writer;
    ``dtype`` is used for a column nobody describes (a user plug-in's, a swept key).
    """
    spec = spec_of(table, name)
    base = "rounds" if table == "sweep" else table
    if _is_core(table, name):
        writer = CORE
    elif spec is not None and spec is _market_spec(table, name):
        writer = MARKET_WRITER
    else:
        pairs = _writers().get((base, name), ())
        if plugins is not None:
            mine = tuple(p for p in pairs if not p[0] or plugins.get(p[0]) == p[1])
            pairs = mine or pairs
        writer = _writer_text(pairs) or "a plug-in (undeclared)"
    if spec is None:
        return Column(name, table, "", "", dtype or "float64", writer)
    alias = DEPRECATED.get(name, "trained" if name == "selected" and base == "rounds" else "")
    return Column(name, table, spec.meaning, spec.unit, spec.dtype, writer, alias)


def dictionary(table: str | None = None) -> list[Column]:
    """Every documented column (of ``table``, or of all three tables): the table's own
    columns, then the plug-in columns by writer, each writer's in its declared order."""
    from fedgame.collect import ROUND_COLUMNS

    out = []
    for t in (table,) if table else TABLES:
        own = {
            "rounds": ["round", *ROUND_COLUMNS],
            "clients": list(_client_specs()),
            "sweep": list(SWEEP),
        }[t]
        declared = [] if t == "sweep" else [c for (tb, c) in _writers() if tb == t]
        plugin = [column(t, name) for name in declared if name not in own]
        plugin.sort(key=lambda c: c.writer)  # stable: each writer's columns as declared
        out += [*(column(t, name) for name in own), *plugin]
    return out


def market_dictionary() -> list[Column]:
    """The columns a market (a scenario with ``servers:``) adds to its rounds and clients
    tables (``rho_<server>``/``payment_<server>``: one column per server)."""
    return [
        Column(name, table, spec.meaning, spec.unit, spec.dtype, MARKET_WRITER)
        for table, specs in (("rounds", MARKET_ROUNDS), ("clients", MARKET_CLIENTS))
        for name, spec in specs.items()
    ]


# ---------------------------------------------------------------------- the frames
def cast_columns(frame: pd.DataFrame, table: str) -> pd.DataFrame:
    """``frame`` with each integer or boolean column of the dictionary in that dtype.

    A float column holding whole numbers (or 0/1 for a flag) becomes ``int64`` (``bool``),
    or pandas' nullable ``Int64`` (``boolean``) when some rows are empty (NaN); a column
    that does not fit (a fraction in a count) is left as it is.
    """
    changed = {}
    for name in frame.columns:
        spec = spec_of(table, name)
        if (
            spec is None
            or spec.dtype not in ("int64", "bool")
            or _frame_dtype(frame[name]) == spec.dtype
        ):
            continue
        cast = _cast(frame[name], spec.dtype)
        if cast is not None:
            changed[name] = cast
    if not changed:
        return frame
    frame = frame.copy()
    for name, values in changed.items():
        frame[name] = values
    return frame


def _cast(series: pd.Series, dtype: str) -> pd.Series | None:
    """``series`` as ``dtype`` (nullable where it has NaN), or None when it does not fit."""
    import pandas as pd

    try:
        values = pd.to_numeric(series, errors="raise").to_numpy(dtype=float, na_value=np.nan)
    except (TypeError, ValueError):
        return None
    missing = np.isnan(values)
    known = values[~missing]
    filled = np.where(missing, 0.0, values)
    if dtype == "bool":
        if not np.isin(known, (0.0, 1.0)).all():
            return None
        flags = filled.astype(bool)
        out: Any = pd.arrays.BooleanArray(flags, missing) if missing.any() else flags
    else:
        if not (np.isfinite(known).all() and (known == np.round(known)).all()):
            return None
        ints = filled.astype(np.int64)
        out = pd.arrays.IntegerArray(ints, missing) if missing.any() else ints
    return pd.Series(out, index=series.index, name=series.name)


def _frame_dtype(series: pd.Series) -> str:
    kind = series.dtype.kind
    name = str(series.dtype)
    if name == "boolean" or kind == "b":
        return "bool"
    if name.startswith("Int") or kind in "iu":
        return "int64"
    if kind == "f" or name.startswith("Float"):
        return "float64"
    return "string"


def describe(
    frame: pd.DataFrame, table: str, *, plugins: Mapping[str, str] | None = None
) -> list[Column]:
    """The dictionary entries of ``frame``'s columns, in its order (a swept key of a sweep
    is described as one; a column nobody documents gets an empty meaning)."""
    out = []
    for name in frame.columns:
        entry = column(table, str(name), plugins=plugins, dtype=_frame_dtype(frame[name]))
        if table == "sweep" and not entry.meaning and "." in str(name):
            entry = Column(str(name), table, SWEPT_KEY, "", entry.dtype, "fedgame sweep")
        out.append(entry)
    return out


def plugins_of(scenario: Mapping[str, Any]) -> dict[str, str]:
    """{family: kind} of a resolved scenario tree (what ``scenario.resolved.yaml`` holds)."""
    from fedgame.scenario.schema import COMPONENT_FAMILIES

    out = {}
    for path, family in COMPONENT_FAMILIES.items():
        node: Any = scenario
        for part in path.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping) and isinstance(node.get("kind"), str):
            out[family] = node["kind"]
    return out


def arrow_table(
    frame: pd.DataFrame, table: str, *, plugins: Mapping[str, str] | None = None
) -> pa.Table:
    """``frame`` as an Arrow table that carries its column dictionary.

    Schema metadata ``fedgame.columns``: a JSON list of the entries (name, table, meaning,
    unit, dtype, writer, alias_of); each field's metadata: ``meaning``, ``unit``, ``writer``
    (and ``alias_of`` for an alias). pandas' own metadata is kept, so ``pd.read_parquet``
    gives back the same frame.
    """
    import pyarrow as pa

    arrow = pa.Table.from_pandas(frame, preserve_index=False)
    entries = describe(frame, table, plugins=plugins)
    fields = []
    for field, entry in zip(arrow.schema, entries):
        meta = {"meaning": entry.meaning, "unit": entry.unit, "writer": entry.writer}
        if entry.alias_of:
            meta["alias_of"] = entry.alias_of
        fields.append(field.with_metadata(meta))
    metadata = dict(arrow.schema.metadata or {})
    metadata[METADATA_KEY.encode()] = json.dumps([asdict(e) for e in entries]).encode()
    return pa.Table.from_arrays(arrow.columns, schema=pa.schema(fields, metadata=metadata))


def read_dictionary(path: str | Path) -> pd.DataFrame:
    """The column dictionary a Parquet file fedgame wrote carries (one row per column).

    >>> read_dictionary("results/quickstart/<run-id>/rounds.parquet")  # doctest: +SKIP
    """
    import pandas as pd
    import pyarrow.parquet as pq

    metadata = pq.read_schema(path).metadata or {}
    raw = metadata.get(METADATA_KEY.encode())
    if raw is None:
        return pd.DataFrame(columns=[f for f in Column.__dataclass_fields__])
    return pd.DataFrame(json.loads(raw))


# ---------------------------------------------------------------------- the docs page
_TITLES = {
    "rounds": "rounds.parquet: one row per round",
    "clients": "clients.parquet: one row per round x client (output.clients says which rows)",
    "sweep": "sweep.parquet: the rounds of every finished run, with these columns first",
}


_INTRO = (
    "Generated from the client schema, the collector and the plug-ins' declarations by",
    "`make docs-columns` (`python -m fedgame.columns`); `tests/test_columns.py` checks that it is",
    "current. Each run also writes the entries of its columns into its Parquet files: read",
    "them with `fedgame.columns.read_dictionary(path)`, or from the Arrow schema (`meaning`,",
    "`unit` and `writer` on each field; every entry as JSON under the schema key",
    "`fedgame.columns`).",
    "",
    "An `int64` or `bool` column that a plug-in leaves empty in some rows is stored with",
    "nulls (pandas reads it as `Int64` / `boolean`). `participants` is the old name of",
    "`willing`, kept for one release; `selected` is the count `trained` has. The writer",
    "`fedgame` is every run; a plug-in column is written only when one of its writers is in",
    "the scenario. Units: ε and δ as the accountants report them, ρ the zCDP budget,",
    "`parameter units` those of the model's parameters, `reward units` those of the",
    "incentive; an empty unit is a count of nothing in particular, a flag, an id or a pure",
    "number.",
)


def markdown() -> str:
    """``docs/columns.md``: the whole dictionary as Markdown tables."""
    lines = ["# Columns of the result files", "", *_INTRO, ""]
    for table in TABLES:
        lines += [f"## {_TITLES[table]}", ""]
        if table == "sweep":
            lines += [
                "Then every column of the rounds table, and one column per swept key, named by",
                f"its dotted key (e.g. `population.clients`): {SWEPT_KEY}.",
                "",
            ]
        lines += ["| column | dtype | unit | meaning | writer |", "|---|---|---|---|---|"]
        for c in dictionary(table):
            meaning = c.meaning.replace("|", "\\|")
            lines.append(f"| `{c.name}` | {c.dtype} | {c.unit} | {meaning} | {c.writer} |")
        lines.append("")
    lines += [
        "## Markets: what a scenario with `servers:` adds (docs/competition.md)",
        "",
        "A market's rounds table has one row per round and server; its clients table one row",
        "per round and client, with one `rho_<server>` and one `payment_<server>` column per",
        "server (`rho_A`, `payment_A`, ...). Its other columns are the ones above (`rho`,",
        "`payment` summed over the servers).",
        "",
        "| table | column | dtype | unit | meaning |",
        "|---|---|---|---|---|",
    ]
    for c in market_dictionary():
        meaning = c.meaning.replace("|", "\\|")
        lines.append(f"| {c.table} | `{c.name}` | {c.dtype} | {c.unit} | {meaning} |")
    lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown(), end="")
