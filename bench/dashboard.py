"""How fast ``fedgame dashboard`` answers: first page and step latency, in headless Chromium.

For each client count it starts ``fedgame dashboard SCENARIO --set population.clients=N`` on a
free port and times:

- **first page**: from starting the command to the page showing ``round 0`` with the client
  network drawn, and the CPU seconds the dashboard's process had used by then (Linux: from
  ``/proc``), a figure that moves less than the wall time on a loaded machine;
- **step**: from clicking Step to the page showing the next round (counter and network), for
  ``--steps`` steps; the page says how long the round took to simulate (``simulated in X s``),
  and the figure reported is the median of (latency − simulation time), the cost of showing a
  round. Targets (issue 33): first page ≤ 5 s; a step ≤ 0.5 s over the simulation at 50
  clients, ≤ 1 s at 200.

``--floor`` times the same first page of a bare Solara app instead: a page with nothing of
fedgame, Mesa or torch in it, only the status text and an ECharts graph of the clients (no
links), served as ``fedgame dashboard`` serves its page (:mod:`fedgame.viz.serve`: a bound
socket, uvicorn, local assets, no compression). No dashboard built on Solara answers sooner on
the machine, so it is the floor under the first-page target.

Needs the viz extra, Playwright and a Chromium (``/usr/bin/chromium``)::

    python bench/dashboard.py                      # quickstart at 50 and 200 clients
    python bench/dashboard.py --clients 200 --set network.topology.kind=watts_strogatz
    python bench/dashboard.py --floor --clients 50  # a bare Solara page, for comparison
"""

from __future__ import annotations

import argparse
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: seconds to wait for the page or a step (generous: the machine may be loaded)
LIMIT = 300
#: the page's network has been drawn: the ECharts instance holds a graph series with nodes
DRAWN = """() => {
    if (document.querySelector('img.fedgame-network')) return true;  // the older PNG page
    const el = document.querySelector('.fedgame-network-chart');
    const chart = el && el.__vue__ && el.__vue__.chart;
    if (!chart) return false;
    const series = chart.getOption().series || [];
    return series.length > 0 && (series[0].data || []).length > 0;
}"""


def chromium() -> str:
    """The Chromium to drive (``CHROMIUM`` or the first on ``PATH``)."""
    for name in (os.environ.get("CHROMIUM", ""), "chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name) if name else None
        if found:
            return found
    sys.exit("bench/dashboard.py: no Chromium found (apt-get install chromium, or set CHROMIUM)")


#: the bare page of ``--floor`` (its module is written next to the log; ``{n}`` clients)
FLOOR_PAGE = """import solara

NODES = [{{"name": str(i), "x": i % 20, "y": i // 20}} for i in range({n})]


@solara.component
def Page():
    solara.Text("round 0 of 30")
    option = {{"series": [{{"type": "graph", "layout": "none", "data": NODES, "links": []}}]}}
    solara.FigureEcharts(option=option, attributes={{"class": "fedgame-network-chart"}})
"""

#: serves ``floor_page:Page`` on the port in ``argv[1]`` as :func:`fedgame.viz.serve.serve` does
#: (its socket written out, its Solara settings from the environment :func:`start_floor` gives
#: it: the process imports nothing of fedgame)
FLOOR_SERVER = """import socket, sys
sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", int(sys.argv[1])))
sock.listen(128)
import solara.server.starlette, uvicorn
from solara.server.app import ensure_apps_initialized
ensure_apps_initialized()
config = uvicorn.Config("solara.server.starlette:app", log_level="warning", access_log=False)
uvicorn.Server(config).run(sockets=[sock])
"""


def start_floor(clients: int, port: int, log: Path) -> subprocess.Popen[bytes]:
    """The bare Solara page of ``--floor`` on ``port``, its output in ``log``."""
    (log.parent / "floor_page.py").write_text(FLOOR_PAGE.format(n=clients))
    from fedgame.viz.serve import SOLARA_ENV  # the dashboard's own Solara settings

    args = [sys.executable, "-c", FLOOR_SERVER, str(port)]
    env = {**os.environ, **SOLARA_ENV, "PYTHONPATH": str(log.parent)}
    env.update(SOLARA_SERVER_HTTP_GZIP="false", SOLARA_APP="floor_page:Page")
    return subprocess.Popen(
        args, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=log.parent, env=env
    )


def start(scenario: str, sets: list[str], port: int, log: Path) -> subprocess.Popen[bytes]:
    """``fedgame dashboard`` on ``port``, its output in ``log``."""
    code = "import sys; from fedgame.cli import main; sys.exit(main())"
    args = [sys.executable, "-c", code, "dashboard", scenario, "--port", str(port)]
    for item in sets:
        args += ["--set", item]
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=log.parent)


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used (``nan`` without ``/proc``)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def measure(
    browser, scenario: str, sets: list[str], steps: int, folder: Path, *, floor: int = 0
) -> dict[str, float]:
    """First-page time and per-step latencies of one dashboard (with ``floor``: the first
    page of the bare Solara page with that many clients, and no steps)."""
    from fedgame.viz.serve import bind

    sock = bind("127.0.0.1", 0)
    port = int(sock.getsockname()[1])
    sock.close()
    url = f"http://127.0.0.1:{port}/"
    t0 = time.perf_counter()
    log = folder / f"dashboard-{port}.log"
    proc = start_floor(floor, port, log) if floor else start(scenario, sets, port, log)
    try:
        page = browser.new_page(viewport={"width": 1440, "height": 1000})
        while True:
            try:
                page.goto(url, timeout=2000)
                break
            except Exception:  # the server is not answering yet
                if proc.poll() is not None or time.perf_counter() - t0 > LIMIT:
                    raise RuntimeError(log.read_text()) from None
                time.sleep(0.1)
        page.locator("text=/^round 0 of /").first.wait_for(timeout=LIMIT * 1000)
        page.wait_for_function(DRAWN, timeout=LIMIT * 1000)
        first = time.perf_counter() - t0
        cpu = cpu_seconds(proc.pid)
        over: list[float] = []
        total: list[float] = []
        for n in range(1, 0 if floor else steps + 1):
            start_click = time.perf_counter()
            page.get_by_role("button", name="Step").click()
            status = page.locator(f"text=/^round {n} of /").first
            status.wait_for(timeout=LIMIT * 1000)
            page.wait_for_function(DRAWN, timeout=LIMIT * 1000)
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
            took = time.perf_counter() - start_click
            found = re.search(r"simulated in ([\d.]+) s", status.inner_text())
            simulated = float(found[1]) if found else math.nan  # an older page does not say
            total.append(took)
            over.append(took - simulated)
        page.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    return {
        "first": first,
        "cpu": cpu,
        "step": statistics.median(total) if total else math.nan,
        "over": statistics.median(over) if over else math.nan,
    }


def main() -> None:
    """Print the figures for each client count."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default=str(REPO / "scenarios" / "quickstart.yaml"))
    parser.add_argument("--clients", type=int, nargs="+", default=[50, 200])
    parser.add_argument("--steps", type=int, default=5, help="steps timed per dashboard")
    parser.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument(
        "--floor", action="store_true", help="time a bare Solara page instead (module doc)"
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), headless=True,
                                    args=["--no-sandbox"])  # fmt: skip
        for n in args.clients:
            sets = [f"population.clients={n}", *args.sets]
            scenario = str(Path(args.scenario).resolve())
            if args.floor:
                got = measure(browser, scenario, sets, 0, Path(tmp), floor=n)
                print(
                    f"{n:4d} clients, bare Solara page: first page {got['first']:.1f} s "
                    f"({got['cpu']:.1f} s of CPU in the server's process)",
                    flush=True,
                )
                continue
            got = measure(browser, scenario, sets, args.steps, Path(tmp))
            print(
                f"{n:4d} clients: first page {got['first']:.1f} s ({got['cpu']:.1f} s of CPU in "
                f"the dashboard's process); step (median of "
                f"{args.steps}) {got['step']:.2f} s, of which {got['over']:.2f} s over the "
                "simulation",
                flush=True,
            )
        browser.close()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
