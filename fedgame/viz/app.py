"""The dashboard page: Mesa's SolaraViz controls around fedgame's interactive views.

SolaraViz gives the controls (Step, play/pause, Reset, the play interval) and the sidebar of
model parameters (the knobs of :mod:`fedgame.viz.knobs`; none in a replay). The main area is
fedgame's own, laid out once: the round counter and settings, the client network
(:mod:`fedgame.viz.network`), the curves (:mod:`fedgame.viz.curves`), the client picked by a
click, and the table of the round's clients (:mod:`fedgame.viz.table`). The figures are ECharts
widgets (``solara.FigureEcharts``; ECharts 5.4 ships in ``solara-assets``, so it loads
offline) whose option is replaced in place each round: nothing is rasterised or rebuilt on the
server, and hover tooltips run in the browser. A replay has a round slider (jump to any
recorded round) and, for a sweep, a choice of its runs. A market (a scenario with ``servers:``)
gets its own knobs (:mod:`fedgame.viz.market`) and views (:mod:`fedgame.viz.market_views`).

``fedgame dashboard`` says what to show through the :data:`CONFIG_ENV` environment variable
(``{"scenario": file, "overrides": [...]}`` or ``{"replay": run_folder}``); each browser tab
gets its own model.
"""

from __future__ import annotations

import json
import math
import os
import threading
from concurrent.futures import Future
from typing import Any

import solara
from mesa.visualization import SolaraViz
from mesa.visualization.utils import force_update, update_counter

from fedgame.scenario.schema import Scenario
from fedgame.viz.curves import curve_options
from fedgame.viz.data import DashboardData, settings_line
from fedgame.viz.knobs import GAMMA, INCENTIVE_KIND, gamma_start_hidden, model_params
from fedgame.viz.market_views import (
    market_curve_options,
    market_network_option,
    market_round_table,
    market_settings_line,
    market_status_line,
    server_names,
)
from fedgame.viz.network import network_option, sketch
from fedgame.viz.serve import CONFIG_ENV
from fedgame.viz.table import client_rows, round_table

#: page styles: readable text; every slider shows its value (SolaraViz builds its sliders with
#: Solara's default thumb label, which Vuetify shows only while the thumb is dragged or
#: focused; the rules below keep that label shown, as a small badge above the thumb).
CSS = """
.fedgame-main { padding: 8px 12px; font-size: 14px; }
.fedgame-views { display: flex; flex-wrap: wrap; gap: 12px; align-items: flex-start; }
.fedgame-network { flex: 1 1 640px; min-width: 480px; border: 1px solid #e0e0e0;
    border-radius: 4px; }
.fedgame-curves { flex: 1 1 640px; min-width: 480px; display: grid;
    grid-template-columns: repeat(auto-fill, minmax(290px, 1fr)); gap: 6px; }
.fedgame-curves > div { border: 1px solid #e0e0e0; border-radius: 4px; }
.fedgame-pinned { font-size: 13px; line-height: 1.45; padding: 6px 10px; background: #f6f8fa;
    border: 1px solid #d0d7de; border-radius: 4px; columns: 3 220px; }
.fedgame-table td, .fedgame-table th { font-size: 13px !important; }
.v-input__slider { margin-top: 16px; }
.v-slider__thumb-label-container { display: block !important; }
.v-slider__thumb-label {
    transform: translate(-50%, -21px) !important; width: auto !important; min-width: 22px;
    height: 16px !important; padding: 0 4px; border-radius: 3px; font-size: 11px;
}
.v-slider__thumb-label > * { transform: none !important; white-space: nowrap; }
"""
#: heights of the figures (pixels)
NETWORK_HEIGHT = 560
CURVE_HEIGHT = 210


#: the first tab's model, built by :func:`prebuild` while the server starts
_PREBUILT: list[Future[tuple[DashboardData, dict[str, Any]]]] = []
_PREBUILT_LOCK = threading.Lock()


def prebuild(config: dict[str, Any]) -> None:
    """Start building the first tab's model (torch, the data, the layout) in a thread, so that
    it overlaps the server's start and the browser's loading of the page."""
    future: Future[tuple[DashboardData, dict[str, Any]]] = Future()

    def work() -> None:
        try:
            model, params = build(config)
            model.positions  # noqa: B018  (the layout, computed once)
            future.set_result((model, params))
        except BaseException as exc:  # handed to the page that takes it
            future.set_exception(exc)

    with _PREBUILT_LOCK:
        _PREBUILT.append(future)
    threading.Thread(target=work, name="fedgame-prebuild", daemon=True).start()


def first_or_build(config: dict[str, Any]) -> tuple[DashboardData, dict[str, Any]]:
    """The prebuilt model for the first tab, a new one for any other."""
    with _PREBUILT_LOCK:
        future = _PREBUILT.pop() if _PREBUILT else None
    return future.result() if future is not None else build(config)


def build(config: dict[str, Any]) -> tuple[DashboardData, dict[str, Any]]:
    """The model to show and SolaraViz's ``model_params`` for re-creating it on Reset."""
    if "replay" in config:
        from fedgame.viz.replay import ReplayModel, RunChoice

        choice = RunChoice(config["replay"])
        return ReplayModel(choice), {"run_dir": choice}
    from fedgame.scenario.load import load_scenario
    from fedgame.viz.live import DashboardModel

    scenario = load_scenario(config["scenario"], config.get("overrides", []))
    if scenario.servers:  # a market (issue 35)
        from fedgame.viz.market import MarketDashboardModel, market_params

        return MarketDashboardModel(scenario), market_params(scenario)
    return DashboardModel(scenario), model_params(scenario)


def status_line(model: DashboardData) -> str:
    """``round 3 of 30 · 50 clients · test accuracy 0.612 · mean ε spent 4.20 · simulated in
    0.81 s`` (the last part: how long the latest round took to simulate, live models only);
    a market's (:func:`fedgame.viz.market_views.market_status_line`) names each server."""
    servers = server_names(model.settings)
    if servers:
        return market_status_line(
            model.history(), servers, step=model.steps, planned=model.rounds_planned,
            clients=clients_n(model) or 0, step_seconds=model.step_seconds,
        )  # fmt: skip
    rounds = model.history()
    parts = [f"round {model.steps} of {model.rounds_planned}"]
    clients = model.current_clients()
    if len(clients):
        parts.append(f"{len(clients)} clients")
    if len(rounds):
        last = rounds.iloc[-1]
        parts.append(f"test accuracy {float(last.get('test_accuracy', math.nan)):.3f}")
        parts.append(f"mean ε spent {float(last.get('epsilon_spent_mean', math.nan)):.2f}")
    if model.step_seconds > 0:
        parts.append(f"simulated in {model.step_seconds:.2f} s")
    return " · ".join(parts)


def clients_n(model: DashboardData) -> int | None:
    """N, the scenario's client count (tops the participants axis)."""
    n = model.settings.get("population", {}).get("clients")
    return int(n) if n else None


@solara.component
def Header(model: DashboardData) -> None:
    """The round counter, the settings, any notice."""
    update_counter.get()
    solara.Text(status_line(model), classes=["fedgame-status"],
                style={"font-weight": "bold", "font-size": "16px"})  # fmt: skip
    tree = model.settings
    line = market_settings_line(tree) if server_names(tree) else settings_line(tree)
    solara.Text(line, style={"font-size": "13px", "color": "#555"})
    if model.notice:
        solara.Warning(model.notice, dense=True)


@solara.component
def ReplayControls(model: Any, runs: dict[str, Any], on_run: Any) -> None:
    """A replay's round slider (any recorded round) and, for a sweep, its runs."""
    update_counter.get()

    def jump(value: int) -> None:
        model.jump(value)
        force_update()

    with solara.Row(style={"align-items": "center", "gap": "24px"}):
        with solara.Column(style={"min-width": "320px"}):
            solara.SliderInt("round", value=model.steps, min=0, max=max(model.last_round, 1),
                             on_value=jump, thumb_label="always")  # fmt: skip
        if runs:
            current = next((k for k, v in runs.items() if v == model.run_dir), None)
            solara.Select("run of the sweep", values=list(runs), value=current,
                          on_value=on_run, style={"min-width": "420px"})  # fmt: skip


@solara.component
def Views(model: DashboardData, selected: solara.Reactive[int | None]) -> None:
    """The network, the curves, the picked client and the round's table (re-read each round);
    a market's are those of :mod:`fedgame.viz.market_views`."""
    update_counter.get()
    plan = solara.use_memo(lambda: sketch(model.graph, model.positions), [model])
    servers = server_names(model.settings)
    table = (market_round_table if servers else round_table)(model.current_clients())
    rows = client_rows(table)

    def on_click(event: Any) -> None:
        datum = (event or {}).get("data") or {}
        if (event or {}).get("dataType") == "node" and isinstance(datum.get("value"), int):
            selected.set(int(datum["value"]))

    if servers:
        option = market_network_option(
            model.current_clients(), model.positions, plan, servers, rows=rows,
            selected=selected.value, height=NETWORK_HEIGHT,
        )  # fmt: skip
    else:
        option = network_option(
            model.current_clients(),
            model.positions,
            plan,
            rows=rows,
            selected=selected.value,
            height=NETWORK_HEIGHT,
        )
    with solara.Div(classes=["fedgame-views"]):
        with solara.Div(classes=["fedgame-network"]):
            solara.FigureEcharts(
                option=option, on_click=on_click, responsive=True,
                attributes={"style": f"height: {NETWORK_HEIGHT}px; width: 100%;",
                            "class": "fedgame-network-chart"},
            )  # fmt: skip
        if servers:
            curves = market_curve_options(
                model.history(), servers, rounds_planned=model.rounds_planned,
                clients=clients_n(model),
            )  # fmt: skip
        else:
            curves = curve_options(
                model.history(), rounds_planned=model.rounds_planned, clients=clients_n(model)
            )
        with solara.Div(classes=["fedgame-curves"]):
            for title, panel in curves.items():
                solara.FigureEcharts(
                    option=panel, responsive=True,
                    attributes={"style": f"height: {CURVE_HEIGHT}px; width: 100%;",
                                "class": "fedgame-curve", "data-panel": title},
                )  # fmt: skip
    if selected.value is not None:
        text = rows.get(selected.value, f"<b>client {selected.value}</b><br/>not in this round")
        with solara.Row(style={"align-items": "flex-start"}):
            solara.HTML(tag="div", unsafe_innerHTML=text, classes=["fedgame-pinned"])
            solara.Button("unpin", text=True, on_click=lambda: selected.set(None))
    solara.Text(f"clients of round {model.steps}", style={"font-weight": "bold"})
    with solara.Div(classes=["fedgame-table"]):
        solara.DataFrame(table, items_per_page=10)


@solara.component
def Page() -> None:
    """One dashboard per browser tab."""
    config = json.loads(os.environ.get(CONFIG_ENV, "{}"))
    first, params = solara.use_memo(lambda: first_or_build(config), [])
    model = solara.use_reactive(first)  # shared with SolaraViz, whose Reset replaces it
    selected: solara.Reactive[int | None] = solara.use_reactive(None)
    runs = solara.use_memo(lambda: _sweep_runs(config), [])
    base = params.get("scenario")
    kind = solara.use_reactive(base.incentive.kind if base is not None else "")
    gamma = solara.use_reactive(gamma_start_hidden(base) if base is not None else 0.0)
    if base is not None and not base.servers:  # one server: the knobs follow the kind chosen
        params = following_kind(base, kind, gamma)
    solara.Style(CSS)
    solara.Title(f"fedgame · {model.value.title}")
    SolaraViz(model, components=[], model_params=params, name=f"fedgame · {model.value.title}")

    def open_run(label: str) -> None:
        from fedgame.viz.replay import ReplayModel

        params["run_dir"].path = runs[label]  # Reset reopens the run chosen last
        selected.set(None)
        model.set(ReplayModel(params["run_dir"]))
        force_update()

    with solara.Column(classes=["fedgame-main"], gap="6px"):
        Header(model.value)
        if "replay" in config:
            ReplayControls(model.value, runs, open_run)
        Views(model.value, selected)


def following_kind(
    scenario: Scenario, kind: solara.Reactive[str], gamma: solara.Reactive[float]
) -> dict[str, Any]:
    """SolaraViz ``model_params`` for the reward kind chosen on the page (``kind``).

    The kind's choice and γ are inputs the page keeps (``kind``, ``gamma``), so that the page
    re-renders its knobs when the kind changes (γ shows only under a kind with γ) and a γ
    hidden and shown again keeps its value; Reset reads their current values
    (:func:`fedgame.viz.live.current`). While hidden, γ is passed as a fixed parameter.
    """
    params = model_params(scenario, kind.value)
    params[INCENTIVE_KIND.replace(".", "__")]["value"] = kind
    key = GAMMA.replace(".", "__")
    if key in params:
        params[key]["value"] = gamma
    else:
        params[key] = gamma
    return params


def _sweep_runs(config: dict[str, Any]) -> dict[str, Any]:
    if "replay" not in config:
        return {}
    from fedgame.viz.replay import sweep_runs

    return sweep_runs(config["replay"])
