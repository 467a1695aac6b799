"""``fedgame report`` shows each incentive family's own quantities (issue 34 item 6)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from fedgame.analysis.load import load_run
from fedgame.analysis.mechanism import client_table, items_table, mechanism_section
from fedgame.analysis.sweep import load_sweep
from fedgame.cli import main

PC = "### Per client"
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def _run_and_report(name: str, tmp_path: Path, rounds: int = 3) -> tuple[str, Path]:
    args = ["run", str(SCENARIOS / f"{name}.yaml"), "--set", f"rounds={rounds}"]
    assert main([*args, "--out", str(tmp_path), "--quiet"]) in (0, 4)  # 4: degenerate, kept
    assert main(["report", str(tmp_path / name), "--out", str(tmp_path / "rep")]) == 0
    return (tmp_path / "rep" / "report.md").read_text(), next((tmp_path / name).glob("*/"))


def _cell(text: str, row: str, column: int, after: str = "## Mechanism") -> float:
    """Column ``column`` of the first table row starting ``| row |`` after the line ``after``."""
    text = text[text.index(after) :]
    found = re.search(rf"^\| {row} \|" + r"([^|\n]*\|)" * (column + 1), text, re.M)
    assert found is not None, row
    return float(found.group(column + 1).strip(" |"))


def test_a_posted_price_run_lists_the_price_per_round(tmp_path):
    text, run = _run_and_report("posted_price", tmp_path)
    rounds = load_run(run).rounds
    assert "## Mechanism" in text and "`price` the posted price per unit ρ" in text
    assert "shapley" not in text and "clearing_price" not in text  # no other family's columns
    for r, price in zip(rounds["round"], rounds["price"]):
        assert _cell(text, str(r), 0) == pytest.approx(price, rel=1e-3)
    assert (tmp_path / "rep" / "mechanism.png").read_bytes()[:4] == b"\x89PNG"


def test_an_auction_run_lists_clearing_price_shading_and_winners_and_bids_per_client(tmp_path):
    text, run = _run_and_report("auction_first_price", tmp_path)
    loaded = load_run(run)
    head = "| round | bids | winners | clearing_price | shading |"
    assert head in text
    last = loaded.rounds.iloc[-1]
    assert _cell(text, str(int(last["round"])), 2) == pytest.approx(last["clearing_price"], 1e-3)
    clients = loaded.clients[loaded.clients["round"] > 0]
    won = clients[clients["client_id"] == 0]
    assert "| client_id | bid_rounds | mean_bid | mean_unit_price |" in text
    assert _cell(text, "0", 1, after=PC) == pytest.approx(won["bid"].mean(), rel=1e-3)
    assert _cell(text, "0", 2, after=PC) == pytest.approx(
        won["unit_price"].mean(), rel=1e-3, abs=1e-9
    )
    assert (tmp_path / "rep" / "mechanism_clients.png").read_bytes()[:4] == b"\x89PNG"


def test_a_contract_run_counts_the_clients_taking_each_menu_item(tmp_path):
    text, run = _run_and_report("contract", tmp_path)
    clients = load_run(run).clients
    clients = clients[clients["round"] > 0]
    assert "### Menu" in text and "| item | took | delivered | mean_paid |" in text
    took = clients.groupby("menu_item").size()
    for k, n in took.items():
        assert _cell(text, str(int(k)), 0, after="### Menu") == n
    assert sum(_cell(text, str(int(k)), 0, after="### Menu") for k in took.index) == len(clients)
    rounds = load_run(run).rounds
    assert _cell(text, "1", 2) == pytest.approx(rounds["menu_rho_high"].iloc[0], rel=1e-3)


def test_a_shapley_run_gives_the_estimates_per_round_and_per_client(tmp_path):
    text, run = _run_and_report("shapley", tmp_path)
    loaded = load_run(run)
    assert "| round | shapley_sum | shapley_evals |" in text
    first = loaded.rounds.iloc[0]
    assert _cell(text, "1", 0) == pytest.approx(first["shapley_sum"], rel=1e-3)
    valued = loaded.clients.dropna(subset=["shapley"])
    some = int(valued["client_id"].iloc[0])
    mine = valued[valued["client_id"] == some]
    assert _cell(text, str(some), 0, after=PC) == len(mine)
    assert _cell(text, str(some), 1, after=PC) == pytest.approx(mine["shapley"].mean(), rel=1e-3)
    assert _cell(text, str(some), 2, after=PC) == pytest.approx(
        mine["reward"].mean(), rel=1e-3, abs=1e-9
    )


def test_a_sweep_of_auctions_averages_each_grid_points_runs(tmp_path):
    spec = yaml.safe_load((SCENARIOS / "auction_first_price.yaml").read_text())
    spec.update(rounds=2, sweep={"grid": {"incentive.winners": [4, 8]}, "replicates": 2})
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = tmp_path / "out"
    assert main(["sweep", str(path), "--out", str(out), "--executor", "serial", "--quiet"]) == 0
    sweep = load_sweep(out)
    assert main(["report", str(sweep.path)]) == 0
    text = (sweep.path / "report" / "report.md").read_text()
    assert "## Mechanism" in text and "Mean over each run's rounds, per grid point" in text
    rounds = sweep.rounds
    per_run = rounds.groupby("run_id")[["winners", "incentive.winners"]].mean()
    for k in (4, 8):
        want = per_run.loc[per_run["incentive.winners"] == k, "winners"].mean()
        section = text[text.index("\n## Mechanism\n") :]
        row = re.search(rf"^\| {k} \| 2 \|" + r"([^|\n]*)\|" * 4, section, re.M)
        assert row is not None and float(row.group(2).split()[0]) == pytest.approx(want, 1e-3)
        low = re.search(r"\[([-0-9.e+]+),", row.group(3))  # clearing_price's interval
        assert low is not None and float(low.group(1)) >= 0  # clipped to the price's range
    assert (sweep.path / "report" / "mechanism.png").read_bytes()[:4] == b"\x89PNG"


def test_no_section_without_a_family_column(tmp_path):
    rounds = pd.DataFrame({"run_id": "a", "round": [1, 2], "reward": [1.0, 2.0]})
    clients = pd.DataFrame({"round": [1], "client_id": [0], "reward": [1.0]})
    assert mechanism_section(rounds, clients, tmp_path) == []
    nan = rounds.assign(price=math.nan)
    assert mechanism_section(nan, clients, tmp_path) == []
    assert not list(tmp_path.iterdir())


def test_items_and_client_tables_by_hand():
    clients = pd.DataFrame(
        {
            "round": [1, 1, 1, 2, 2, 2],
            "client_id": [0, 1, 2, 0, 1, 2],
            "menu_item": [0, 1, -1, 0, 0, np.nan],
            "uploaded": [True, True, False, False, True, False],
            "reward": [0.8, 0.6, 0.0, 0.0, 0.8, 0.0],
            "shapley": [0.3, np.nan, -0.1, 0.1, 0.2, np.nan],
        }
    )
    items = items_table(clients)
    assert items["item"].tolist() == [0, 1] and items["took"].tolist() == [3, 1]
    assert items["delivered"].tolist() == [2, 1]
    np.testing.assert_allclose(items["mean_paid"], [0.8, 0.6])
    per_client = client_table(clients)
    assert per_client["shapley_rounds"].tolist() == [2, 1, 1]
    np.testing.assert_allclose(per_client["mean_shapley"], [0.2, 0.2, -0.1])
    np.testing.assert_allclose(per_client["mean_reward"], [0.4, 0.8, 0.0])
