"""The client network, coloured by each client's state this round.

Encoding: fill colour = the round's state (:data:`fedgame.viz.data.STATES`: uploaded,
straggled, link down, out of budget, willing but not selected, declined); size = the share of
its ε budget left; a thick black ring = a colluder; marker shape = its behaviour (agent type).
Client-client links (the topology's edges) are grey lines; with no such links (the ``star``
topology) the clients sit on a circle around the server (the black square) and each line to the
server is drawn, red and dashed when that link is down. Above :data:`MAX_DRAWN` clients only the
first ones are drawn (the title says so).
"""

from __future__ import annotations

import networkx as nx
import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D

from fedgame.viz.data import STATES, budget_left, client_states

#: most clients the view draws
MAX_DRAWN = 400
COLOURS = dict(
    zip(STATES, ("#2ca02c", "#ff7f0e", "#d62728", "#9467bd", "#1f77b4", "#c7c7c7", "#e0e0e0"))
)
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")


def layout(graph: nx.Graph) -> dict[int, np.ndarray]:
    """Client positions: a seeded spring layout when clients share links, else a circle."""
    nodes = sorted(graph.nodes)[:MAX_DRAWN]
    drawn = graph.subgraph(nodes)
    if drawn.number_of_edges() == 0:
        return {int(k): np.asarray(v) for k, v in nx.circular_layout(nodes).items()}
    return {int(k): np.asarray(v) for k, v in nx.spring_layout(drawn, seed=0).items()}


def network_figure(
    clients: pd.DataFrame,
    graph: nx.Graph,
    positions: dict[int, np.ndarray],
    *,
    title: str = "",
) -> Figure:
    """Draw the clients (``clients``: one round of the clients table) on ``positions``."""
    fig = Figure(figsize=(6.4, 4.4), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_aspect("equal")
    rows = clients[clients["client_id"].isin(list(positions))] if len(clients) else clients
    if rows.empty:
        ax.set_title(f"{title}\nno clients to draw")
        return fig
    ids = rows["client_id"].to_numpy(int)
    xy = np.array([positions[int(i)] for i in ids])
    star = graph.subgraph(positions).number_of_edges() == 0
    _draw_links(ax, rows, graph, positions, xy, star=star)
    states = client_states(rows).to_numpy()
    sizes = 30 + 170 * budget_left(rows)
    colluder = rows["colluder"].to_numpy(bool)
    behaviours = sorted(set(rows["behaviour"]))
    for j, label in enumerate(behaviours):
        mine = (rows["behaviour"] == label).to_numpy()
        ax.scatter(
            xy[mine, 0], xy[mine, 1], s=sizes[mine], marker=MARKERS[j % len(MARKERS)],
            c=[COLOURS[s] for s in states[mine]],
            edgecolors=["k" if c else "w" for c in colluder[mine]],
            linewidths=[2.2 if c else 0.6 for c in colluder[mine]], zorder=3,
        )  # fmt: skip
    _legend(ax, states, behaviours, colluder.any())
    more = f" (first {len(ids)} of {len(clients)} drawn)" if len(ids) < len(clients) else ""
    ax.set_title(f"{title}{more}", fontsize=10)
    return fig


def _draw_links(
    ax: Axes,
    rows: pd.DataFrame,
    graph: nx.Graph,
    positions: dict[int, np.ndarray],
    xy: np.ndarray,
    *,
    star: bool,
) -> None:
    """Client-server lines around a central server (``star``), else the client-client edges."""
    if star:
        up = rows["link_up"].to_numpy(bool)
        spokes = np.stack([np.zeros_like(xy), xy], axis=1)
        ax.add_collection(LineCollection(spokes[up], colors="#dddddd", linewidths=0.6, zorder=1))
        ax.add_collection(
            LineCollection(spokes[~up], colors="#d62728", linewidths=1.2, linestyles="--")
        )
        ax.scatter([0], [0], marker="s", s=140, c="k", zorder=4)
        ax.annotate("server", (0, 0), xytext=(0, -14), textcoords="offset points",
                    ha="center", fontsize=8)  # fmt: skip
        return
    edges = [(positions[int(a)], positions[int(b)]) for a, b in graph.subgraph(positions).edges]
    ax.add_collection(LineCollection(edges, colors="#cccccc", linewidths=0.5, zorder=1))


def _legend(ax: Axes, states: np.ndarray, behaviours: list[str], colluders: bool) -> None:
    present = [s for s in STATES if (states == s).any()]
    handles = [
        Line2D([], [], marker="o", ls="", color=COLOURS[s], markersize=8, label=s) for s in present
    ]
    if len(behaviours) > 1:
        handles += [
            Line2D([], [], marker=MARKERS[j % len(MARKERS)], ls="", color="grey", label=label)
            for j, label in enumerate(behaviours)
        ]
    if colluders:
        handles.append(Line2D([], [], marker="o", ls="", mfc="w", mec="k", mew=2, label="colluder"))
    handles.append(Line2D([], [], ls="", label="size = ε budget left"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8,
              frameon=False)  # fmt: skip
