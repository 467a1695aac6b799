"""Helpers shared by the local mechanisms: sensitivities, training settings, release tallies.

Local mechanisms privatise either the client's whole update (``level="update"``: the update
is clipped to norm C, sensitivity C for add/remove-one and 2C for replace-one) or, in FedSGD
mode, every per-sample gradient (``level="sample"``: the learner clips each per-sample
gradient to C, and the released update ``-eta * mean`` has sensitivity ``2 eta C / D_n`` for
replace-one, paper 000 Lemma 1/2). In DPFL-BCS stage-1 rounds the release also carries two
losses bounded by Θ, and the bound becomes ``2 eta (B + Theta) / D_n`` (Eq. 13).

``ParticipationPlan`` says over how many releases T_n, and with which share of its budget,
each client's noise is sized: one common count, or the selection's own per-client plan.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import Field, PositiveInt

from fedgame.errors import ScenarioError
from fedgame.learning.settings import TrainingSettings
from fedgame.mechanisms.base import ParticipationPlanner, ReportsLossBound
from fedgame.views import ClientView, SetupContext, column_of


def adjacency_factor(adjacency: str) -> float:
    """2 for replace-one neighbours (both terms may change), 1 for add/remove-one."""
    return 2.0 if adjacency == "replace" else 1.0


def sample_sensitivity(
    *, clip: float, lr: float, dataset_sizes: np.ndarray, factor: float
) -> np.ndarray:
    """Sensitivity ``factor * eta * C / D_n`` of a FedSGD update (paper 000, Lemma 1 / 2).

    With ``factor=2`` (replace-one) this is the paper's ``2 eta B / D_n``; an empty client is
    treated as holding one sample.
    """
    sizes = np.maximum(np.asarray(dataset_sizes, dtype=float), 1.0)
    return factor * lr * clip / sizes


def release_sensitivities(
    *,
    level: str,
    clip: float,
    factor: float,
    dataset_sizes: np.ndarray,
    lr: float = 1.0,
    loss_bound: float = 0.0,
) -> np.ndarray:
    """Sensitivity of each client's released update, with stage-1 losses bounded by Θ.

    ``level="update"``: ``factor (C + Θ)``; ``level="sample"``: ``factor η (C + Θ) / D_n``,
    paper 000 Eq. 13 (``factor=2``: ``calibrate.bcs_sensitivity``). ``loss_bound=0`` gives
    the plain Lemma 1/2 bound. ``level="record"``: ``factor C / D_n`` for a whole update
    clipped to C, the record-level heuristic of paper 003 Corollary 1 (2C/|D_i|).
    """
    bound = clip + loss_bound
    if level == "update":
        return np.full(len(dataset_sizes), factor * bound)
    if level == "record":
        return sample_sensitivity(clip=bound, lr=1.0, dataset_sizes=dataset_sizes, factor=factor)
    return sample_sensitivity(clip=bound, lr=lr, dataset_sizes=dataset_sizes, factor=factor)


def check_sample_level(scenario: Any, *, key: str, norm: str) -> None:
    """Per-sample privatisation needs FedSGD (one full-batch step) and the matching clip norm."""
    training = scenario.training
    if training.mode != "fedsgd":
        raise ScenarioError(
            f"{key}.level", "sample", "needs training.mode: fedsgd (one full-batch step per round)"
        )
    if training.clip_norm != norm:
        raise ScenarioError(
            "training.clip_norm", training.clip_norm, f"must be {norm!r} for this mechanism"
        )


def training_from(ctx: SetupContext) -> TrainingSettings:
    """The run's training settings, read from the learner the model hands to ``prepare``."""
    if ctx.learner is None:
        raise RuntimeError("prepare() needs ctx.learner (the batched learner)")
    settings: TrainingSettings = ctx.learner.settings
    return settings


def effective_epsilon(
    responses: Sequence[Any], defaults: Sequence[float], *, echoed: Sequence[float] | None = None
) -> np.ndarray:
    """Per-round ε: a response's own ``epsilon`` when given, else the client's default.

    ``echoed``: the views' scenario-wide ``epsilon_round``; a response that merely echoes it
    (policy ``always``) asks for the default level, which is ``defaults`` under a per-client
    plan.
    """
    echoed = defaults if echoed is None else echoed
    return np.array(
        [
            r.epsilon if math.isfinite(r.epsilon) and r.epsilon != e else d
            for r, d, e in zip(responses, defaults, echoed)
        ],
        dtype=float,
    )


class ReleaseTally:
    """Per-client running sums over released updates (for closed-form ε columns).

    ``add(cid, eps=..., inv_z2=...)`` accumulates basic-composition ε and ``sum 1/z^2`` (the
    quantity the moments-accountant style closed forms grow with); ``count`` the releases.
    """

    def __init__(self) -> None:
        self.eps: dict[int, float] = {}
        self.inv_z2: dict[int, float] = {}
        self.count: dict[int, int] = {}

    def reset(self, client_ids: Sequence[int]) -> None:
        for cid in client_ids:
            self.eps[cid], self.inv_z2[cid], self.count[cid] = 0.0, 0.0, 0

    def add(self, cid: int, *, eps: float, noise_multiplier: float) -> None:
        self.eps[cid] = self.eps.get(cid, 0.0) + eps
        self.inv_z2[cid] = self.inv_z2.get(cid, 0.0) + 1.0 / noise_multiplier**2
        self.count[cid] = self.count.get(cid, 0) + 1


Participations = Literal["auto", "scenario"] | PositiveInt


def participations_field() -> Any:
    """The ``participations`` knob of the local mechanisms (see :class:`ParticipationPlan`)."""
    return Field(
        "auto",
        description=(
            "planned releases T per client: auto (the selection's per-client plan, else "
            "scenario), scenario (rounds x expected selected fraction) or a fixed integer"
        ),
    )


class ParticipationPlan:
    """Each client's planned releases T_n and budget share, for noise calibration and charges.

    ``setting`` is a mechanism's ``participations`` option: an integer fixes one T for every
    client; ``"scenario"`` uses the scenario-wide planned count (rounds × the selection's
    expected fraction, given to ``epsilon_per_round``); ``"auto"`` (default) reads the
    selection's hooks ``planned_participations(client_id)`` and ``budget_fraction(client_id)``
    (paper 000 T_n and remaining share, paper 001 realised T_k, paper 002 reply counts) when it
    has them, and falls back to ``"scenario"`` otherwise. A client with no planned release (T_n
    = 0, or share 0 once a stage's budget is used up) is sized for one release at its whole
    budget, which the ledger then refuses if part of it is already spent.

    The selection's ``loss_bound(round)`` (DPFL-BCS stage 1, paper 000 Eq. 13) is read
    whatever the setting: it enlarges the sensitivity, not the count.

    The model prices a client's next release (``next_charge``, the budget check) after each
    release; a selection that re-plans in between (DPFL-BCS stage 2 starts inside ``select``)
    must not make the release costlier than priced: ``priced`` records the plan and noise
    multiplier of each pricing and ``floored`` keeps a release's multiplier at least the priced
    one when the plan changed since (then the next pricing uses the new plan).
    """

    def __init__(self, setting: Participations) -> None:
        self.setting = setting
        self.fixed = setting if isinstance(setting, int) else None
        self.scenario = self.fixed or 1
        self.selection: Any = None
        self.hooked = False
        self._priced: dict[int, tuple[tuple[int, float], float]] = {}

    def set_scenario(self, count: int) -> int:
        """Record the scenario-wide count (an integer setting wins); returns the count used."""
        self.scenario = self.fixed or int(count)
        return self.scenario

    def bind(self, selection: Any) -> None:
        """Attach the run's selection (``ctx.selection``) in ``prepare``."""
        self.selection = selection
        self.hooked = self.setting == "auto" and isinstance(selection, ParticipationPlanner)

    def of(self, client_id: int) -> tuple[int, float]:
        """(T_n, share of (ε_total, δ) those T_n releases split) of ``client_id``."""
        if not self.hooked:
            return self.scenario, 1.0
        sel = self.selection
        t = int(sel.planned_participations(client_id))
        share = float(sel.budget_fraction(client_id))
        if t < 1 or not share > 0.0:
            return 1, 1.0
        return t, min(share, 1.0)

    def round_budget(self, client: ClientView) -> tuple[float, float]:
        """Default per-release (ε, δ): ``share·(ε_total, δ)/T_n``, or the view's own split."""
        if not self.hooked:
            return client.epsilon_round, client.delta_round
        t, share = self.of(client.client_id)
        return client.epsilon_total * share / t, client.delta * share / t

    def budget(self, client: ClientView) -> tuple[float, float, int, float]:
        """(ε, δ, T, share): the budget ``share·(ε_total, δ)`` to spread over T releases."""
        t, share = self.of(client.client_id)
        return client.epsilon_total * share, client.delta * share, t, share

    def priced(self, client_id: int, noise_multiplier: float) -> None:
        """Record that the budget check priced ``client_id``'s next release at this multiplier."""
        if self.hooked:
            self._priced[client_id] = (self.of(client_id), noise_multiplier)

    def floored(self, client_id: int, noise_multiplier: float) -> float:
        """The multiplier to release at: at least the priced one if the plan changed since."""
        last = self._priced.get(client_id)
        if last is None or last[0] == self.of(client_id):
            return noise_multiplier
        return max(noise_multiplier, last[1])

    def loss_bound(self, round_index: int) -> float:
        """Θ of the selection's stage-1 loss reports at 1-based ``round_index`` (0 without)."""
        if isinstance(self.selection, ReportsLossBound):
            return float(self.selection.loss_bound(round_index))
        return 0.0


class ReleaseSensitivity:
    """Mixin: per-client sensitivity of a released update (update or per-sample level).

    Expects ``config.level``, ``config.clip``, ``factor``, ``training`` (the learner's settings,
    set in ``prepare``) and ``participation`` (a :class:`ParticipationPlan`) on the instance.
    """

    def sensitivities(self, clients: Sequence[ClientView], *, round_index: int) -> np.ndarray:
        """Δ_k of each client's released update, in the mechanism's norm (0-based round)."""
        config: Any = self.config  # type: ignore[attr-defined]
        sample = config.level == "sample"
        return release_sensitivities(
            level=config.level,
            clip=config.clip,
            factor=self.factor,  # type: ignore[attr-defined]
            dataset_sizes=column_of(clients, "dataset_size"),
            lr=self.training.lr_at(round_index) if sample else 1.0,  # type: ignore[attr-defined]
            loss_bound=self.participation.loss_bound(round_index + 1),  # type: ignore[attr-defined]
        )
