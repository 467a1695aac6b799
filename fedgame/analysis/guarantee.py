"""What kind of guarantee an ε in a results table is, read from the scenario's privacy block.

An ε means little without three facts (docs/reproductions.md, "What an ε here promises"):

* **the unit protected**: *record-level* (neighbouring datasets differ in one sample of one
  client) or *user-level* (in one client's whole contribution);
* **the sensitivity the noise is sized for**: *exact* when the released quantity's sensitivity
  follows from the clipping (the clipped update itself, a FedSGD step on clipped per-sample
  gradients, a DP-SGD step), or the papers' *2C/|D| heuristic* (papers 003 and 004's NbAFL
  lineage), which treats the clipped model after several local SGD steps like one clipped
  mean; that is not a proof, so the ε it prints is not a record-level guarantee;
* **the accountant** that composes the rounds (basic composition, RDP, zCDP, PLD).

:func:`epsilon_kind` reads them from a ``privacy`` block (validated against the plug-in's
config, so defaults count) and returns e.g. ``"record-level, 2C/|D| heuristic, zCDP"``. It
only reads the configuration; the privacy plug-ins themselves are not changed by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

ACCOUNTANTS = {"basic": "basic composition", "rdp": "RDP", "zcdp": "zCDP", "pld": "PLD"}


def _accountant(config: Any, default: str) -> str:
    name = getattr(config, "accountant", None) or default
    return ACCOUNTANTS.get(name, name)


def epsilon_kind(privacy: Mapping[str, Any] | None) -> str:
    """``"<record|user>-level, <sensitivity>, <accountant>"`` for a ``privacy`` block.

    ``privacy`` is a scenario's ``privacy`` mapping (``{"kind": ..., **params}``); ``None``
    or ``kind: none`` gives ``"no DP"``. Unknown kinds raise ``ScenarioError`` (from the
    registry's validation).
    """
    from fedgame import registry

    if not privacy or privacy.get("kind", "none") == "none":
        return "no DP"
    kind = privacy["kind"]
    config = registry.validate("privacy", dict(privacy), key="privacy")
    replace = getattr(config, "adjacency", "add_remove") == "replace"
    factor = "2C" if replace else "C"
    if kind == "zcdp_gaussian":
        return f"record-level, 2C/|D| heuristic, {_accountant(config, 'zcdp')}"
    if kind in ("lightdp", "ldp", "smpc_dp", "ideal_smpc"):
        if config.level == "sample":  # type: ignore[attr-defined]
            return f"record-level, 2C/|D_min| heuristic, {_accountant(config, 'basic')}"
        return f"user-level, exact ({factor}), {_accountant(config, 'basic')}"
    if kind == "dpsgd_local":
        return (
            "record-level, exact (DP-SGD steps; shuffle accounted as Poisson sampling), "
            f"{_accountant(config, 'rdp')}"
        )
    if kind in ("gaussian", "gaussian_local", "laplace_local"):
        default = "basic" if kind == "laplace_local" else _gaussian_local_default(config)
        if config.level == "sample":  # type: ignore[attr-defined]
            norm = "L1 " if kind == "laplace_local" else ""
            return (
                f"record-level, exact ({norm}{factor}·η/D per FedSGD step), "
                f"{_accountant(config, default)}"
            )
        return f"user-level, exact ({factor}), {_accountant(config, default)}"
    if kind == "central_gaussian":
        return f"user-level, exact (C·largest weight, central), {_accountant(config, 'rdp')}"
    return f"{kind} (guarantee not classified)"


def _gaussian_local_default(config: Any) -> str:
    """``gaussian_local``'s default accountant: basic for per-release calibrations, else rdp."""
    from fedgame.privacy.gaussian_core import accountant_name

    return accountant_name(config)


def epsilon_header(label: str, privacies: Iterable[Mapping[str, Any] | None]) -> str:
    """A table header ``label (kind)`` naming the kind of every DP block among ``privacies``
    (distinct kinds joined by "; "; blocks without DP are left out)."""
    kinds: list[str] = []
    for privacy in privacies:
        kind = epsilon_kind(privacy)
        if kind != "no DP" and kind not in kinds:
            kinds.append(kind)
    return f"{label} ({'; '.join(kinds)})" if kinds else label
