"""The column dictionary: complete, current in the docs, true to the files a run writes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import yaml

from fedgame import columns
from fedgame.agents.schema import FIELDS
from fedgame.collect import ROUND_COLUMNS
from fedgame.run.single import simulate
from fedgame.scenario.load import apply_overrides, validate

REPO = Path(__file__).resolve().parents[1]


def test_every_declared_column_has_one_entry_and_every_entry_a_writer():
    declared = {(table, c) for _, _, table, names in columns.declarations() for c in names}
    missing = sorted(c for _, c in declared if c not in columns.PLUGIN_COLUMNS)
    assert not missing, f"plug-in columns without an entry in fedgame/columns.py: {missing}"
    stale = set(columns.PLUGIN_COLUMNS) - {c for _, c in declared}
    assert not stale, f"entries no plug-in declares: {sorted(stale)}"
    assert set(ROUND_COLUMNS) <= set(columns.ROUNDS)
    for f in FIELDS:
        if f.written:
            assert f.doc, f.name
    for entry in columns.dictionary():
        assert entry.meaning and entry.writer and entry.dtype in columns.DTYPES, entry


def test_docs_page_is_current():
    """docs/columns.md is what ``make docs-columns`` writes (python -m fedgame.columns)."""
    assert (REPO / "docs" / "columns.md").read_text(encoding="utf-8") == columns.markdown()


def test_cast_makes_counts_integers_and_flags_booleans_nullable_where_empty():
    frame = pd.DataFrame(
        {
            "players": [3.0, 4.0],
            "colluders": [1.0, np.nan],
            "solver_converged": [1.0, 0.0],
            "bcs_p2_at_bound": [np.nan, 1.0],
            "welfare": [1.5, 2.0],
            "bcs_stage": [1.5, 2.0],  # not whole: left as it is
        }
    )
    out = columns.cast_columns(frame, "rounds")
    assert out["players"].dtype == np.int64 and out["players"].tolist() == [3, 4]
    assert str(out["colluders"].dtype) == "Int64" and out["colluders"].isna().tolist() == [
        False,
        True,
    ]
    assert out["solver_converged"].dtype == bool
    assert str(out["bcs_p2_at_bound"].dtype) == "boolean" and out["bcs_p2_at_bound"][1]
    assert out["welfare"].dtype == float and out["bcs_stage"].dtype == float
    assert frame["players"].dtype == float  # the input is not changed


def _small(name: str, **sets: object) -> dict:
    data = yaml.safe_load((REPO / "scenarios" / f"{name}.yaml").read_text())
    data.pop("sweep", None)
    base = {"data.dataset": {"kind": "digits"}, "population.clients": 16, "rounds": 3}
    base |= {"training.device": "cpu", "training.local_steps": 2}
    return apply_overrides(data, [*base.items(), *sets.items()])


#: small runs that between them write every column plug-ins declare
RUNS = {
    "bcs": _small("dpfl_bcs", **{"selection.t0": 2, "selection.k": 4, "selection.restarts": 0}),
    "privacy_aware": _small(
        "privacy_aware", **{"selection.k": 4, "selection.batch_size": 8, "training.batch_size": 8}
    ),
    "queries": _small("queries_replies", **{"selection.probe_steps": 2}),
    "belief": _small("qi_dpfl_belief"),
    "emd": _small("qi_dpfl_digits"),
    "posted_price": _small("posted_price"),
    "auction": _small("auction_first_price"),
    "lightdp": _small(
        "lightdp",
        **{
            "privacy": {"kind": "smpc_dp", "max_colluders": 2, "participations": 3},
            "population.colluders": 1,
            "network.faults": {"kind": "bounded_stragglers", "max_stragglers": 2},
            "selection": {"kind": "all"},
        },
    ),
    "contract": _small("contract"),
    "shapley": _small("shapley"),
    "central": _small(
        "quickstart",
        **{
            "selection": {"kind": "power_of_choice", "k": 4},
            "privacy": {"kind": "central_gaussian", "noise_multiplier": 0.5},
            "aggregation": {"kind": "secure"},
            "network.faults": {"kind": "deadline", "deadline": 0.2},
        },
    ),
}


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """Each of RUNS written to a run folder: {label: run folder}."""
    out = tmp_path_factory.mktemp("runs")
    return {
        label: simulate(validate(data), out_dir=out / label).run_dir for label, data in RUNS.items()
    }


@pytest.mark.xdist_group("columns")
def test_written_columns_are_described_with_their_dtype_in_the_files(written):
    seen = set()
    for label, run_dir in written.items():
        for table in ("rounds", "clients"):
            path = run_dir / f"{table}.parquet"
            frame = pd.read_parquet(path)
            stored = columns.read_dictionary(path)
            assert stored["name"].tolist() == frame.columns.tolist(), (label, table)
            schema = pq.read_schema(path)
            for entry in stored.itertuples():
                assert entry.meaning, (label, table, entry.name)
                assert entry.dtype == columns._frame_dtype(frame[entry.name]), (label, entry)
                field = schema.field(entry.name)
                assert field.metadata[b"meaning"].decode() == entry.meaning
                assert field.metadata[b"writer"].decode() == entry.writer
                if entry.writer != columns.CORE:
                    seen.add(entry.name)
                    assert "monitor" in entry.writer or "," not in entry.writer, (
                        "the writer is the run's own plug-in",
                        entry,
                    )
    assert seen == set(columns.PLUGIN_COLUMNS), sorted(set(columns.PLUGIN_COLUMNS) ^ seen)


@pytest.mark.xdist_group("columns")
def test_willing_and_trained_say_what_they_count(written):
    rounds = pd.read_parquet(written["bcs"] / "rounds.parquet")
    clients = pd.read_parquet(written["bcs"] / "clients.parquet")
    by_round = clients.groupby("round")
    assert rounds["willing"].tolist() == by_round["participating"].sum().tolist()
    assert rounds["trained"].tolist() == by_round["selected"].sum().tolist()
    assert rounds["participants"].equals(rounds["willing"])  # the alias, for one release
    assert rounds["selected"].equals(rounds["trained"])
    assert (rounds["willing"] > rounds["trained"]).any()
    stored = columns.read_dictionary(written["bcs"] / "rounds.parquet").set_index("name")
    assert stored.at["participants", "alias_of"] == "willing"


def test_a_sweep_parquet_carries_the_dictionary_of_its_columns(tmp_path):
    from fedgame.api import sweep

    swept = sweep(
        "scenarios/quickstart.yaml",
        grid={"selection.k": [3, 5]},
        out=tmp_path,
        executor="serial",
        population__clients=10,
        rounds=2,
        training__local_steps=1,
    )
    stored = columns.read_dictionary(swept.path / "sweep.parquet").set_index("name")
    assert stored.at["selection.k", "meaning"] == columns.SWEPT_KEY
    assert stored.at["replicate", "dtype"] == "int64"
    assert stored.at["willing", "writer"] == columns.CORE
    assert pd.read_parquet(swept.path / "sweep.parquet")["willing"].dtype == np.int64


def test_a_market_run_describes_its_columns_in_its_files(tmp_path):
    """A scenario with ``servers:`` writes its market columns (server, shares, the leaders'
    and followers' play, whom each client served, rho_/payment_ per server) described."""
    data = yaml.safe_load((REPO / "scenarios" / "duopoly.yaml").read_text())
    data = apply_overrides(
        data, [("rounds", 2), ("population.clients", 8), ("training.device", "cpu")]
    )
    run_dir = simulate(validate(data), out_dir=tmp_path).run_dir
    market = {(c.table, c.name) for c in columns.market_dictionary()}
    seen = set()
    for table in ("rounds", "clients"):
        path = run_dir / f"{table}.parquet"
        frame = pd.read_parquet(path)
        stored = columns.read_dictionary(path).set_index("name")
        assert stored.index.tolist() == frame.columns.tolist()
        for name in frame.columns:
            entry = stored.loc[name]
            assert entry["meaning"], (table, name)
            spec = columns.spec_of(table, name)
            if spec is not None and spec.dtype in ("int64", "bool"):  # counts and flags
                assert columns._frame_dtype(frame[name]) == spec.dtype, (table, name)
            key = name.replace("_A", "_<server>").replace("_B", "_<server>")
            if (table, key) in market:
                seen.add((table, key))
                assert entry["writer"] == columns.MARKET_WRITER, (table, name)
                assert entry["dtype"] == columns._frame_dtype(frame[name]), (table, name)
    assert seen == market, sorted(market - seen)
    rounds = pd.read_parquet(run_dir / "rounds.parquet")
    assert rounds["server"].tolist() == ["A", "B", "A", "B"]
    stored = columns.read_dictionary(run_dir / "clients.parquet").set_index("name")
    assert stored.at["rho_A", "meaning"] == columns.MARKET_CLIENTS["rho_<server>"].meaning


def test_market_columns_do_not_shadow_other_columns():
    """A market entry is the fallback for a column nothing else describes."""
    assert columns.column("clients", "rho").writer != columns.MARKET_WRITER
    assert columns.column("clients", "epsilon_spent").writer == columns.CORE
    assert columns.column("rounds", "payments_total").writer != columns.MARKET_WRITER
    assert columns.spec_of("clients", "rho_") is None  # a prefix alone names no server
    assert columns.spec_of("rounds", "rho_A") is None  # per-server columns are the clients'
    assert set(columns.MARKET_ROUNDS).isdisjoint(columns.ROUNDS)
    assert set(columns.MARKET_ROUNDS).isdisjoint(columns.PLUGIN_COLUMNS)
    assert set(columns.MARKET_CLIENTS).isdisjoint(columns._client_specs())
