"""Rerun every paper's analysis and rebuild the reproduction tables (``make reproduce``).

Runs each script below with ``--out OUT/<script>`` (passing ``--quick``, ``--seeds``,
``--rounds``, ``--workers`` and ``--dataset`` on), then writes ``OUT/reproductions_table.md``
from the scripts' ``claims.json``. With ``--docs DIR`` it also splices every generated table
into the pages of DIR (between ``<!-- BEGIN GENERATED <script>/<table> -->`` and ``<!-- END
GENERATED <script>/<table> -->``; the reproductions table is ``reproductions/claims``) and
copies the figures there. Only ``make reproduce`` writes docs/; the default OUT is under
results/. The ``*_ablation`` scripts are each paper's one-change-at-a-time investigation;
``--no-ablations`` skips them.

Hold-outs: after a paper script, each of its ``HOLDOUTS`` (other seeds, another data
heterogeneity; ``_shared.Holdout``) is run with the same flags plus the hold-out's, into
``OUT/<script>/holdouts/<key>``, and every row of the reproductions table gives the verdict of
each hold-out beside the default's (and says when they differ: the verdict depends on the
setting). ``--no-holdouts`` skips them (the rows then say "hold-out not run").

Resumable: every script keeps each simulation's result under ``OUT/<script>/runs/``, keyed by
its scenario and the code (the git trees of ``fedgame/`` and ``analysis/``, and their
uncommitted changes if any). An interrupted ``make reproduce`` (Ctrl-C, a lost session), run
again on the same code, reads the kept runs and runs only the rest; after a code change no
kept run is reused. ``--fresh`` (passed on to every script) reruns everything.

    python analysis/reproduce.py --quick                # minutes; preliminary numbers
    python analysis/reproduce.py --docs docs            # what make reproduce runs
    python analysis/reproduce.py --docs docs --no-ablations   # the papers' tables only
    python analysis/reproduce.py --docs docs --fresh    # ignore the kept runs
    python analysis/reproduce.py --docs docs --no-holdouts   # the default settings only
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import _shared

NAME = "reproduce"
#: script -> whether it takes --dataset
SCRIPTS = {
    "dpfl_bcs": True,
    "privacy_aware": True,
    "queries_replies": True,
    "qi_dpfl": True,
    "lightdp": True,
    "sweep_population_stragglers": False,
    "stragglers_topology_learning": False,
    "qi_dpfl_populations": True,
    "belief_explore": False,
    "mechanisms": False,
    "competition": False,
    "lightdp_ablation": True,
    "privacy_aware_ablation": True,
    "dpfl_bcs_ablation": True,
    "qi_dpfl_ablation": True,
    "queries_replies_ablation": True,
}
#: the one-change-at-a-time investigations (``--no-ablations`` skips them: 2 h 6 min of the
#: 2 h 18 min a whole run took on two idle cores on 2026-11-23, before the hold-outs existed)
ABLATIONS = {name for name in SCRIPTS if name.endswith("_ablation")}
#: paper id -> (short name, docs page)
PAGES = {
    "000": ("DPFL-BCS", "dpfl_bcs.md"),
    "001": ("Privacy-aware selection", "privacy_aware.md"),
    "002": ("Queries and replies", "queries_replies.md"),
    "003": ("QI-DPFL", "qi_dpfl.md"),
    "004": ("LightDP-FL", "lightdp.md"),
}
BLOCK = re.compile(
    r"(<!-- BEGIN GENERATED (?P<key>[\w./-]+) -->\n)(?P<body>.*?)(<!-- END GENERATED (?P=key) -->)",
    re.DOTALL,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python analysis/reproduce.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--seeds", type=int, help="seeds for every script (default: each script's)")
    p.add_argument("--rounds", type=int, help="rounds for every script (default: each script's)")
    p.add_argument("--quick", action="store_true", help="every script's --quick (minutes)")
    p.add_argument("--out", type=Path, default=Path("results") / "analysis")
    p.add_argument("--workers", type=int, help="processes per script")
    p.add_argument(
        "--dataset",
        choices=list(_shared.DATASETS),
        help="dataset for every script that takes one (default: each script's)",
    )
    p.add_argument("--docs", type=Path, help="docs folder to update (make reproduce: docs)")
    p.add_argument("--only", nargs="+", choices=list(SCRIPTS), help="run these scripts only")
    p.add_argument("--no-run", action="store_true", help="only rebuild from existing outputs")
    p.add_argument(
        "--fresh",
        action="store_true",
        help="rerun every simulation (each script's --fresh); by default a rerun on the same "
        "code reuses the runs kept under OUT/<script>/runs, so an interrupted run resumes",
    )
    p.add_argument(
        "--no-holdouts",
        action="store_true",
        help="skip the paper scripts' hold-out settings (other seeds, another heterogeneity)",
    )
    p.add_argument(
        "--no-ablations",
        action="store_true",
        help="skip the *_ablation investigations (their docs tables stay as they are)",
    )
    return p


def script_args(name: str, args: argparse.Namespace) -> list[str]:
    """The flags a script runs with (without ``--out``)."""
    argv: list[str] = []
    for flag in ("seeds", "rounds", "workers"):
        if getattr(args, flag) is not None:
            argv += [f"--{flag}", str(getattr(args, flag))]
    if args.quick:
        argv.append("--quick")
    if args.fresh:
        argv.append("--fresh")
    if args.dataset and SCRIPTS[name]:
        argv += ["--dataset", args.dataset]
    return argv


def script_command(name: str, args: argparse.Namespace) -> list[str]:
    cmd = [sys.executable, str(_shared.ROOT / "analysis" / f"{name}.py")]
    return [*cmd, "--out", str(args.out / name), *script_args(name, args)]


def holdouts_of(name: str) -> tuple[_shared.Holdout, ...]:
    """A script's ``HOLDOUTS`` (none for the scripts that declare none)."""
    path = _shared.ROOT / "analysis" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"reproduce_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return tuple(getattr(module, "HOLDOUTS", ()))


def holdout_commands(name: str, args: argparse.Namespace) -> list[list[str]]:
    """One command per hold-out of ``name``: its flags applied to the script's own."""
    cmd = [sys.executable, str(_shared.ROOT / "analysis" / f"{name}.py")]
    return [
        [
            *cmd,
            "--out",
            str(args.out / name / "holdouts" / h.key),
            *h.applied(script_args(name, args)),
        ]
        for h in holdouts_of(name)
    ]


HEADER = [
    "paper",
    "claim",
    "paper's value",
    "fedgame (mean ± 95% CI over seeds; setting)",
    "reproduced?",
    "why not / caveat",
    "rule",
    "hold-outs",
    "command",
]


def holdout_cell(c: dict[str, Any]) -> str:
    """Each hold-out's verdict (and its measurement where it differs from the default's),
    then whether the verdict depends on the setting."""
    if c["verdict"] == "not run":
        return "–"
    parts, differs = [], False
    for h in c.get("holdout_results", []):
        if h.get("verdict") is None:
            ran = h.get("ran", False)
            parts.append(
                f"{h['label']}: not evaluated (the hold-out's runs do not include this claim's)"
                if ran
                else f"{h['label']}: hold-out not run"
            )
            continue
        same = h["verdict"] == c["verdict"]
        differs |= not same
        parts.append(
            f"{h['label']}, {h['seeds']}: {h['verdict']}" + ("" if same else f" ({h['measured']})")
        )
    if not parts:
        return "no hold-out"
    ran = [h for h in c.get("holdout_results", []) if h.get("verdict") is not None]
    if differs:
        tail = "**depends on the setting**"
    elif ran:
        tail = "same verdict on every hold-out that evaluates it"
    else:
        tail = "no hold-out evaluates it"
    return "<br>".join([*parts, tail])


def claims_table(claims: list[dict[str, Any]], *, link_prefix: str = "") -> str:
    """The reproductions table: one row per claim, linking each paper's page."""
    rows = []
    for c in claims:
        short, page = PAGES[c["paper"]]
        paper = f"[{c['paper']} {short}]({link_prefix}{page})"
        verdict = c["verdict"] + (" (preliminary)" if c["preliminary"] else "")
        why = "; ".join(
            x for x in (c["why_not"], f"caveat: {c['caveat']}" if c.get("caveat") else "") if x
        )
        measured = c["measured"]
        if c["verdict"] != "not run":
            measured = f"{measured} ({c['seeds']}; {c['setting']})"
        commands = [c["command"]] + [
            h["command"] for h in c.get("holdout_results", []) if h.get("verdict") is not None
        ]
        rows.append(
            [
                paper,
                c["claim"],
                c["paper_value"],
                measured,
                verdict,
                why or "–",
                c["rule"].get("short") or c["rule"]["text"],
                holdout_cell(c),
                "; ".join(f"`{x}`" for x in commands),
            ]
        )
    return _shared.markdown_table(HEADER, rows)


def with_holdouts(folder: Path, claims: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``claims`` with ``holdout_results``: each declared hold-out's verdict and measurement
    from ``folder/holdouts/<key>/claims.json`` (``verdict`` None when it was not run)."""
    found: dict[str, dict[str, dict[str, Any]]] = {}
    for file in sorted((folder / "holdouts").glob("*/claims.json")):
        rows = json.loads(file.read_text(encoding="utf-8"))
        found[file.parent.name] = {r["key"]: r for r in rows}
    out = []
    for c in claims:
        results = []
        for h in c.get("holdouts", []):
            got = found.get(h["key"], {}).get(c["key"])
            results.append(
                h
                | {
                    "verdict": got["verdict"] if got else None,
                    "measured": got["measured"] if got else "",
                    "seeds": got["seeds"] if got else "",
                    "ran": h["key"] in found,
                    "command": got["command"] if got else h["command"],
                }
            )
        out.append(c | {"holdout_results": results})
    return out


def collect(out: Path) -> tuple[dict[str, str], list[dict[str, Any]], list[Path]]:
    """Generated tables by ``<script>/<table>``, all claims, and every figure under ``out``."""
    tables: dict[str, str] = {}
    claims: list[dict[str, Any]] = []
    figures: list[Path] = []
    for name in SCRIPTS:
        folder = out / name
        for file in sorted((folder / "tables").glob("*.md")):
            tables[f"{name}/{file.stem}"] = file.read_text(encoding="utf-8").rstrip("\n")
        if (folder / "claims.json").is_file():
            own = json.loads((folder / "claims.json").read_text(encoding="utf-8"))
            claims += with_holdouts(folder, own)
        figures += sorted((folder / "figures").glob("*.png"))
    order = {p: i for i, p in enumerate(PAGES)}
    claims.sort(key=lambda c: order[c["paper"]])
    return tables, claims, figures


def splice(text: str, tables: dict[str, str]) -> tuple[str, list[str]]:
    """Replace every generated block whose key is in ``tables``; returns the keys left stale."""
    stale: list[str] = []

    def sub(match: re.Match[str]) -> str:
        key = match.group("key")
        if key not in tables:
            stale.append(key)
            return match.group(0)
        return f"{match.group(1)}{tables[key]}\n{match.group(4)}"

    return BLOCK.sub(sub, text), stale


def selected(args: argparse.Namespace) -> list[str]:
    """The scripts to run: ``--only``'s, else every script (less the ablations if asked)."""
    if args.only:
        return list(args.only)
    return [n for n in SCRIPTS if not (args.no_ablations and n in ABLATIONS)]


def main() -> None:
    args = build_parser().parse_args()
    names = selected(args)
    if not args.no_run:
        for name in names:
            cmds = [script_command(name, args)]
            if not args.no_holdouts:
                cmds += holdout_commands(name, args)
            for cmd in cmds:
                print(f"$ {' '.join(cmd[1:])}", flush=True)
                if subprocess.run(cmd, check=False).returncode != 0:
                    print(f"reproduce: {name} failed; docs left unchanged", file=sys.stderr)
                    sys.exit(1)
    tables, claims, figures = collect(args.out)
    table = claims_table(claims)
    if claims:  # an OUT with no paper script's claims (one study's) leaves the page's table
        tables["reproductions/claims"] = table
    (args.out / "reproductions_table.md").write_text(table + "\n")
    print(f"reproductions table: {args.out / 'reproductions_table.md'} ({len(claims)} claims)")
    if args.docs is None:
        return
    for page in sorted(args.docs.glob("*.md")):
        text, stale = splice(page.read_text(encoding="utf-8"), tables)
        page.write_text(text, encoding="utf-8")
        for key in stale:
            print(f"reproduce: {page}: no output for block {key}; left as it was")
    for fig in figures:
        shutil.copyfile(fig, args.docs / fig.name)
    print(f"updated {args.docs}: {len(tables)} tables, {len(figures)} figures")


if __name__ == "__main__":
    _shared.main(main)
