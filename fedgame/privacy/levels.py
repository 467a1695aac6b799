"""The privacy level a client's response names, and the noise it buys.

A follower answers an offer with a participation decision and, for strategic policies, a
privacy level for the round (:class:`fedgame.views.Response`): a zCDP budget ``rho`` (the
QI-DPFL game, paper 003 §III) or a per-round ``epsilon``. A policy declares which one it
chooses (``chooses``: ``"default"`` for none, ``"rho"`` or ``"epsilon"``); a privacy mechanism
declares which chosen levels its noise follows (``follows``). The scenario is refused at
validation when a policy would choose a level the mechanism's noise ignores
(:func:`check_coupling`): a payment for privacy must buy the noise it pays for.

The conversions are exact:

* Gaussian noise of multiplier z = σ/Δ is ρ-zCDP with ρ = 1/(2z²), so a release at ρ has
  z = 1/sqrt(2ρ) (Bun & Steinke 2016, Prop. 1.6);
* ε-DP (Laplace) implies ε²/2-zCDP, so a Laplace release at ρ uses ε = sqrt(2ρ) (ibid.,
  Prop. 1.4).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Literal

import numpy as np

from fedgame.errors import ScenarioError

Level = Literal["default", "epsilon", "rho"]
#: the levels a response may name (``default``: the plan's own share, nothing chosen)
CHOSEN: tuple[Level, ...] = ("epsilon", "rho")


def rho_noise_multipliers(rho: np.ndarray) -> np.ndarray:
    """z = 1/sqrt(2ρ): the Gaussian noise multiplier whose release is exactly ρ-zCDP."""
    return 1.0 / np.sqrt(2.0 * np.asarray(rho, dtype=float))


def rho_laplace_epsilon(rho: np.ndarray) -> np.ndarray:
    """ε = sqrt(2ρ): the pure-DP level whose Laplace release is ρ-zCDP (Prop. 1.4)."""
    return np.sqrt(2.0 * np.asarray(rho, dtype=float))


def following_rho(rho: np.ndarray, otherwise: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Noise multiplier per row: 1/sqrt(2ρ) where ρ was chosen (finite), else
    ``otherwise(rows)`` for the boolean mask of the other rows (the plan's own level)."""
    chosen = np.isfinite(rho)
    z = np.empty(len(rho))
    z[chosen] = rho_noise_multipliers(rho[chosen])
    if not chosen.all():
        z[~chosen] = otherwise(~chosen)
    return z


def chosen_rho(responses: Sequence[Any]) -> np.ndarray:
    """Each response's ρ where it names a positive finite one, NaN elsewhere."""
    from fedgame.views import column_of

    rho = column_of(responses, "rho")
    return np.where(np.isfinite(rho) & (rho > 0), rho, math.nan)


def check_coupling(scenario: Any) -> None:
    """Refuse a policy whose chosen level the privacy mechanism's noise would ignore.

    Every behaviour of the population (or the one ``policy``) declares the level it chooses;
    the mechanism declares the levels it follows. One line names both keys and what works.
    """
    import fedgame.registry as registry

    privacy = scenario.component("privacy")
    privacy_kind = privacy.kind
    follows = _follows(privacy_kind)
    run_scope = _run_scope_calibration(privacy_kind, privacy.params)
    if run_scope is not None:
        follows = follows - {"epsilon"}
    for key, kind in _policy_keys(scenario):
        chooses = _chooses(kind)
        if chooses == "default" or chooses in follows:
            continue
        if run_scope is not None and chooses == "epsilon":
            raise ScenarioError(
                "privacy.calibration",
                run_scope,
                f"it sizes each client's noise for its whole budget over the run, so the "
                f"per-release epsilon that {key} '{kind}' chooses would buy nothing; use a "
                "calibration of one release (analytic, classic, lightdp) or a policy that "
                "chooses rho or nothing",
            )
        good = sorted(name for name in registry.names("privacy") if chooses in _follows(name))
        served = sorted(
            name
            for name in registry.names("policy")
            if _chooses(name) == "default" or _chooses(name) in follows
        )
        raise ScenarioError(
            "privacy.kind",
            privacy_kind,
            f"its noise does not follow the {chooses} that {key} '{kind}' chooses for each "
            f"client, so payments would buy nothing; privacy kinds that follow {chooses}: "
            f"{', '.join(good)}; policies '{privacy_kind}' can serve: {', '.join(served)}",
        )


def _run_scope_calibration(privacy_kind: str, params: dict[str, Any]) -> str | None:
    """The mechanism's calibration when it is one of the whole run (``scope == "run"``).

    Such a calibration (``accountant``, ``dpfl_bcs``) sizes each client's noise from its
    whole budget over its planned releases, so a per-release ε a response asks for cannot
    move it; a chosen ρ still does (z = 1/sqrt(2ρ) whatever the calibration).
    """
    import fedgame.registry as registry

    config: Any = getattr(registry.entry("privacy", privacy_kind).cls, "Config", None)
    fields = getattr(config, "model_fields", {})
    if "calibration" not in fields:
        return None
    name = params.get("calibration", fields["calibration"].default)
    if not isinstance(name, str) or name not in registry.names("calibration"):
        return None  # the mechanism's own validation names a bad value
    calibration: Any = registry.entry("calibration", name).cls
    return name if calibration.scope == "run" else None


def _policy_keys(scenario: Any) -> list[tuple[str, str]]:
    entries = scenario.population.behaviours
    if not entries:
        return [("policy.kind", scenario.component("policy").kind)]
    return [(f"population.behaviours.{i}.kind", b.kind) for i, b in enumerate(entries)]


def _follows(name: str) -> frozenset[str]:
    """The levels privacy mechanism ``name`` declares its noise follows."""
    import fedgame.registry as registry

    cls: Any = registry.entry("privacy", name).cls
    return frozenset(cls.follows)


def _chooses(name: str) -> str:
    """The level policy ``name`` declares it chooses."""
    import fedgame.registry as registry

    cls: Any = registry.entry("policy", name).cls
    return str(cls.chooses)
