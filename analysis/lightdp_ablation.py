"""Why LightDP-FL's lead over vanilla LDP is small here: one change at a time (paper 004).

Each row runs no DP, LDP and LightDP-FL (and, where marked, the ideal secure sum + DP,
``ideal_smpc``) on the same seeds at C̄ = S̄ = 10 (S ~ U{0..10} stragglers a round, every client
selected, N = 50, per-round ε, δ = 1e-5, record-level sensitivity Δ = 2C/|D_min| as in
``analysis/lightdp.py``), and changes exactly ONE thing from the row it names: from fedgame's
default setting of ``analysis/lightdp.py`` (digits, logistic regression, IID, T = 30, 5 local
steps of 16 at lr 0.1, clip C = 4, ε = 3) toward the paper's (CIFAR-10 / ResNet-18, non-IID,
T = 150, batch 32, lr 0.05), or back from the closest setting that fits two cores (full
Fashion-MNIST, MLP 784-64-10, 2-class shards, batch 32, lr 0.05, T = 30).

``dclose`` applies the paper's three training changes at once on the digits. Columns: final test
accuracy (no DP is the ceiling the gap cannot exceed), the paired gap LightDP − LDP (pts), the
model size d, and the noise-to-signal ratio of each scheme: sqrt(d · v_t) / ‖ū_t‖ averaged over
rounds, where v_t is the per-coordinate noise variance left in the round's average
(``residual_noise_var``, eq. 9) and ū_t the mean clipped update of the round's selected clients
(recorded while the run clips; no effect on the run). "noise var LightDP / LDP" is the ratio of
the two schemes' mean ``residual_noise_var`` over the realised straggler counts (eq. 9), which
note 004 §4.4 puts at h(γ0) = 0.469 in expectation for C̄ = S̄ = 10. Ideal SMPC − LightDP is
shown where run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import _shared
import lightdp

NAME = "lightdp_ablation"
DEFAULTS = _shared.Defaults(seeds=3, rounds=30, quick_seeds=2, quick_rounds=5)
PAIR = ("ldp", "lightdp")
NO_DP = "no DP"
SMPC = "ideal_smpc"

#: fedgame's default setting of analysis/lightdp.py (its Fig. 3 cell at ε = 3)
BASE: dict[str, Any] = {
    "data": "digits",
    "train": None,
    "model": "logreg",
    "partition": {"kind": "iid"},
    "rounds": 30,
    "batch": 16,
    "lr": 0.1,
    "clip": lightdp.CLIP,
    "eps": 3.0,
}
SHARDS = {"kind": "shards", "classes_per_client": 2}
DIRICHLET = {"kind": "dirichlet", "alpha": 0.5}
FM_MLP = {"data": "main", "model": "mlp"}
#: closest to the paper that fits two cores (T and the model stay reduced)
CLOSE = BASE | FM_MLP | {"partition": SHARDS, "batch": 32, "lr": 0.05}


@dataclass(frozen=True)
class Row:
    """One ablation row: a setting, the schemes it runs and its seed count (None: --seeds)."""

    key: str
    change: str
    setting: dict[str, Any]
    smpc: bool = False
    seeds: int | None = None


ROWS = (
    Row("base", "fedgame default (lightdp.py Fig. 3 cell, ε = 3)", BASE, smpc=True, seeds=5),
    Row("dir", "non-IID: Dirichlet α = 0.5", BASE | {"partition": DIRICHLET}),
    Row("shards", "non-IID: 2-class shards", BASE | {"partition": SHARDS}),
    Row("b32", "batch 32, lr 0.05 (the paper's)", BASE | {"batch": 32, "lr": 0.05}),
    Row("t150", "T = 150 (the paper's)", BASE | {"rounds": 150}),
    Row("clip16", "clip C = 16 (Δ × 4)", BASE | {"clip": 16.0}),
    Row(
        "dclose",
        "digits closest: shards, batch 32, lr 0.05, T = 150 (three changes)",
        BASE | {"partition": SHARDS, "batch": 32, "lr": 0.05, "rounds": 150},
        smpc=True,
    ),
    Row("fm_mlp", "full Fashion-MNIST + MLP for digits + logreg", BASE | FM_MLP),
    Row("close", "closest: F-MNIST + MLP, shards, batch 32, lr 0.05", CLOSE, smpc=True),
    Row("close_logreg", "closest, logistic regression for the MLP", CLOSE | {"model": "logreg"}),
    Row("close_6k", "closest, 6k training samples (|D_i| = 120, Δ × 10)", CLOSE | {"train": 6000}),
)
#: rows of ``--quick`` (a smoke run on the digits)
QUICK_ROWS = ["base", "shards", "close"]


def build_parser() -> Any:
    p = _shared.parser(NAME, __doc__ or "", DEFAULTS, dataset="fashion_mnist")
    return _shared.add_rows_option(p, ROWS)


def scenario_of(setting: dict[str, Any], scheme: str, seed: int, args: Any) -> dict[str, Any]:
    """The lightdp.py Fig. 3 scenario (C̄ = S̄ = 10, no link failures) for one setting."""
    data = "digits" if args.quick or setting["data"] == "digits" else args.dataset
    spec = (
        {"kind": "digits"}
        if data == "digits"
        else _shared.dataset_spec(args, max_train=setting["train"], max_test=2000)
    )
    setup: dict[str, Any] = {"rounds": rounds_of(setting, args), "dataset": spec}
    setup |= {"partition": setting["partition"], "overrides": []}
    cell = {"scheme": scheme, "eps": setting["eps"], "c_bar": 10, "s_bar": 10}
    d = lightdp.scenario(cell | {"failures": False, "seed": seed}, setup)
    d["model"] = {"kind": setting["model"]}
    d["training"] |= {"batch_size": setting["batch"], "lr": setting["lr"]}
    if scheme != NO_DP:
        d["privacy"]["clip"] = setting["clip"]
    return _shared.apply_sets(d, args.overrides)


def rounds_of(setting: dict[str, Any], args: Any) -> int:
    if args.quick:
        return int(args.rounds)
    return max(1, round(setting["rounds"] * args.rounds / DEFAULTS.rounds))


def jobs_of(row: Row, args: Any) -> list[dict[str, Any]]:
    seeds = args.seeds if args.quick or row.seeds is None else max(row.seeds, args.seeds)
    schemes = (NO_DP, *PAIR, SMPC) if row.smpc else (NO_DP, *PAIR)
    return [
        {"row": row.key, "scheme": s, "seed": seed}
        | {"scenario": scenario_of(row.setting, s, seed, args)}
        for s in schemes
        for seed in range(seeds)
    ]


def model_dimension(scenario: dict[str, Any]) -> int:
    """d, the number of noised coordinates: the scenario's model's parameter count (from the
    memory estimate, which states it without building the model)."""
    from fedgame.scenario.footprint import estimate
    from fedgame.scenario.load import validate

    model = estimate(validate(scenario)).model
    return int(model.num_params) if model is not None else 0


#: a run's labels (rows that share a scenario, e.g. the run without DP, share its run)
KEYS = ("row", "scheme", "seed")


def run_one(job: dict[str, Any]) -> dict[str, Any]:
    """Final accuracy, model size d, mean noise variance and noise-to-signal ratio.

    The noise-to-signal ratio of a round is sqrt(d · residual_noise_var) / update_norm: the
    noise left in the average against the norm of the mean clipped update (both round
    columns of the paper-004 mechanisms; NaN for the run without DP).
    """
    import numpy as np

    result = _shared.simulate(job["scenario"])
    r = result.rounds
    nan = np.full(len(r), np.nan)
    var = r["residual_noise_var"].to_numpy(float) if "residual_noise_var" in r else nan
    signal = r["update_norm"].to_numpy(float) if "update_norm" in r else nan
    d = model_dimension(job["scenario"]) if "update_norm" in r else 0
    ok = np.isfinite(var) & np.isfinite(signal) & (signal > 0)
    nsr = np.sqrt(d * var[ok]) / signal[ok]
    return {k: job[k] for k in KEYS} | {
        "accuracy": 100 * float(r["test_accuracy"].iloc[-1]),
        "d": d,
        "noise_var": _finite_mean(var),
        "update_norm": _finite_mean(signal),
        "nsr": _finite_mean(nsr),
        "status": result.manifest["status"],
    }


def _finite_mean(values: Any) -> float:
    """Mean of the finite entries (NaN when there are none)."""
    import numpy as np

    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else float("nan")


def main() -> None:
    args = _shared.resolve(build_parser().parse_args(), DEFAULTS)
    rows = _shared.pick_rows(ROWS, args.rows, quick=QUICK_ROWS if args.quick else None)
    jobs = [job for row in rows for job in jobs_of(row, args)]
    _shared.validate_all(j["scenario"] for j in jobs)
    print(f"{NAME}: {len(rows)} rows, {len(jobs)} runs", flush=True)
    report = _shared.Report(NAME, args)
    report.rows = _shared.run_kept(
        run_one, jobs, args.out, args.workers, fresh=args.fresh, tags=KEYS
    )
    from fedgame.analysis.guarantee import epsilon_header

    eps_head = epsilon_header(
        "setting (data, model, partition, T, batch/lr, clip, ε)",
        [j["scenario"]["privacy"] for j in jobs],
    )
    summarise(report, rows, args, eps_head)
    report.write()


def describe(setting: dict[str, Any], args: Any) -> str:
    """Short text of a row's setting."""
    data = "digits" if args.quick or setting["data"] == "digits" else args.dataset
    if setting["train"]:
        data += f" {setting['train'] // 1000}k"
    part = setting["partition"]
    kind = {"iid": "IID", "shards": "shards", "dirichlet": f"Dir {part.get('alpha', '')}"}
    return (
        f"{data}, {setting['model']}, {kind[part['kind']]}, T {rounds_of(setting, args)}, "
        f"{setting['batch']}/{setting['lr']:g}, C {setting['clip']:g}, ε {setting['eps']:g}"
    )


def summarise(
    report: _shared.Report,
    rows: list[Row],
    args: Any,
    eps_head: str = "setting (data, model, partition, T, batch/lr, clip, ε)",
) -> None:
    """The ablation table: one line per row, paired LightDP − LDP over seeds."""
    import numpy as np
    import pandas as pd

    from fedgame.analysis.stats import paired_difference, t_interval

    df = pd.DataFrame(report.rows).sort_values("seed")
    out = []
    for row in rows:
        sel = df[df.row == row.key]
        free, ldp, lit, smpc = (sel[sel.scheme == s] for s in (NO_DP, *PAIR, SMPC))
        gap_smpc = (
            paired_difference(list(smpc.accuracy), list(lit.accuracy)).format()
            if len(smpc)
            else "—"
        )
        ratio = np.mean(lit.noise_var.to_numpy() / ldp.noise_var.to_numpy())
        out.append(
            [
                row.key,
                row.change,
                describe(row.setting, args),
                f"{int(lit.d.iloc[0]):,}",
                len(lit),
                t_interval(free.accuracy).format(),
                t_interval(ldp.accuracy).format(),
                t_interval(lit.accuracy).format(),
                paired_difference(list(lit.accuracy), list(ldp.accuracy)).format(),
                f"{ldp.nsr.mean():.2f} / {lit.nsr.mean():.2f}",
                f"{ratio:.2f}",
                gap_smpc,
            ]
        )
    report.table(
        "ablation",
        "LightDP − LDP (pts), one change at a time; mean ± 95% CI over seeds (paired)",
        [
            "row",
            "change (one at a time)",
            eps_head,
            "d",
            "seeds",
            "no DP %",
            "LDP %",
            "LightDP %",
            "LightDP − LDP",
            "noise/signal LDP / LightDP",
            "noise var LightDP / LDP",
            "ideal SMPC − LightDP",
        ],
        out,
    )


if __name__ == "__main__":
    _shared.main(main)
