"""``fedgame dashboard`` in a real browser: headless Chromium (Playwright) steps a live model and
replays a finished run; every view must change as rounds go by."""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedgame.viz.serve import bind

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "scenarios" / "quickstart.yaml"


def _chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


CHROMIUM = _chromium()
playwright = pytest.importorskip("playwright.sync_api", reason="playwright not installed")
pytest.importorskip("solara", reason="the viz extra (solara) is not installed")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None, reason="no Chromium on this machine (apt-get install chromium)"
)


def _free_port() -> int:
    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    sock.close()
    return port


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[callable]:
    """Start ``fedgame dashboard ARGS`` on a free port; yields a function returning its URL."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> str:
        port = _free_port()
        log = (tmp_path / f"dashboard-{port}.log").open("w")
        code = "import sys; from fedgame.cli import main; sys.exit(main())"
        proc = subprocess.Popen(
            [sys.executable, "-c", code, "dashboard", *args, "--port", str(port)],
            cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT, text=True,
            env={**os.environ, "MPLBACKEND": "Agg"},
        )  # fmt: skip
        started.append(proc)
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 120
        while f"dashboard: {url}" not in (tmp_path / f"dashboard-{port}.log").read_text():
            assert proc.poll() is None, (tmp_path / f"dashboard-{port}.log").read_text()
            assert time.monotonic() < deadline, "dashboard did not start in 120 s"
            time.sleep(0.5)
        return url

    yield start
    for proc in started:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()


#: the ECharts instance behind a chart element (Solara's FigureEcharts keeps it on its Vue
#: component) and what it draws now: the series' data as JSON
CHART_DATA = """(el) => JSON.stringify(el.__vue__.chart.getOption().series.map(s => s.data))"""
#: the page position of client ``id`` in the network chart
NODE_XY = """(el, id) => {
    const chart = el.__vue__.chart;
    const node = chart.getOption().series[0].data.find(d => d.id === String(id));
    const [x, y] = chart.convertToPixel({seriesIndex: 0}, [node.x, node.y]);
    const box = el.getBoundingClientRect();
    return [box.left + x, box.top + y];
}"""


def _chart_data(page, selector: str) -> str:
    """What the chart ``selector`` draws (its series' data), once it has drawn something."""
    page.wait_for_function(
        "(s) => { const el = document.querySelector(s);"
        " return !!(el && el.__vue__ && el.__vue__.chart); }",
        arg=selector,
        timeout=60_000,
    )
    return page.locator(selector).first.evaluate(CHART_DATA)


def _views(page) -> dict[str, str]:
    """What the page shows now: the round counter line and what the two figures draw."""
    return {
        "counter": page.locator("text=/^round \\d+ of \\d+/").first.inner_text(),
        "network": _chart_data(page, ".fedgame-network-chart"),
        "curves": _chart_data(page, ".fedgame-curve"),
    }


def _step_latency(page, n: int) -> tuple[float, float]:
    """Click Step; seconds until round ``n`` shows with its network, and the simulation's."""
    before = _chart_data(page, ".fedgame-network-chart")
    start = time.perf_counter()
    page.get_by_role("button", name="Step").click()
    status = page.locator(f"text=/^round {n} of /").first
    status.wait_for(timeout=120_000)
    page.wait_for_function(
        "([s, old]) => JSON.stringify(document.querySelector(s).__vue__.chart.getOption()"
        ".series.map(x => x.data)) !== old",
        arg=[".fedgame-network-chart", before],
        timeout=60_000,
    )
    took = time.perf_counter() - start
    simulated = re.search(r"simulated in ([\d.]+) s", status.inner_text())
    assert simulated is not None, status.inner_text()
    return took, float(simulated[1])


def _slider_value(page, label: str) -> str:
    """The value a sidebar slider shows (its thumb label), which must be visible."""
    shown = page.get_by_role("slider", name=label).locator(".v-slider__thumb-label")
    assert shown.is_visible(), f"the value of slider {label!r} is not shown"
    box = shown.bounding_box()
    assert box is not None and box["width"] > 5 and box["height"] > 5
    return shown.inner_text().strip()


def _choose(page, label: str, option: str) -> None:
    """Pick ``option`` in the sidebar's select ``label``."""
    page.get_by_role("button", name=label).click()
    page.get_by_role("option", name=option).click()


def _wait_for_slider(page, label: str, value: str) -> None:
    """Until the sidebar slider ``label`` is there and shows ``value``."""
    page.wait_for_function(
        "([label, value]) => [...document.querySelectorAll('[role=slider]')].some(e =>"
        " e.getAttribute('aria-label') === label"
        " && e.querySelector('.v-slider__thumb-label').innerText.trim() === value)",
        arg=[label, value],
        timeout=30_000,
    )


#: the first page's wait: the server answers before SolaraViz, torch and the model are loaded
FIRST_PAGE_MS = 240_000


def _wait_for_round(page, n: int, timeout: int = 120_000) -> None:
    page.locator(f"text=/^round {n} of /").first.wait_for(timeout=timeout)


@pytest.fixture
def browser():
    with playwright.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        yield chromium
        chromium.close()


def test_stepping_a_live_scenario_updates_the_views_and_a_client_answers_hover_and_click(
    dashboard, browser, tmp_path
):
    url = dashboard(str(QUICKSTART), "--set", "population.clients=20")
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(url)
    _wait_for_round(page, 0, FIRST_PAGE_MS)
    before = _views(page)
    assert before["counter"].startswith("round 0 of 30 · 20 clients")
    assert page.title() == "fedgame · quickstart"
    assert page.get_by_role("tab").count() == 0  # no "Page 0" tab
    assert page.get_by_text("This website runs on").count() == 0  # no badge over the charts
    assert page.get_by_role("slider", name="γ (incentive)").count() == 0  # incentive: none
    assert _slider_value(page, "clients N") == "20"
    page.get_by_role("slider", name="clients N").focus()
    page.keyboard.press("ArrowRight")  # one step: 21 clients, applied on Reset
    page.wait_for_function(
        "() => [...document.querySelectorAll('.v-slider__thumb-label')]"
        ".some(e => e.innerText.trim() === '21')",
        timeout=30_000,
    )
    assert _slider_value(page, "clients N") == "21"
    assert _slider_value(page, "straggle probability") == "0.1"
    steps = [_step_latency(page, n) for n in (1, 2, 3)]
    over = statistics.median(took - simulated for took, simulated in steps)
    print(f"step latency at 20 clients: {[round(t, 2) for t, _ in steps]} s; "
          f"median {over:.2f} s over the simulation")  # fmt: skip
    assert over < 10.0, steps  # generous: a PNG rebuild per step took 2-7 s on 2 idle cores
    after = _views(page)
    assert after["counter"].startswith("round 3 of 30 · 20 clients")
    assert after["curves"] != before["curves"] and after["network"] != before["network"]
    page.get_by_text("clients of round 3").wait_for(timeout=30_000)

    network = page.locator(".fedgame-network-chart").first
    x, y = network.evaluate(NODE_XY, 7)
    page.mouse.move(x, y)
    tooltip = page.locator("div", has_text=re.compile(r"^client 7\s*behaviour: ")).last
    tooltip.wait_for(timeout=30_000)
    assert "state: " in tooltip.inner_text() and "epsilon_spent: " in tooltip.inner_text()
    page.mouse.click(x, y)
    pinned = page.locator(".fedgame-pinned")
    pinned.wait_for(timeout=30_000)
    assert pinned.inner_text().startswith("client 7") and "state: " in pinned.inner_text()
    page.screenshot(path=str(tmp_path / "dashboard-live.png"), full_page=True)
    page.get_by_role("button", name="Reset").click()
    page.locator("text=/^round 0 of 30 · 21 clients/").first.wait_for(timeout=120_000)


def test_the_knobs_follow_the_reward_kind_chosen_on_the_page(dashboard, browser):
    url = dashboard(str(QUICKSTART), "--set", "population.clients=12")
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(url)
    _wait_for_round(page, 0, FIRST_PAGE_MS)
    gamma = page.get_by_role("slider", name="γ (incentive)")
    assert gamma.count() == 0  # incentive: none has no γ
    _choose(page, "reward (incentive)", "qi_dpfl")
    gamma.wait_for(state="attached", timeout=30_000)
    assert _slider_value(page, "γ (incentive)") == "0.5"  # every shipped kind's default
    assert _slider_value(page, "clients N") == "12"  # the others stay as they were
    gamma.focus()
    page.keyboard.press("ArrowRight")
    _wait_for_slider(page, "γ (incentive)", "0.55")
    _choose(page, "reward (incentive)", "none")
    gamma.wait_for(state="detached", timeout=30_000)  # gone again
    _choose(page, "reward (incentive)", "stackelberg")
    gamma.wait_for(state="attached", timeout=30_000)
    assert _slider_value(page, "γ (incentive)") == "0.55"  # kept while hidden
    page.get_by_role("button", name="Reset").click()  # the chosen kind and γ are applied
    page.get_by_text(re.compile(r"incentive stackelberg \(γ = 0\.55\)")).wait_for(timeout=120_000)
    _wait_for_round(page, 0)


def test_a_finished_run_replays_read_only(dashboard, browser, tmp_path):
    out = tmp_path / "results"
    code = "import sys; from fedgame.cli import main; sys.exit(main())"
    subprocess.run(
        [sys.executable, "-c", code, "run", str(QUICKSTART), "--quiet", "--out", str(out),
         "--set", "population.clients=12", "--set", "rounds=3"],
        check=True, timeout=300,
    )  # fmt: skip
    files = sorted(p.relative_to(out) for p in out.rglob("*"))
    url = dashboard(str(out / "quickstart"))
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(url)
    _wait_for_round(page, 1, FIRST_PAGE_MS)  # a replay opens at the first recorded round
    assert page.get_by_text("replay of").count() >= 1
    before = _views(page)
    for n in (2, 3):
        page.get_by_role("button", name="Step").click()
        _wait_for_round(page, n)
    page.wait_for_timeout(500)
    after = _views(page)
    assert after["curves"] != before["curves"] and after["network"] != before["network"]
    page.get_by_role("slider", name="round").focus()
    page.keyboard.press("ArrowLeft")  # jump back one round
    _wait_for_round(page, 2)
    page.get_by_text("clients of round 2").wait_for(timeout=30_000)  # the table's title too
    page.screenshot(path=str(tmp_path / "dashboard-replay.png"), full_page=True)
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == files  # nothing written


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path):
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    try:
        code = "import sys; from fedgame.cli import main; sys.exit(main())"
        result = subprocess.run(
            [sys.executable, "-c", code, "dashboard", str(QUICKSTART), "--port", str(port)],
            capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
    finally:
        sock.close()
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"127.0.0.1:{port} is in use" in result.stderr


def test_an_auction_replay_shows_the_mechanism_chart_and_updates_it_in_place(
    dashboard, browser, tmp_path
):
    out = tmp_path / "results"
    code = "import sys; from fedgame.cli import main; sys.exit(main())"
    # check=False: exit 4 (degenerate play) keeps the finished rounds
    subprocess.run(
        [sys.executable, "-c", code, "run", str(REPO / "scenarios" / "auction_first_price.yaml"),
         "--quiet", "--out", str(out), "--set", "rounds=3"],
        check=False, timeout=300,
    )  # fmt: skip
    url = dashboard(str(out / "auction_first_price"))
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(url)
    _wait_for_round(page, 1, FIRST_PAGE_MS)
    chart = '.fedgame-curve[data-panel="mechanism"]'
    before = _chart_data(page, chart)
    assert page.locator(chart).count() == 1
    page.get_by_role("button", name="Step").click()
    _wait_for_round(page, 2)
    page.wait_for_function(
        "([s, old]) => JSON.stringify(document.querySelector(s).__vue__.chart.getOption()"
        ".series.map(x => x.data)) !== old",
        arg=[chart, before],
        timeout=60_000,
    )
    assert page.locator(chart).count() == 1  # the same chart, redrawn in place
    page.locator(chart).screenshot(path=str(tmp_path / "dashboard-mechanism.png"))


#: what a chart draws: each series' name and data
CHART_SERIES = """(el) => el.__vue__.chart.getOption().series.map(s => [s.name, s.data])"""
DUOPOLY = REPO / "scenarios" / "duopoly_asymmetric.yaml"
#: the market's per-server charts and the rounds column each draws
MARKET_CHARTS = (
    ("test accuracy", "test_accuracy"),
    ("market share (Σρ won)", "market_share"),
    ("reward R offered", "reward"),
    ("payments", "payments_total"),
)


def _panel(page, title: str) -> dict[str, list[list[float]]]:
    """The series of the curve panel ``title`` by name: ``{server: [[round, value], ...]}``."""
    chart = f'.fedgame-curve[data-panel="{title}"]'
    _chart_data(page, chart)
    return dict(page.locator(chart).first.evaluate(CHART_SERIES))


def _table_series(rounds, column: str) -> dict[str, list[list[float]]]:
    return {
        str(name): [[int(r), float(v)] for r, v in zip(part["round"], part[column])]
        for name, part in rounds.groupby("server", sort=False)
    }


def _assert_same_series(drawn: dict, table: dict) -> None:
    assert list(drawn) == list(table)  # both servers, in the scenario's order
    for name, points in table.items():
        assert [p[0] for p in drawn[name]] == [p[0] for p in points], name
        assert [p[1] for p in drawn[name]] == pytest.approx([p[1] for p in points], abs=2e-6)


def test_a_market_steps_live_with_a_curve_per_server_and_replays_the_same(
    dashboard, browser, tmp_path
):
    import pandas as pd

    out = tmp_path / "results"
    code = "import sys; from fedgame.cli import main; sys.exit(main())"
    subprocess.run(
        [sys.executable, "-c", code, "run", str(DUOPOLY), "--quiet", "--out", str(out),
         "--set", "rounds=3"],
        check=True, timeout=300,
    )  # fmt: skip
    (run,) = (out / "duopoly_asymmetric").glob("*/manifest.json")
    rounds = pd.read_parquet(run.parent / "rounds.parquet")

    url = dashboard(str(DUOPOLY), "--set", "rounds=3")
    page = browser.new_page(viewport={"width": 1440, "height": 1000})
    page.goto(url)
    _wait_for_round(page, 0, FIRST_PAGE_MS)
    counter = page.locator("text=/^round \\d+ of \\d+/").first
    assert counter.inner_text().startswith("round 0 of 3 · 20 clients · 2 servers")
    assert page.get_by_text("servers Big (incentive: {gamma: 0.8}), Small").count() == 1
    assert page.get_by_role("slider", name="γ (incentive)").count() == 0  # no market-wide γ
    assert page.get_by_role("button", name="reward (incentive)").count() == 0
    assert _slider_value(page, "γ of server Big") == "0.8"
    assert _slider_value(page, "γ of server Small") == "0.5"
    for n in (1, 2, 3):
        page.get_by_role("button", name="Step").click()
        _wait_for_round(page, n)
    page.wait_for_function(
        "() => document.querySelector('.fedgame-curve[data-panel=\"test accuracy\"]')"
        ".__vue__.chart.getOption().series[0].data.length === 3",
        timeout=60_000,
    )
    text = counter.inner_text()
    last = rounds[rounds["round"] == 3].set_index("server")
    for name in ("Big", "Small"):
        assert f"{name} {last.loc[name, 'test_accuracy']:.3f}" in text, text
    live = {}
    for title, column in MARKET_CHARTS:
        live[title] = _panel(page, title)
        _assert_same_series(live[title], _table_series(rounds, column))
    hhi = _panel(page, "Herfindahl index (HHI)")
    market = rounds.drop_duplicates("round")
    assert [p[1] for p in hhi["HHI"]] == pytest.approx(market["hhi"].tolist(), abs=2e-6)
    legend = page.locator(".fedgame-network-chart").first.evaluate(
        "(el) => el.__vue__.chart.getOption().legend[0].data"
    )
    assert legend == ["served Big and Small"]  # every client delivered to both this round
    page.get_by_text("clients of round 3").wait_for(timeout=30_000)
    assert page.get_by_role("columnheader", name="payment_Small").count() == 1
    page.screenshot(path=str(tmp_path / "dashboard-market.png"), full_page=True)

    page.get_by_role("slider", name="γ of server Small").focus()
    page.keyboard.press("ArrowRight")  # 0.55, applied on Reset
    _wait_for_slider(page, "γ of server Small", "0.55")
    page.get_by_role("button", name="Reset").click()
    page.get_by_text("servers Big (incentive: {gamma: 0.8}), Small (incentive: {gamma: 0.55})")\
        .wait_for(timeout=120_000)  # fmt: skip
    _wait_for_round(page, 0)

    replay = browser.new_page(viewport={"width": 1440, "height": 1000})
    replay.goto(dashboard(str(run.parent)))
    _wait_for_round(replay, 1, FIRST_PAGE_MS)
    for n in (2, 3):
        replay.get_by_role("button", name="Step").click()
        _wait_for_round(replay, n)
    replay.wait_for_function(
        "() => document.querySelector('.fedgame-curve[data-panel=\"test accuracy\"]')"
        ".__vue__.chart.getOption().series[0].data.length === 3",
        timeout=60_000,
    )
    for title, drawn in live.items():
        assert _panel(replay, title) == drawn, title  # the replay draws what the live run did
    replay.screenshot(path=str(tmp_path / "dashboard-market-replay.png"), full_page=True)


def test_the_dashboard_bench_times_a_bare_solara_page_as_its_floor():
    """``bench/dashboard.py --floor`` serves a page with nothing of fedgame in it as the
    dashboard serves its own, and prints how long Chromium took to show it."""
    repo = Path(__file__).resolve().parents[2]
    cmd = [sys.executable, "bench/dashboard.py", "--floor", "--clients", "5"]
    proc = subprocess.run(
        cmd, cwd=repo, capture_output=True, text=True, timeout=300,
        env={**os.environ, "CHROMIUM": CHROMIUM or ""},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    line = proc.stdout.splitlines()[1]
    found = re.fullmatch(
        r"   5 clients, bare Solara page: first page ([\d.]+) s \(([\d.]+) s of CPU in the "
        r"server's process\)",
        line,
    )
    assert found, line
    assert float(found[1]) > 0 and float(found[2]) > 0
