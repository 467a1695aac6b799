"""The numbers a game's knobs lead to, checked at validation so that a run cannot overflow.

Each knob of a game incentive (φ, γ, π, β, λ, C, d, a fixed reward, a belief) is valid on its
own, yet together with the population they can make a quantity the leader or the followers
compute overflow or vanish: Theorem 1's budget per unit reward C_i = (N−1)(Σν − (N−1)ν_i)
/ (φ(Σν)²) underflows to 0 when φ·(Σν)² overflows; Theorem 2's A_t and R_t* = √(A_t·π^(1−t)
/(1−γ)) overflow with a tiny λ or π; the privacy cost φ·ν·ρ with a huge φ. A run that meets
one stops in round 1 with a message about internal variables.

:func:`check_game_magnitudes` computes those quantities with the same functions the run uses
(:mod:`fedgame.game.stackelberg`), on probe markets at the edges of what the run can meet:
N ∈ {2, population.clients} players; ν at both ends of the population's privacy values
(a log-normal's ±8σ when unbounded), at the centre of the leader's prior when it has a
belief and at the optimistic values ν·exp(−κ·sd) an exploring leader admits by; |D_i| ∈
{1, 10⁶} samples; d ∈ {1, 10⁸} parameters (or ``dim``); rounds 1 and T. Every quantity
must be a finite positive number of normal size (at least 1e−300, at most 1e300).
A failure names the knob whose default value makes it pass (else ``population.privacy_value``),
with the quantity, its value and the market it was computed on.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from itertools import product
from typing import Any

import numpy as np

from fedgame.errors import ScenarioError
from fedgame.game.stackelberg import (
    ServerCostParams,
    accuracy_constant,
    active_coefficients,
    optimal_reward,
    server_cost,
)

#: a derived quantity must lie in [TINY, HUGE] (the float range is about 2e−308 .. 1.8e308)
TINY, HUGE = 1e-300, 1e300
#: the edges of a probe market
SIZES = (1.0, 1e6)
DIMS = (1, 10**8)
#: an unbounded log-normal's values are taken within exp(mean ± SIGMAS·sigma)
SIGMAS = 8.0
#: knobs a failure may be blamed on, in order (the first whose default passes is named)
KNOBS = ("phi", "gamma", "discount", "beta", "lam", "clip", "dim", "grad_bound", "reward",
         "high", "low", "reward_cap", "belief")  # fmt: skip


class _Failed(Exception):
    """A derived quantity out of range: ``(what, value, market)``."""


def value_range(dist: Any) -> tuple[float, float]:
    """The smallest and largest value a population distribution gives in practice: its
    support, with an unbounded log-normal cut at exp(mean ± 8σ)."""
    components = getattr(dist, "components", None)
    if components is not None:
        ranges = [value_range(c.distribution()) for c in components]
        return min(r[0] for r in ranges), max(r[1] for r in ranges)
    lo, hi = dist.support()
    if getattr(dist, "dist", None) == "lognormal":
        lo = max(lo, math.exp(max(dist.mean - SIGMAS * dist.sigma, -700.0)))
        hi = min(hi, math.exp(min(dist.mean + SIGMAS * dist.sigma, 700.0)))
    return float(lo), float(hi)


def check_game_magnitudes(config: Any, scenario: Any, *, key: str) -> None:
    """Refuse game knobs whose derived quantities leave the float range (module doc)."""
    failure = _probe(config, scenario)
    if failure is None:
        return
    what, value, market = failure
    dist = scenario.population.privacy_value
    blamed, shown = "population.privacy_value", dist.model_dump(exclude_defaults=True)
    for name in KNOBS:
        field = type(config).model_fields.get(name)
        if field is None:
            continue
        default = field.get_default(call_default_factory=True)
        if getattr(config, name) == default:
            continue
        if _probe(config.model_copy(update={name: default}), scenario) is None:
            blamed, shown = f"{key}.{name}", getattr(config, name)
            if name == "belief":  # its prior sets the leader's first estimates of nu
                blamed, shown = f"{key}.belief.prior", config.belief.prior.model_dump()
            break
    found = f"would be {value:.4g}" if math.isfinite(value) or math.isinf(value) else ""
    raise ScenarioError(
        blamed,
        shown,
        f"a value for which the {key} game's derived quantities stay within {TINY:g} to "
        f"{HUGE:g}: {what} {found} for {market}; bring this value or population.privacy_value "
        "closer to 1",
    )


def _nu_edges(config: Any, scenario: Any) -> list[float]:
    lo, hi = value_range(scenario.population.privacy_value)
    edges = [lo, hi]
    belief = getattr(config, "belief", None)
    if belief is not None:
        edges.append(math.exp(belief.prior.log_moments()[0]))
        if belief.explore > 0:  # the optimistic values it admits by, from its lowest estimate
            edges.append(min(edges) * belief.optimism_floor())
    return sorted(set(edges))


def _probe(config: Any, scenario: Any) -> tuple[str, float, str] | None:
    """The first out-of-range quantity over the probe markets, or None."""
    try:
        for market in _markets(config, scenario):
            _check_market(config, *market)
    except _Failed as failed:
        what, value, market_text = failed.args
        return what, value, market_text
    return None


def _markets(config: Any, scenario: Any) -> Iterator[tuple[int, float, float, int, int]]:
    clients = max(2, int(scenario.population.clients))
    dims = (config.dim,) if getattr(config, "dim", None) else DIMS
    rounds = int(scenario.rounds)
    for n, nu, size, dim in product(sorted({2, clients}), _nu_edges(config, scenario), SIZES, dims):
        yield n, nu, size, dim, rounds


def _ok(what: str, value: float, market: str) -> float:
    if not (math.isfinite(value) and TINY <= abs(value) <= HUGE):
        raise _Failed(what, value, market)
    return value


def _power(base: float, exponent: float) -> float:
    """``base ** exponent`` as a float, ``inf`` where Python's power overflows."""
    try:
        return float(base**exponent)
    except OverflowError:
        return math.inf


def _check_market(config: Any, n: int, nu: float, size: float, dim: int, rounds: int) -> None:
    market = f"{n} players with nu = {nu:.4g}, |D_i| = {size:g}, d = {dim}, {rounds} rounds"
    nus, sizes = np.full(n, nu), np.full(n, size)
    f = np.float64  # overflow to inf, not an exception
    with np.errstate(all="ignore"):
        phi, total, lam_t = f(config.phi), f(n) * f(nu), f(config.lam) * f(rounds)
        _ok("phi*nu (a player's cost per unit budget)", float(phi * f(nu)), market)
        _ok("phi*(sum of nu)^2", float(phi * total * total), market)
        scale = f(2) * f(config.beta) * f(config.gamma) / (lam_t * lam_t)
        _ok("the server-cost scale 2*beta*gamma/(lam*T)^2", float(scale), market)
        clip = f(config.clip)
        noise = f(4) * f(dim) * f(config.gamma) * f(config.beta) * clip * clip
        _ok("4*d*gamma*beta*C^2", float(noise), market)
        try:
            coeff = float(active_coefficients(nus, phi=config.phi)[0])
            _ok("C_i (Theorem 1's budget per unit reward)", coeff, market)
            params = ServerCostParams(
                gamma=config.gamma,
                discount=config.discount,
                beta=config.beta,
                lam=config.lam,
                clip=config.clip,
                dim=dim,
                rounds=rounds,
                grad_bound=config.grad_bound,
            )
            a = accuracy_constant(nus, sizes, phi=config.phi, params=params)
            _ok("A_t (Theorem 2)", a, market)
            for t in sorted({1, rounds}):
                _ok(f"pi^(1-t) at round {t}", _power(config.discount, 1 - t), market)
                best = _ok(f"R_t* at round {t}", optimal_reward(a, t=t, params=params), market)
                for reward in _played_rewards(config, best):
                    rho = _ok(f"a budget rho = C_i*R_t at round {t}", coeff * reward, market)
                    _ok(f"a privacy cost phi*nu*rho at round {t}", config.phi * nu * rho, market)
                    cost = server_cost(
                        reward, rho=np.full(n, rho), data_sizes=sizes, t=t, params=params
                    )
                    _ok(f"the server cost at round {t}", cost.total, market)
        except (ScenarioError, OverflowError, ZeroDivisionError, FloatingPointError) as exc:
            reason = " ".join(str(exc).split())
            raise _Failed(f"a game quantity ({reason})", math.nan, market) from None


def _played_rewards(config: Any, optimal: float) -> list[float]:
    """The rewards the incentive may offer: a fixed R, or R_t* scaled by ``low``/``high``
    (max, random), each capped by ``reward_cap``."""
    fixed = getattr(config, "reward", None)
    if fixed is not None:
        rewards = [float(fixed)]
    else:
        factors = {1.0, float(getattr(config, "low", 1.0)), float(getattr(config, "high", 1.0))}
        rewards = [optimal * f for f in sorted(factors)]
    cap = getattr(config, "reward_cap", None)
    return [min(r, cap) for r in rewards] if cap is not None else rewards
