"""Cost of the economics columns per round: the economics monitor against the round's time.

For each scenario the script builds the model, runs every round, and times the economics
monitor's ``measure`` (the outcome, the deviation search over ``game.economics.
regret_sample`` clients, the sums) inside each round. It prints the median over the rounds of
the round's wall time, of ``measure`` and of the deviation search in it, the share of the
round ``measure`` takes (median of the per-round ratios), and the first round's ``measure``
apart (it imports scipy's root finder once per process)::

    python bench/economics.py                          # quickstart and qi_dpfl_digits
    python bench/economics.py --sample 8 50            # several sample sizes
    python bench/economics.py --rounds 5 --scenario scenarios/quickstart.yaml

Timings are wall-clock on whatever the machine is doing: on a shared machine compare the
share of the round (both parts are measured in the same rounds), not absolute times.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT = ("scenarios/quickstart.yaml", "scenarios/qi_dpfl_digits.yaml")


def timed_run(path: Path, *, sample: int, rounds: int | None) -> dict[str, list[float]]:
    """Per round: wall s, ``measure`` s and deviation-search s of one run."""
    from fedgame.model import FedGameModel
    from fedgame.scenario.load import load_scenario

    settings = [f"game.economics.regret_sample={sample}", "training.device=cpu"]
    if rounds is not None:
        settings.append(f"rounds={rounds}")
    model = FedGameModel(load_scenario(path, settings))
    monitor = model.economics
    spent = {"measure": [0.0], "search": [0.0]}
    if monitor is not None:
        measure, search = monitor.measure, monitor._regret

        def timed_measure(m):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            measure(m)
            spent["measure"][-1] += time.perf_counter() - start

        def timed_search(ids, m):  # type: ignore[no-untyped-def]
            start = time.perf_counter()
            out = search(ids, m)
            spent["search"][-1] += time.perf_counter() - start
            return out

        monitor.measure = timed_measure  # type: ignore[method-assign]
        monitor._regret = timed_search  # type: ignore[method-assign]
    walls = []
    while model.running:
        model.step()
        walls.append(model.round_wall_time)
        spent["measure"].append(0.0)
        spent["search"].append(0.0)
    return {"wall": walls, "measure": spent["measure"][:-1], "search": spent["search"][:-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", nargs="*", default=list(DEFAULT))
    parser.add_argument("--sample", nargs="*", type=int, default=[8])
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    print(
        "scenario              sample  rounds  round ms  measure ms  search ms  share  "
        "first measure ms"
    )
    for name in args.scenario:
        path = Path(name) if Path(name).is_absolute() else REPO / name
        for sample in args.sample:
            t = timed_run(path, sample=sample, rounds=args.rounds)
            share = statistics.median(m / w for m, w in zip(t["measure"], t["wall"]))
            wall, measure, search = (statistics.median(t[k]) for k in ("wall", "measure", "search"))
            print(
                f"{path.stem:<20} {sample:>7} {len(t['wall']):>7} {wall * 1e3:>9.2f} "
                f"{measure * 1e3:>11.3f} {search * 1e3:>10.3f} {share:>6.1%} "
                f"{t['measure'][0] * 1e3:>17.1f}"
            )


if __name__ == "__main__":
    main()
