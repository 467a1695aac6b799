"""Equilibrium vs population size and straggler rate (scenarios/sweep_population_stragglers.yaml).

Usage::

    fedgame sweep scenarios/sweep_population_stragglers.yaml --quiet
    python analysis/sweep_population_stragglers.py results/sweep_population_stragglers --docs docs

Prints the equilibrium table (mean of the last 5 rounds, 95% CI over replicates) and how each
quantity responds to the population size, and writes the heatmaps (final accuracy and Σρ over
the clients x straggle_prob grid) to ``--docs``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from fedgame.analysis import load_sweep
from fedgame.analysis.equilibrium import equilibrium_table, response
from fedgame.analysis.figures import heatmap
from fedgame.analysis.summary import summarise

X, Y = "population.clients", "population.straggle_prob"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", help="the sweep folder or the scenario's results folder")
    parser.add_argument("--docs", default=None, help="folder for the heatmap PNGs")
    args = parser.parse_args()
    sweep = load_sweep(args.results)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 20)
    eq = equilibrium_table(sweep.rounds, by=[X, Y])
    cols = [X, Y, "n", "reward", "sum_rho", "participation", "welfare", "nash_gap_max"]
    print(eq[[c for c in cols if c in eq]].to_string(index=False))
    print()
    print(response(eq, x=X).to_string(index=False))
    if args.docs:
        summary = summarise(sweep, clients=False)
        stem = Path(args.docs) / "sweep_population_stragglers"
        for value, table in (("final_accuracy", summary), ("sum_rho", eq)):
            print(heatmap(table, x=X, y=Y, value=value, path=f"{stem}_{value}.png"))


if __name__ == "__main__":
    main()
