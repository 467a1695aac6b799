"""Figures read back from their matplotlib objects: one line per grid point, honest bands."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
from matplotlib.collections import PolyCollection
from matplotlib.text import Text

from fedgame.analysis import figures
from fedgame.analysis.stats import t_interval
from fedgame.analysis.summary import aggregate

KEYS = ("population.clients", "selection.k")


def sweep_rounds(grid: dict[str, list], *, replicates: int = 3, rounds: int = 6) -> pd.DataFrame:
    """A sweep-shaped rounds frame whose replicates disagree a lot (raw t-intervals of the
    accuracy leave [0, 1]; those of the reward go below 0)."""
    rng = np.random.default_rng(0)
    rows = []
    for point in itertools.product(*grid.values()):
        for rep in range(replicates):
            run_id = "-".join(map(str, point)) + f"-r{rep}"
            for r in range(1, rounds + 1):
                rows.append(
                    {
                        **dict(zip(grid, point)),
                        "replicate": rep,
                        "run_id": run_id,
                        "round": r,
                        "num_clients": 20,
                        "participants": int(rng.integers(0, 21)),
                        "test_accuracy": float(np.clip(0.1 * r + rng.normal(0, 0.3), 0, 1)),
                        "reward": float(abs(rng.normal(0.05, 0.2))),
                    }
                )
    return pd.DataFrame(rows)


def _lines(fig):
    """(panel title, label, line) of every drawn line."""
    return [(ax.get_title(), line.get_label(), line) for ax in fig.axes for line in ax.get_lines()]


def _bands(fig):
    return [c for ax in fig.axes for c in ax.collections if isinstance(c, PolyCollection)]


def test_one_line_per_grid_point_with_means_over_replicates():
    grid = {KEYS[0]: [20, 40], KEYS[1]: [5, 10]}
    rounds = sweep_rounds(grid)
    fig = figures.plot_lines(rounds, columns=["test_accuracy"], by=KEYS, title="t")
    lines = _lines(fig)
    assert len(lines) == 4  # 2 x 2 grid points, each drawn once
    drawn = {(title, label) for title, label, _ in lines}
    assert drawn == {(f"k={k}", f"clients={c}") for c in (20, 40) for k in (5, 10)}
    for title, label, line in lines:
        c, k = int(label.split("=")[1]), int(title.split("=")[1])
        mine = rounds[(rounds[KEYS[0]] == c) & (rounds[KEYS[1]] == k)]
        expected = mine.groupby("round")["test_accuracy"].mean()
        np.testing.assert_allclose(line.get_xdata(), expected.index)
        np.testing.assert_allclose(line.get_ydata(), expected.to_numpy())
    assert "n = 3 runs per grid point" in fig.get_suptitle()


def test_bands_are_per_grid_point_and_clipped_to_the_range():
    grid = {KEYS[0]: [20, 40], KEYS[1]: [5, 10]}
    rounds = sweep_rounds(grid)
    raw = [t_interval(g.tolist()) for _, g in rounds.groupby([*KEYS, "round"])["test_accuracy"]]
    assert min(iv.low for iv in raw) < 0 and max(iv.high for iv in raw) > 1  # would leak
    fig = figures.plot_lines(rounds, columns=["test_accuracy"], by=KEYS, title="t")
    bands = _bands(fig)
    assert len(bands) == 4
    for band, (_, _, line) in zip(bands, _lines(fig)):
        y = np.concatenate([p.vertices[:, 1] for p in band.get_paths()])
        assert y.min() >= 0.0 and y.max() <= 1.0
        assert y.min() <= line.get_ydata().min() and y.max() >= line.get_ydata().max()
    for ax in fig.axes:
        lo, hi = ax.get_ylim()
        assert lo >= -0.03 and hi <= 1.03
    assert "CI clipped to [0, 1]" in fig.get_suptitle()


def test_counts_are_clipped_at_zero_and_rounds_are_integer_ticks():
    rounds = sweep_rounds({KEYS[0]: [20, 40]}, replicates=3)
    fig = figures.plot_lines(rounds, columns=["reward"], by=KEYS[:1], title="t")
    for band in _bands(fig):
        assert min(p.vertices[:, 1].min() for p in band.get_paths()) >= 0.0
    (ax,) = fig.axes
    ticks = [t for t in ax.get_xticks() if 1 <= t <= 6]
    assert ticks and all(float(t).is_integer() for t in ticks)
    assert ax.get_xlabel() == "round" and "(payment units)" in ax.get_ylabel()


def test_three_keys_use_panels_and_four_keys_add_line_styles():
    grid = {"a.x": [1, 2], "b.y": [1, 2], "c.z": [1, 2]}
    fig = figures.plot_lines(
        sweep_rounds(grid), columns=["test_accuracy"], by=list(grid), title="t"
    )
    assert len(fig.axes) == 4 and len(_lines(fig)) == 8
    assert {ax.get_title() for ax in fig.axes} == {f"y={y}, z={z}" for y in (1, 2) for z in (1, 2)}
    grid["d.w"] = [1, 2]
    fig = figures.plot_lines(
        sweep_rounds(grid), columns=["test_accuracy"], by=list(grid), title="t"
    )
    lines = _lines(fig)
    assert len(lines) == 16
    assert {line.get_linestyle() for _, _, line in lines} == {"-", "--"}
    assert len({(t, label) for t, label, _ in lines}) == 16


def test_unequal_replicates_put_n_in_each_label():
    rounds = sweep_rounds({KEYS[0]: [20, 40]}, replicates=3)
    rounds = rounds[~((rounds[KEYS[0]] == 40) & (rounds["replicate"] == 2))]
    fig = figures.plot_lines(rounds, columns=["test_accuracy"], by=KEYS[:1], title="t")
    labels = sorted(label for _, label, _ in _lines(fig) if label != "_nolegend_")
    assert labels == ["clients=20 (n=3)", "clients=40 (n=2)"]
    assert "under 3 runs each run is drawn" in fig.get_suptitle()


def test_fewer_than_three_replicates_draw_each_run_instead_of_a_band():
    """With 2 replicates t_{0.975,1} = 12.7: a band would swamp the lines."""
    rounds = sweep_rounds({KEYS[0]: [20, 40]}, replicates=2)
    fig = figures.plot_lines(rounds, columns=["test_accuracy"], by=KEYS[:1], title="t")
    lines = _lines(fig)
    assert len(lines) == 4 and not _bands(fig)  # 2 grid points x 2 runs, no band
    runs = {tuple(g["test_accuracy"]) for _, g in rounds.groupby("run_id")}
    for _, _, line in lines:
        assert tuple(line.get_ydata()) in runs  # a run's own values, not a mean
    colours = {}
    for _, label, line in lines:
        colours.setdefault(line.get_color(), []).append(label)
    assert sorted(len(v) for v in colours.values()) == [2, 2]  # a grid point's runs share it
    assert "each of the n = 2 runs per grid point drawn" in fig.get_suptitle()


def test_single_run_has_no_band_and_says_so():
    rounds = sweep_rounds({KEYS[0]: [20]}, replicates=1).drop(columns=KEYS[0])
    fig = figures.plot_lines(rounds, columns=["test_accuracy"], title="t")
    assert len(_lines(fig)) == 1 and not _bands(fig)
    assert "one run" in fig.get_suptitle()


def test_a_quantity_measured_every_few_rounds_is_drawn_with_dots_and_says_so():
    """``training.eval_every``: the accuracy is NaN between measured rounds; the lines join
    the measured rounds, each marked by a dot, and the title says what the dots are. A run
    cut short (NaN only after its last value) and every-round columns get no dots."""
    rounds = sweep_rounds({KEYS[0]: [20, 40]}, replicates=3, rounds=8)
    every = figures.plot_lines(rounds, columns=["test_accuracy"], by=KEYS[:1], title="t")
    assert all(line.get_marker() in ("None", None) for *_, line in _lines(every))
    assert "dots" not in every.get_suptitle()
    short = rounds.copy()
    short.loc[
        (short["run_id"] == short["run_id"].iloc[0]) & (short["round"] > 5), "test_accuracy"
    ] = np.nan
    assert not figures.measured_between(short, "test_accuracy")
    sparse = rounds.copy()
    sparse.loc[sparse["round"] % 3 != 0, "test_accuracy"] = np.nan  # measured at 3 and 6
    assert figures.measured_between(sparse, "test_accuracy")
    fig = figures.plot_lines(sparse, columns=["test_accuracy", "reward"], by=KEYS[:1], title="t")
    for title, _, line in _lines(fig):
        accuracy = title.startswith(figures.quantity("test_accuracy").name)
        assert (line.get_marker() == "o") is accuracy
        if accuracy:
            np.testing.assert_array_equal(line.get_xdata(), [3, 6])
    assert "dots: the rounds it was measured in" in fig.get_suptitle()


def test_measured_round_dots_keep_the_encodings_markers_and_skip_undefined_values():
    """Where the encoding tells lines apart by marker, a sparse accuracy keeps those markers;
    a column that is NaN for other reasons (not evaluated every few rounds) gets no dots;
    in a market's frame each server's rows are a series of their own."""
    grid = {"a.x": [1, 2], "b.y": [1, 2, 3, 4, 5, 6], "c.z": [1], "d.w": [1]}
    rounds = sweep_rounds(grid, replicates=1)
    rounds.loc[rounds["round"] % 2 == 1, "test_accuracy"] = np.nan
    fig = figures.plot_lines(rounds, columns=["test_accuracy"], by=list(grid), title="t")
    markers = [line.get_marker() for *_, line in _lines(fig)]
    assert len(set(markers)) > 1 and "dots" in fig.get_suptitle()
    other = sweep_rounds({KEYS[0]: [20]}, replicates=3)
    other.loc[other["round"] % 2 == 1, "reward"] = np.nan  # undefined, not unmeasured
    fig = figures.plot_lines(other, columns=["reward"], by=KEYS[:1], title="t")
    assert all(line.get_marker() in ("None", None) for *_, line in _lines(fig))
    assert "dots" not in fig.get_suptitle()
    market = pd.DataFrame(
        {
            "run_id": "r",
            "server": ["A", "B"] * 4,
            "round": [1, 1, 2, 2, 3, 3, 4, 4],
            "test_accuracy": [0.1, 0.1, 0.2, 0.2, 0.3, np.nan, 0.4, np.nan],  # B cut short
        }
    )
    assert not figures.measured_between(market, "test_accuracy")
    market.loc[4, "test_accuracy"] = np.nan  # A skips round 3, measures round 4
    assert figures.measured_between(market, "test_accuracy")


def test_heatmap_cells_are_annotated_with_clipped_intervals():
    rounds = sweep_rounds({KEYS[0]: [20, 40], KEYS[1]: [5, 10]})
    per_run = rounds.groupby([*KEYS, "run_id"], as_index=False)["test_accuracy"].last()
    table = aggregate(per_run.rename(columns={"test_accuracy": "final_accuracy"}), by=KEYS)
    fig = figures.plot_heatmap(table, x=KEYS[0], y=KEYS[1], value="final_accuracy")
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 4
    for _, row in table.iterrows():
        mean = f"{row['final_accuracy']:.3g}"
        assert any(t.startswith(mean) for t in texts)
    for text in texts:
        lo, hi = (float(v) for v in text.split("[")[1].rstrip("]").split(","))
        assert 0.0 <= lo <= hi <= 1.0
    assert [t.get_text() for t in ax.get_xticklabels()] == ["20", "40"]
    assert ax.get_xlabel() == "clients  (population.clients)"
    assert ax.get_ylabel() == "k  (selection.k)"
    assert "n = 3 runs per cell" in fig.get_suptitle()
    assert "colours span 0 to 1" in fig.get_suptitle()  # accuracy: its natural range


def test_heatmap_colours_are_anchored_and_say_when_intervals_are_wider():
    table = pd.DataFrame(
        {
            "x": [1, 1, 2, 2],
            "y": [1, 2, 1, 2],
            "n": [3] * 4,
            "reward": [2.0, 2.1, 2.2, 2.3],
            "reward_lo": [0.5, 0.6, 0.7, 0.8],
            "reward_hi": [3.5, 3.6, 3.7, 3.8],
        }
    )
    fig = figures.plot_heatmap(table, x="x", y="y", value="reward")
    image = fig.axes[0].images[0]
    assert image.norm.vmin == 0.0 and image.norm.vmax == 3.8  # from 0, to the widest interval
    assert "smaller than the typical 95% interval" in fig.get_suptitle()
    wide = table.assign(reward=[0.0, 1.0, 2.0, 3.0])
    assert "smaller" not in figures.plot_heatmap(wide, x="x", y="y", value="reward").get_suptitle()


def test_heatmap_text_contrasts_with_its_cell():
    table = pd.DataFrame({"x": [1, 1, 2, 2], "y": [1, 2, 1, 2], "v": [0.0, 1.0, 2.0, 3.0]})
    fig = figures.plot_heatmap(table, x="x", y="y", value="v")
    colours = {t.get_text(): t.get_color() for t in fig.axes[0].texts if isinstance(t, Text)}
    assert colours["0"] == "white" and colours["3"] == "black"  # viridis: dark to light


def test_epsilon_cdf_one_step_per_grid_point():
    rows = [
        {KEYS[0]: c, "run_id": f"{c}-{rep}", "round": 3, "client_id": i, "epsilon_spent": i * c}
        for c in (20, 40)
        for rep in range(2)
        for i in range(5)
    ]
    fig = figures.plot_epsilon_cdf(pd.DataFrame(rows), by=KEYS[:1])
    lines = _lines(fig)
    assert sorted(label for _, label, _ in lines) == ["clients=20 (n=2)", "clients=40 (n=2)"]
    for _, _, line in lines:
        y = line.get_ydata()
        assert y[0] == 0.0 and y[-1] == 1.0 and np.all(np.diff(y) >= 0)


def test_heatmap_of_missing_values_is_skipped(tmp_path):
    table = pd.DataFrame({"x": [1, 2], "y": [1, 1], "v": [math.nan, math.nan]})
    assert figures.heatmap(table, x="x", y="y", value="v", path=tmp_path / "h.png") is None
