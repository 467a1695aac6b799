"""The dashboard's views of a market (a scenario with ``servers:``; issue 35): per-server curves,
the clients coloured by whom they served, the round's clients table, the status line.

Curves (one ECharts panel each, one line per server, in ``servers`` order and colour):
test accuracy of each server's global model; market share (Σρ won over Σρ delivered to all
servers, :mod:`fedgame.market.tables`) with the Herfindahl index HHI = Σ_s share_s² in its own
panel (1/S is an even split, 1 a monopoly); the reward R offered (the price of the contest);
payments made (``payments_total``); each leader's server cost; the clients who delivered to
each server; the clients' ε spent (mean and max over the one ledger). As for one server
(:mod:`fedgame.viz.curves`), a panel whose columns are not recorded is left out, the x axis
spans the planned rounds, y starts at 0, and floating-point noise is drawn as 0.

The network: each client's fill colour says whom it delivered an update to this round (a
server's own colour for one server, another colour per combination of servers, grey for
none); the servers are black-edged squares in their colours at the centre, with a line to
each client that delivered to them; size = the share of the client's ε budget left.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fedgame.viz.curves import FONT, _points
from fedgame.viz.data import budget_left, denoised, settings_line
from fedgame.viz.network import Sketch
from fedgame.viz.table import four_digits

#: the servers' colours, in ``servers`` order
SERVER_COLOURS = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#17becf", "#8c564b", "#e377c2", "#bcbd22",
)  # fmt: skip
#: colours of clients that served several servers, by combination in order of appearance
SHARED_COLOURS = ("#6a3d9a", "#b15928", "#a6761d", "#e7298a", "#1b9e77", "#666666")
NONE, NOT_YET = "served none", "no round yet"
#: (title, y label, column, one line per server, y max) of each panel
MARKET_PANELS: tuple[tuple[str, str, str, bool, float | None], ...] = (
    ("test accuracy", "accuracy", "test_accuracy", True, 1.0),
    ("market share (Σρ won)", "share", "market_share", True, 1.0),
    ("Herfindahl index (HHI)", "Σ share²", "hhi", False, 1.0),
    ("reward R offered", "reward", "reward", True, None),
    ("payments", "paid", "payments_total", True, None),
    ("server cost", "cost", "server_cost", True, None),
    ("clients served", "clients", "uploaded", True, None),
)


def server_names(settings: Mapping[str, Any]) -> tuple[str, ...]:
    """The servers of a resolved scenario (``()`` for a one-server scenario)."""
    return tuple(str(s["name"]) for s in settings.get("servers") or ())


def server_colour(index: int) -> str:
    return SERVER_COLOURS[index % len(SERVER_COLOURS)]


def _series(
    name: str, x: list[int], values: np.ndarray, colour: str, *, dashed: bool = False
) -> dict[str, Any]:
    line: dict[str, Any] = {"width": 1, "type": "dashed"} if dashed else {"width": 2}
    return {"type": "line", "name": name, "data": _points(x, values),
            "showSymbol": len(x) < 40 and not dashed, "symbolSize": 6, "connectNulls": False,
            "lineStyle": line, "color": colour, "animation": False}  # fmt: skip


def _values(frame: pd.DataFrame, column: str) -> np.ndarray:
    return denoised(pd.to_numeric(frame[column], errors="coerce").to_numpy(float))


def _recorded(rounds: pd.DataFrame, column: str) -> bool:
    return column in rounds and bool(pd.to_numeric(rounds[column], errors="coerce").notna().any())


def _option(title: str, ylabel: str, series: list[dict], *, rounds_planned: int,
            ymax: float | None) -> dict[str, Any]:  # fmt: skip
    low = min((p[1] for s in series for p in s["data"] if p[1] is not None), default=0.0)
    return {
        "animation": False,
        "textStyle": {"fontSize": FONT},
        "title": {"text": title, "left": "center", "top": 0,
                  "textStyle": {"fontSize": 14, "fontWeight": "bold"}},
        "tooltip": {"trigger": "axis", "textStyle": {"fontSize": 12}},
        "legend": {"show": len(series) > 1, "top": 22, "textStyle": {"fontSize": 12},
                   "itemHeight": 8},
        "grid": {"left": 56, "right": 14, "top": 52 if len(series) > 1 else 32, "bottom": 40},
        "xAxis": {"type": "value", "name": "round", "nameLocation": "middle", "nameGap": 24,
                  "min": 0, "max": max(rounds_planned, 1), "minInterval": 1,
                  "axisLabel": {"fontSize": 12}, "nameTextStyle": {"fontSize": FONT}},
        "yAxis": {"type": "value", "name": ylabel, "nameLocation": "middle", "nameGap": 40,
                  **({"min": 0} if not low < 0 else {}), **({"max": ymax} if ymax else {}),
                  "axisLabel": {"fontSize": 12}, "nameTextStyle": {"fontSize": FONT}},
        "series": series,
    }  # fmt: skip


def market_curve_options(
    rounds: pd.DataFrame,
    servers: Sequence[str],
    *,
    rounds_planned: int,
    clients: int | None = None,
) -> dict[str, dict[str, Any]]:
    """The ECharts option of each market panel (module doc) by title, from the rounds table
    so far (one row per round and server); ``clients`` (N) tops the clients-served axis."""
    out: dict[str, dict[str, Any]] = {}
    if rounds.empty or "server" not in rounds:
        return out
    rounds = rounds.sort_values(["round"], kind="stable")
    market = rounds.drop_duplicates("round")  # the market-wide columns: one row per round
    x_all = [int(r) for r in market["round"]]
    for title, ylabel, column, per_server, ymax in MARKET_PANELS:
        if not _recorded(rounds, column):
            continue
        if per_server:
            series = []
            for j, name in enumerate(servers):
                part = rounds[rounds["server"] == name]
                x = [int(r) for r in part["round"]]
                series.append(_series(name, x, _values(part, column), server_colour(j)))
        else:
            series = [_series("HHI", x_all, _values(market, column), "#333333")]
            if len(servers) > 1:  # the even split, for reference
                even = np.full(len(x_all), 1.0 / len(servers))
                series.append(
                    _series(f"1/S = {1 / len(servers):.2g} (even split)", x_all, even, "#999999",
                            dashed=True)
                )  # fmt: skip
        top = clients if column == "uploaded" and clients else ymax
        out[title] = _option(title, ylabel, series, rounds_planned=rounds_planned, ymax=top)
    spent = [(c, s) for c, s in (("epsilon_spent_mean", "mean"), ("epsilon_spent_max", "max"))
             if _recorded(market, c)]  # fmt: skip
    if spent:
        series = [_series(s, x_all, _values(market, c), ("#1f77b4", "#d62728")[i])
                  for i, (c, s) in enumerate(spent)]  # fmt: skip
        out["ε spent (one ledger)"] = _option(
            "ε spent (one ledger)", "ε", series, rounds_planned=rounds_planned, ymax=None
        )
    return out


def served_label(served: str) -> str:
    """``served A`` / ``served A and B`` / ``served A, B and C`` for a ``served`` cell."""
    names = [s for s in str(served).split(",") if s]
    if not names:
        return NONE
    if len(names) == 1:
        return f"served {names[0]}"
    return f"served {', '.join(names[:-1])} and {names[-1]}"


def client_groups(clients: pd.DataFrame, servers: Sequence[str]) -> pd.Series:
    """Each client's group this round: whom it served (:func:`served_label`), or ``no round
    yet`` at round 0."""
    if clients.empty:
        return pd.Series([], dtype=object)
    served = clients["served"] if "served" in clients else pd.Series("", index=clients.index)
    groups = served.fillna("").map(served_label).astype(object)
    if "round" in clients:
        groups[clients["round"] == 0] = NOT_YET
    return groups


def group_colours(groups: Sequence[str], servers: Sequence[str]) -> dict[str, str]:
    """A colour per group, in legend order: one server's in its colour, then the shared
    combinations (fewest servers first), then none, then no round yet."""
    singles = {f"served {s}": server_colour(j) for j, s in enumerate(servers)}
    present = set(groups)
    shared = sorted(
        (g for g in present if g not in singles and g not in (NONE, NOT_YET)),
        key=lambda g: (g.count(",") + g.count(" and "), g),
    )
    out = {g: c for g, c in singles.items() if g in present}
    out.update({g: SHARED_COLOURS[i % len(SHARED_COLOURS)] for i, g in enumerate(shared)})
    out.update({g: c for g, c in ((NONE, "#b0b0b0"), (NOT_YET, "#dddddd")) if g in present})
    return out


def server_positions(count: int) -> list[tuple[float, float]]:
    """Where the servers sit (in [-1, 1]²): the centre for one, a small circle for more."""
    if count == 1:
        return [(0.0, 0.0)]
    return [
        (0.28 * math.cos(2 * math.pi * j / count + math.pi / 2),
         0.28 * math.sin(2 * math.pi * j / count + math.pi / 2))
        for j in range(count)
    ]  # fmt: skip


def market_network_option(
    clients: pd.DataFrame,
    positions: dict[int, np.ndarray],
    plan: Sketch,
    servers: Sequence[str],
    *,
    rows: dict[int, str] | None = None,
    selected: int | None = None,
    height: int = 560,
) -> dict[str, Any]:
    """The ECharts option of the market's network (module doc): ``clients`` (one round of the
    market's clients table) at ``positions``, the servers at the centre, a line from each
    server to each client that delivered to it, the client-client links of ``plan``."""
    frame = clients[clients["client_id"].isin(list(positions))] if len(clients) else clients
    option: dict[str, Any] = {
        "animation": False,
        "textStyle": {"fontSize": FONT},
        "title": {"text": plan.caption if not plan.star else
                  f"star: every client linked to each of the {len(servers)} servers",
                  "left": 0, "top": 0,
                  "textStyle": {"fontSize": FONT, "fontWeight": "normal", "color": "#444"},
                  "subtext": "colour = whom the client delivered to this round · size = ε "
                             "budget left · lines: deliveries · hover: the client's row · "
                             "click: pin it",
                  "subtextStyle": {"fontSize": 12, "color": "#666"}},
        "tooltip": {"trigger": "item", "confine": True, "textStyle": {"fontSize": 12}},
    }  # fmt: skip
    if frame.empty:
        option["title"]["text"] = "no clients to draw yet"
        option["series"] = []
        return option
    ids = frame["client_id"].to_numpy(int)
    groups = client_groups(frame, servers).to_numpy()
    colours = group_colours(list(groups), servers)
    legend = list(colours)
    category = {g: i for i, g in enumerate(legend)}
    shrink = min(1.0, max(0.45, math.sqrt(60 / max(len(frame), 1))))
    sizes = shrink * (8 + 14 * budget_left(frame))
    rows = rows or {}
    nodes: list[dict[str, Any]] = []
    for i, cid in enumerate(ids):
        x, y = positions[int(cid)]
        nodes.append({
            "id": str(cid), "name": f"client {cid}", "value": int(cid),
            "x": round(float(x) * 100, 2), "y": round(float(-y) * 100, 2),
            "symbolSize": round(float(sizes[i]) * (1.4 if cid == selected else 1.0), 1),
            "category": category[groups[i]],
            "itemStyle": {"borderColor": "#000" if cid == selected else "#fff",
                          "borderWidth": 3.5 if cid == selected else 0.5},
            "tooltip": {"formatter": rows.get(int(cid), f"client {cid}")},
        })  # fmt: skip
    served = frame["served"].fillna("").astype(str).str.split(",") if "served" in frame else None
    links: list[dict[str, Any]] = []
    for j, ((sx, sy), name) in enumerate(zip(server_positions(len(servers)), servers)):
        nodes.append({
            "id": f"server:{name}", "name": f"server {name}", "x": round(sx * 100, 2),
            "y": round(-sy * 100, 2), "symbol": "rect", "symbolSize": 18,
            "itemStyle": {"color": server_colour(j), "borderColor": "#000", "borderWidth": 1.5},
            "label": {"show": True, "position": "right", "fontSize": 13, "fontWeight": "bold",
                      "formatter": name},
            "tooltip": {"formatter": f"server {name}"}, "category": len(legend),
        })  # fmt: skip
        if served is not None:
            links += [
                {"source": f"server:{name}", "target": str(cid),
                 "lineStyle": {"color": server_colour(j), "width": 0.9, "opacity": 0.45}}
                for cid, who in zip(ids, served) if name in who
            ]  # fmt: skip
    if not plan.star:
        links += [{"source": str(a), "target": str(b)} for a, b in plan.links]
    categories = [{"name": g, "itemStyle": {"color": colours[g]}} for g in legend]
    categories.append({"name": "servers", "itemStyle": {"color": "#000"}})
    option["legend"] = {"data": legend, "orient": "vertical", "right": 0, "top": 40,
                        "textStyle": {"fontSize": FONT}, "itemWidth": 14}  # fmt: skip
    option["series"] = [{
        "type": "graph", "layout": "none", "roam": True, "top": 60, "left": "center",
        "width": height - 76, "height": height - 76, "categories": categories, "data": nodes,
        "links": links,
        "lineStyle": {"color": "#bbb", "width": 0.6, "opacity": 0.5 if len(links) > 300 else 0.9},
        "emphasis": {"focus": "none", "scale": 1.6, "label": {"show": False}},
        "label": {"show": False}, "animation": False,
    }]  # fmt: skip
    return option


#: columns of the market's clients table shown first (each server's ρ and payment follow)
MARKET_LEADING = (
    "client_id",
    "served",
    "servers_served",
    "epsilon_spent",
    "epsilon_total",
    "epsilon_charged",
    "rho",
    "payment",
    "utility",
    "privacy_value",
)


def market_round_table(clients: pd.DataFrame) -> pd.DataFrame:
    """The round's clients of a market, those that served most servers first, then by id;
    numbers to 4 significant digits (noise as 0)."""
    if clients.empty:
        return pd.DataFrame(columns=list(MARKET_LEADING))
    order = clients.sort_values(["servers_served", "client_id"], ascending=[False, True])
    rest = [c for c in order.columns if c not in MARKET_LEADING and c != "round"]
    return four_digits(order[[c for c in MARKET_LEADING if c in order] + rest])


def market_status_line(
    rounds: pd.DataFrame, servers: Sequence[str], *, step: int, planned: int, clients: int,
    step_seconds: float,
) -> str:  # fmt: skip
    """``round 3 of 20 · 20 clients · 2 servers · test accuracy A 0.612, B 0.598 · HHI 0.50 ·
    mean ε spent 4.20 · simulated in 0.81 s``."""
    parts = [f"round {step} of {planned}"]
    if clients:
        parts.append(f"{clients} clients")
    parts.append(f"{len(servers)} servers")
    if len(rounds) and "server" in rounds:
        last = rounds[rounds["round"] == rounds["round"].max()]
        acc = dict(zip(last["server"], last["test_accuracy"]))
        parts.append("test accuracy " + ", ".join(
            f"{s} {float(acc[s]):.3f}" for s in servers if s in acc
        ))  # fmt: skip
        row = last.iloc[0]
        hhi = float(row.get("hhi", math.nan))  # NaN: nobody delivered to anyone
        parts.append(f"HHI {hhi:.2f}" if math.isfinite(hhi) else "HHI – (no deliveries)")
        parts.append(f"mean ε spent {float(row.get('epsilon_spent_mean', math.nan)):.2f}")
    if step_seconds > 0:
        parts.append(f"simulated in {step_seconds:.2f} s")
    return " · ".join(parts)


def _compact(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_compact(v)}" for k, v in value.items()) + "}"
    return f"{value:g}" if isinstance(value, float) else str(value)


def market_settings_line(tree: dict[str, Any]) -> str:
    """The shared settings (:func:`fedgame.viz.data.settings_line`), how the leaders
    compete, and each server with the keys it sets for itself."""
    servers = []
    for spec in tree.get("servers") or ():
        own = {k: v for k, v in spec.items() if k != "name" and v is not None}
        servers.append(spec["name"] + (f" ({_compact(own)[1:-1]})" if own else ""))
    competition = (tree.get("market") or {}).get("competition", "")
    return f"{settings_line(tree)} · servers {', '.join(servers)} · leaders: {competition}"
