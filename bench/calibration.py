"""Set-up time of noise calibration: the 12-budget ``pld`` scenario and the shipped scenarios.

For each scenario the script loads and validates it and builds the model (everything before
round 1) once, and prints that set-up's wall time, its CPU time (less sensitive to other
processes on a shared machine), the wall time spent in ``calibrate_many`` (all the
accountants' calibrations), and how many distinct targets were solved. PLD event caches are
cleared between scenarios::

    python bench/calibration.py                 # the pld scenario, then scenarios/*.yaml
    python bench/calibration.py --only pld      # just the 12-budget pld scenario
    python bench/calibration.py --clients 4     # a smaller pld population (k = min(4, clients))

The pld scenario is issue 28's: ``dpsgd_local`` with ``calibration: accountant, accountant:
pld``, 12 clients with ε_total ~ U(2, 8), δ = 1e-5, 5 local steps of batch 16 on ``digits``.
The target is under 5 s per scenario on 2 cores.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

PLD_SCENARIO = """\
name: pld_setup
seed: 0
rounds: 2
population:
  clients: {clients}
  budget: {{epsilon: {{dist: uniform, low: 2.0, high: 8.0}}, delta: 1.0e-5}}
data: {{dataset: {{kind: digits}}, partition: {{kind: iid}}}}
model: {{kind: logreg}}
training: {{local_steps: 5, batch_size: 16, device: cpu}}
selection: {{kind: uniform, k: {k}}}
privacy: {{kind: dpsgd_local, clip: 1.0, calibration: accountant, accountant: pld}}
"""


def setup_time(path: Path) -> tuple[float, float, float, int]:
    """(set-up wall s, set-up CPU s, wall s calibrating, distinct targets solved).

    Calibration is timed in ``AccountantBase.calibrate_many``, or in ``calibrate`` on a tree
    that predates ``calibrate_many`` (so the script also measures the code before it).
    """
    from fedgame.market.model import MarketModel
    from fedgame.model import FedGameModel
    from fedgame.privacy.accountants.base import AccountantBase
    from fedgame.privacy.accountants.pld import event_pld
    from fedgame.scenario.load import load_scenario

    event_pld.cache_clear()
    spent = [0.0, 0]
    method = "calibrate_many" if hasattr(AccountantBase, "calibrate_many") else "calibrate"
    original = getattr(AccountantBase, method)

    def timed(self, **kwargs):  # type: ignore[no-untyped-def]
        solved = len(self._calibrated)
        started = time.perf_counter()
        try:
            return original(self, **kwargs)
        finally:
            spent[0] += time.perf_counter() - started
            spent[1] += len(self._calibrated) - solved

    setattr(AccountantBase, method, timed)
    try:
        started, cpu = time.perf_counter(), time.process_time()
        scenario = load_scenario(path)  # validation (its calibrations), then construction
        (MarketModel if scenario.servers else FedGameModel)(scenario)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        return wall, cpu, spent[0], int(spent[1])
    finally:
        setattr(AccountantBase, method, original)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=["pld", "shipped"], default=None)
    parser.add_argument("--clients", type=int, default=12, help="clients of the pld scenario")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # e.g. Fashion-MNIST absent: digits instead
    import fedgame.model  # imports out of the first timing
    import fedgame.privacy.accountants.pld  # noqa: F401

    paths: list[tuple[str, Path]] = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.only in (None, "pld"):
            pld = Path(tmp) / "pld.yaml"
            pld.write_text(PLD_SCENARIO.format(clients=args.clients, k=min(4, args.clients)))
            paths.append((f"pld_setup ({args.clients} budgets)", pld))
        if args.only in (None, "shipped"):
            paths += [(p.stem, p) for p in sorted((REPO / "scenarios").glob("*.yaml"))]
        print(f"{'scenario':36} {'set-up':>9} {'cpu':>9} {'calibrate':>10} {'targets':>8}")
        for name, path in paths:
            total, cpu, calibrating, solved = setup_time(path)
            print(
                f"{name:36} {total:8.2f}s {cpu:8.2f}s {calibrating:9.2f}s {solved:8d}", flush=True
            )


if __name__ == "__main__":
    main()
