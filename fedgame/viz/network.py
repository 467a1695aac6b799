"""The client network as an interactive ECharts graph, coloured by each client's state this round.

Encoding: fill colour = the round's state (:data:`fedgame.viz.data.STATES`: uploaded,
straggled, link down, out of budget, willing but not selected, declined); size = the share of
its ε budget left; a thick black ring = a colluder; marker shape = its behaviour (agent type).
Hovering a client shows its row of the round (:func:`fedgame.viz.table.client_rows`); the
legend toggles states. With no client-client links (the ``star`` topology) the clients sit on
a circle around the server (the black square) and each line to the server is drawn, red and
dashed when that link is down.

Dense graphs stay readable. The layout (:func:`layout`) and the links drawn (:func:`sketch`)
are computed once per model, not per round: positions a topology carries (``pos``), else a
spiral in id order above :data:`SPRING_MAX` clients (a small-world ring lattice stays a chain
of neighbours), else a seeded spring layout; markers shrink as clients grow past 60. A
complete graph above :data:`COMPLETE_DRAWN` clients is summarised (its link count in the
caption, no lines); any other graph above :data:`MAX_LINKS` links draws every k-th link in
(u, v) order, and the caption says how many of how many. Above :data:`MAX_DRAWN` clients
only the first are drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np
import pandas as pd

from fedgame.viz.data import STATES, budget_left, client_states

#: most clients the view draws
MAX_DRAWN = 400
#: most client-client links drawn; above it every k-th link is drawn
MAX_LINKS = 1200
#: a complete graph with more clients than this is summarised, not drawn
COMPLETE_DRAWN = 24
#: most clients laid out by the spring layout (above it: a circle in id order)
SPRING_MAX = 60
COLOURS = dict(
    zip(STATES, ("#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#1f77b4", "#b0b0b0", "#dddddd"))
)
SYMBOLS = ("circle", "rect", "triangle", "diamond", "pin", "roundRect", "arrow")
FONT = 13


def layout(graph: nx.Graph) -> dict[int, np.ndarray]:
    """Client positions in [-1, 1]²: the topology's own ``pos``; else a circle in id order (no
    links, or a small complete graph); else, above :data:`SPRING_MAX` clients, an equidistant
    spiral in id order (ids that are neighbours on a ring lattice stay side by side, and the
    clients fill the disc instead of crowding its rim); else a seeded spring layout."""
    nodes = sorted(graph.nodes)[:MAX_DRAWN]
    drawn = graph.subgraph(nodes)
    own = nx.get_node_attributes(drawn, "pos")
    if nodes and len(own) == len(nodes):
        xy = np.array([own[n] for n in nodes], dtype=float)
        span = np.ptp(xy, axis=0)
        xy = 2 * (xy - xy.min(axis=0)) / np.where(span > 0, span, 1) - 1
        return {int(n): xy[i] for i, n in enumerate(nodes)}
    m, n = drawn.number_of_edges(), len(nodes)
    if m == 0 or (m == n * (n - 1) // 2 and n <= SPRING_MAX):
        placed = nx.circular_layout(nodes)
    elif n > SPRING_MAX:
        placed = dict(zip(nodes, nx.spiral_layout(nodes, equidistant=True).values()))
    else:
        placed = nx.spring_layout(drawn, seed=0)
    xy = np.array([placed[k] for k in nodes], dtype=float)
    xy /= max(float(np.abs(xy).max()), 1e-12)
    return {int(k): xy[i] for i, k in enumerate(nodes)}


@dataclass(frozen=True)
class Sketch:
    """What the network view draws of a topology: the links and a caption about them."""

    star: bool
    links: tuple[tuple[int, int], ...]
    caption: str


def sketch(graph: nx.Graph, positions: dict[int, np.ndarray]) -> Sketch:
    """The links to draw among the clients at ``positions`` (see the module docstring)."""
    drawn = graph.subgraph(positions)
    n, m = drawn.number_of_nodes(), drawn.number_of_edges()
    shown = f" ({n} of {graph.number_of_nodes()} clients drawn)" if n < len(graph) else ""
    if m == 0:
        return Sketch(True, (), f"star: every client linked to the server{shown}")
    if m == n * (n - 1) // 2 and n > COMPLETE_DRAWN:
        return Sketch(False, (), f"complete graph: all {m:,} client-client links, not drawn{shown}")
    edges = sorted((min(int(a), int(b)), max(int(a), int(b))) for a, b in drawn.edges)
    if m <= MAX_LINKS:
        return Sketch(False, tuple(edges), f"{m:,} client-client links{shown}")
    k = math.ceil(m / MAX_LINKS)
    kept = tuple(edges[::k])
    caption = f"{len(kept):,} of {m:,} client-client links drawn (one in {k}){shown}"
    return Sketch(False, kept, caption)


def _number(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return None if not math.isfinite(float(value)) else round(float(value), 4)
    if isinstance(value, np.integer | np.bool_):
        return value.item()
    return value


def network_option(
    clients: pd.DataFrame,
    positions: dict[int, np.ndarray],
    plan: Sketch,
    *,
    rows: dict[int, str] | None = None,
    selected: int | None = None,
    height: int = 560,
) -> dict[str, Any]:
    """The ECharts option of the network: ``clients`` (one round of the clients table) at
    ``positions``, the links of ``plan``, ``rows`` (client id -> its row as HTML) as tooltips,
    ``selected`` outlined; drawn in a square box as high as the chart (``height`` pixels)."""
    frame = clients[clients["client_id"].isin(list(positions))] if len(clients) else clients
    option: dict[str, Any] = {
        "animation": False,
        "textStyle": {"fontSize": FONT},
        "title": {"text": plan.caption, "left": 0, "top": 0,
                  "textStyle": {"fontSize": FONT, "fontWeight": "normal", "color": "#444"}},
        "tooltip": {"trigger": "item", "confine": True, "textStyle": {"fontSize": 12}},
    }  # fmt: skip
    if frame.empty:
        option["title"]["text"] = "no clients to draw yet"
        option["series"] = []
        return option
    ids = frame["client_id"].to_numpy(int)
    states = client_states(frame).to_numpy()
    shrink = min(1.0, max(0.45, math.sqrt(60 / max(len(frame), 1))))
    sizes = shrink * (8 + 14 * budget_left(frame))
    colluder = frame["colluder"].to_numpy(bool)
    behaviours = sorted(set(frame["behaviour"].astype(str)))
    behaviour = frame["behaviour"].astype(str).to_numpy()
    present = [s for s in STATES if (states == s).any()]
    category = {s: i for i, s in enumerate(present)}
    rows = rows or {}
    nodes: list[dict[str, Any]] = []
    for i, cid in enumerate(ids):
        x, y = positions[int(cid)]
        ring = 3.5 if cid == selected else (2.5 if colluder[i] else 0.5)
        nodes.append({
            "id": str(cid), "name": f"client {cid}", "value": int(cid),
            "x": round(float(x) * 100, 2), "y": round(float(-y) * 100, 2),
            "symbolSize": round(float(sizes[i]) * (1.4 if cid == selected else 1.0), 1),
            "symbol": SYMBOLS[behaviours.index(behaviour[i]) % len(SYMBOLS)],
            "category": category[states[i]],
            "itemStyle": {"borderColor": "#000" if cid == selected or colluder[i] else "#fff",
                          "borderWidth": ring},
            "tooltip": {"formatter": rows.get(int(cid), f"client {cid}")},
        })  # fmt: skip
    links: list[dict[str, Any]] = []
    if plan.star:
        up = frame["link_up"].to_numpy(bool)
        nodes.append({
            "id": "server", "name": "server", "x": 0, "y": 0, "symbol": "rect", "symbolSize": 16,
            "itemStyle": {"color": "#000"}, "label": {"show": True, "position": "bottom",
                                                      "fontSize": 12},
            "tooltip": {"formatter": "the server"}, "category": len(present),
        })  # fmt: skip
        links = [
            {"source": "server", "target": str(cid),
             "lineStyle": {"color": "#ccc", "width": 0.8} if up[i]
             else {"color": "#d62728", "width": 1.4, "type": "dashed"}}
            for i, cid in enumerate(ids)
        ]  # fmt: skip
    else:
        links = [{"source": str(a), "target": str(b)} for a, b in plan.links]
    categories = [{"name": s, "itemStyle": {"color": COLOURS[s]}} for s in present]
    if plan.star:
        categories.append({"name": "server", "itemStyle": {"color": "#000"}})
    option["legend"] = {"data": present, "orient": "vertical", "right": 0, "top": 24,
                        "textStyle": {"fontSize": FONT}, "itemWidth": 14}  # fmt: skip
    subtitle = "size = ε budget left"
    if len(behaviours) > 1:
        subtitle += " · shape = " + ", ".join(
            f"{b}: {SYMBOLS[j % len(SYMBOLS)]}" for j, b in enumerate(behaviours)
        )
    if colluder.any():
        subtitle += " · black ring = colluder"
    option["title"]["subtext"] = subtitle + " · hover: the client's row · click: pin it"
    option["title"]["subtextStyle"] = {"fontSize": 12, "color": "#666"}
    option["series"] = [{
        "type": "graph", "layout": "none", "roam": True, "top": 60, "left": "center",
        "width": height - 76, "height": height - 76, "categories": categories, "data": nodes,
        "links": links,
        "lineStyle": {"color": "#bbb", "width": 0.6, "opacity": 0.5 if len(links) > 300 else 0.9},
        "emphasis": {"focus": "none", "scale": 1.6, "label": {"show": False}},
        "label": {"show": False}, "animation": False,
    }]  # fmt: skip
    return option
