"""The dashboard page: Mesa's SolaraViz around fedgame's three views.

SolaraViz gives the controls (Step, play/pause, Reset, the play interval) and the sidebar of
model parameters (the knobs of :mod:`fedgame.viz.knobs`; none in a replay); the main area holds
the client network with the round counter, the curves and the table of the round's clients.
``fedgame dashboard`` says what to show through the :data:`CONFIG_ENV` environment variable
(``{"scenario": file, "overrides": [...]}`` or ``{"replay": run_folder}``); each browser tab
gets its own model.
"""

from __future__ import annotations

import io
import json
import math
import os
from typing import Any

import solara
from matplotlib.figure import Figure
from mesa.visualization import SolaraViz

from fedgame.viz.curves import curves_figure
from fedgame.viz.data import DashboardData, settings_line
from fedgame.viz.network import network_figure
from fedgame.viz.serve import CONFIG_ENV
from fedgame.viz.table import round_table

#: resolution of the figures (they are shown at the card's width)
DPI = 110
#: figures fill their card's width, up to a height that fits the card (Mesa's grid cards have
#: a fixed height). Every slider shows its value: SolaraViz builds its sliders with Solara's
#: default thumb label, which Vuetify shows only while the thumb is dragged or focused; the
#: rules below keep that label shown, as a small badge above the thumb that follows the value
#: (the effect of Vuetify's ``thumb-label="always"``, which SolaraViz does not pass on).
CSS = """
.fedgame-figure { width: 100%; height: auto; max-height: 330px; object-fit: contain; }
.fedgame-figure.fedgame-network { max-height: 300px; }
.v-input__slider { margin-top: 16px; }
.v-slider__thumb-label-container { display: block !important; }
.v-slider__thumb-label {
    transform: translate(-50%, -21px) !important; width: auto !important; min-width: 22px;
    height: 16px !important; padding: 0 4px; border-radius: 3px; font-size: 11px;
}
.v-slider__thumb-label > * { transform: none !important; white-space: nowrap; }
"""


def build(config: dict[str, Any]) -> tuple[DashboardData, dict[str, Any]]:
    """The model to show and SolaraViz's ``model_params`` for re-creating it on Reset."""
    if "replay" in config:
        from fedgame.viz.replay import ReplayModel

        return ReplayModel(config["replay"]), {"run_dir": config["replay"]}
    from fedgame.scenario.load import load_scenario
    from fedgame.viz.knobs import model_params
    from fedgame.viz.live import DashboardModel

    scenario = load_scenario(config["scenario"], config.get("overrides", []))
    return DashboardModel(scenario), model_params(scenario)


def status_line(model: DashboardData) -> str:
    """``round 3 of 30 · 50 clients · test accuracy 0.612 · mean ε spent 4.20``."""
    rounds = model.history()
    parts = [f"round {model.steps} of {model.rounds_planned}"]
    clients = model.current_clients()
    if len(clients):
        parts.append(f"{len(clients)} clients")
    if len(rounds):
        last = rounds.iloc[-1]
        parts.append(f"test accuracy {float(last.get('test_accuracy', math.nan)):.3f}")
        parts.append(f"mean ε spent {float(last.get('epsilon_spent_mean', math.nan)):.2f}")
    return " · ".join(parts)


def png(figure: Figure) -> bytes:
    """The figure as PNG bytes (shown at the card's width)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def network_view(model: DashboardData) -> Any:
    """The round counter, the settings, any notice, and the network of the clients' states."""
    with solara.Column(gap="2px") as view:
        solara.Text(status_line(model), style={"font-weight": "bold", "font-size": "15px"})
        solara.Text(settings_line(model.settings), style={"font-size": "11px", "color": "#555"})
        if model.notice:
            solara.Warning(model.notice, dense=True)
        clients = model.current_clients()
        figure = network_figure(clients, model.graph, model.positions)
        solara.Image(png(figure), classes=["fedgame-figure", "fedgame-network"])
    return view


def curves_view(model: DashboardData) -> Any:
    """The rounds table so far, one panel per recorded quantity."""
    figure = curves_figure(model.history(), rounds_planned=model.rounds_planned)
    return solara.Image(png(figure), classes=["fedgame-figure", "fedgame-curves"])


def clients_view(model: DashboardData) -> Any:
    """The current round's clients, selected first."""
    with solara.Column(gap="2px") as view:
        solara.Text(f"clients of round {model.steps}", style={"font-weight": "bold"})
        solara.DataFrame(round_table(model.current_clients()), items_per_page=10)
    return view


@solara.component
def Page() -> None:
    """One dashboard per browser tab."""
    config = json.loads(os.environ.get(CONFIG_ENV, "{}"))
    model, params = solara.use_memo(lambda: build(config), [])
    solara.Style(CSS)
    SolaraViz(
        model,
        components=[(network_view, 0), (curves_view, 0), (clients_view, 0)],
        model_params=params,
        name=f"fedgame · {model.title}",
    )
