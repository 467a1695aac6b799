"""The accountant family: per-client privacy accounting of a whole population, batched.

An accountant is one plug-in file. It reads releases as :class:`fedgame.privacy.base.Charges`
(each row convertible to a ``dp_accounting`` DpEvent), keeps every client's composed privacy
loss, and answers three questions for the model's budget (:mod:`fedgame.privacy.budget`):

* ``charge(ids, charges)``: record releases (a repeated id composes its releases);
* ``epsilon_if(ids, charges)``: ε each row's client would have spent after its releases up to
  and including this row of the batch, nothing recorded (a client selected twice in a round is
  priced for both releases together);
* ``calibrate(epsilon=, delta=, releases=, template=)``: the smallest noise multiplier z such
  that ``releases`` releases like ``template`` (its z replaced) meet (ε, δ) under this
  accountant, found by bisection on the accountant's own ``composed_epsilon`` (so calibration
  and accounting agree by construction).

ε is reported at each client's own δ (``start(deltas)``). Whether an accountant can account a
mechanism is a declared capability, ``describes(noise_family)``, checked at validation.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

import fedgame.registry as registry
from fedgame.errors import ScenarioError
from fedgame.privacy.base import Charge, Charges

#: relative slack of budget checks: T releases of ε_total/T each must fit exactly
EXCEED_RTOL = 1e-9
#: the noise families a release may have (``Charge.noise``), ``"none"`` aside
NOISE_FAMILIES = ("gaussian", "subsampled_gaussian", "laplace")


@runtime_checkable
class Accountant(Protocol):
    """Per-client accounting of releases for a population (the ``accountant`` family's Protocol)."""

    name: ClassVar[str]

    def describes(self, noise: str) -> bool:
        """Whether this accountant can account releases of the noise family ``noise``."""
        ...

    def start(self, deltas: np.ndarray) -> None:
        """Empty ledgers for ``len(deltas)`` clients, each reporting ε at its own δ."""
        ...

    def charge(self, ids: np.ndarray, charges: Charges) -> None:
        """Record one release per row (repeated ids compose)."""
        ...

    def epsilon(self, ids: np.ndarray | None = None) -> np.ndarray:
        """ε spent by clients ``ids`` (default all) at their δ."""
        ...

    def epsilon_if(self, ids: np.ndarray, charges: Charges) -> np.ndarray:
        """Per row: ε after the client's releases of this batch up to this row (not recorded)."""
        ...

    def composed_epsilon(self, release: Charge, *, count: int, delta: float) -> float:
        """ε of ``count`` compositions of ``release`` at ``delta``, from nothing spent."""
        ...

    def calibrate(self, *, epsilon: float, delta: float, releases: int, template: Charge) -> float:
        """Smallest multiplier z with ``releases`` releases of ``template`` within (ε, δ)."""
        ...


def check_step_columns(charges: Charges) -> None:
    """Reject impossible releases (negative noise, rates outside [0, 1], fractional steps)."""
    z, q, s = charges.noise_multiplier, charges.sample_rate, charges.steps
    if not (z.min(initial=0.0) >= 0 and q.min(initial=0.0) >= 0 and q.max(initial=0.0) <= 1):
        raise ValueError(f"bad release: noise {z}, rate {q}, steps {s}")
    if s.min(initial=0) < 0:
        raise ValueError(f"bad release: noise {z}, rate {q}, steps {s}")
    unknown = set(charges.noise.tolist()) - {"none", *NOISE_FAMILIES}
    if unknown:
        raise ValueError(f"unknown noise families {sorted(unknown)}; known: {NOISE_FAMILIES}")


def occurrence_rank(ids: np.ndarray) -> np.ndarray:
    """For each row, how many earlier rows have the same id (0 for a first occurrence)."""
    k = len(ids)
    if k < 2 or bool((ids[1:] > ids[:-1]).all()):  # strictly increasing: all distinct
        return np.zeros(k, dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    repeats = sorted_ids[1:] == sorted_ids[:-1]
    if not repeats.any():  # all distinct
        return np.zeros(k, dtype=np.int64)
    starts = np.concatenate(([True], ~repeats))
    first = np.maximum.accumulate(np.where(starts, np.arange(k), 0))
    rank = np.empty(k, dtype=np.int64)
    rank[order] = np.arange(k) - first
    return rank


def search_noise(
    composed: Callable[[float], float],
    *,
    epsilon: float,
    rtol: float = 1e-7,
    start: float = 1.0,
    factor: float = 4.0,
) -> float:
    """Smallest z (to ``rtol``, rounded up) with ``composed(z) <= epsilon``; ``composed``
    must decrease in z.

    A bracket [z/factor, z] from z = ``start`` is moved until it holds the crossing (a start
    near the answer and a small factor bracket it in two evaluations); Brent's method on log z then
    finds it to ``rtol / 2`` (about 10 evaluations where bisection takes 25: each one is an
    accountant's composition, seconds for a subsampled Gaussian), and the answer is the
    bracket's upper end, checked: if it misses the target, bisection finishes the search.
    """
    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ScenarioError("epsilon", epsilon, "a calibration target must be finite and > 0")
    if not (start > 0 and factor > 1):
        raise ValueError(f"search_noise needs start > 0 and factor > 1, got {start}, {factor}")
    steps = max(80, math.ceil(80 * math.log(4.0) / math.log(factor)))  # as far as 4^80
    hi = start
    for _ in range(steps):
        if composed(hi) <= epsilon:
            break
        hi *= factor
    else:
        raise ScenarioError("epsilon", epsilon, "no noise multiplier below 4^80 reaches it")
    lo = hi / factor
    for _ in range(steps):
        if composed(lo) > epsilon:
            break
        hi, lo = lo, lo / factor
    else:
        return hi  # even tiny noise meets the target (e.g. a very loose δ)
    from scipy.optimize import brentq

    half = rtol / 2.0
    root = brentq(
        lambda t: composed(math.exp(t)) - epsilon,
        math.log(lo),
        math.log(hi),
        xtol=half,
        rtol=4.0 * np.finfo(float).eps,
    )
    guess = math.exp(root + half)  # the crossing lies within half (in log z) of root
    if guess < hi and composed(guess) <= epsilon:
        return guess
    while hi / lo - 1.0 > rtol:
        mid = math.sqrt(lo * hi)
        if composed(mid) <= epsilon:
            hi = mid
        else:
            lo = mid
    return hi


class AccountantBase:
    """Shared plumbing: capability by example events, calibration cache, validation."""

    name: ClassVar[str] = ""
    families: ClassVar[frozenset[str]] = frozenset()

    def __init__(self) -> None:
        self.deltas = np.zeros(0)
        self._calibrated: dict[tuple, float] = {}

    def describes(self, noise: str) -> bool:
        return noise == "none" or noise in self.families

    def _check(self, charges: Charges) -> None:
        check_step_columns(charges)
        missing = set(charges.noise.tolist()) - {"none", *self.families}
        if missing:
            raise ValueError(
                f"accountant {self.name!r} cannot describe {sorted(missing)} releases "
                f"(it accounts {sorted(self.families)})"
            )

    def composed_epsilon(self, release: Charge, *, count: int, delta: float) -> float:
        raise NotImplementedError

    def calibrate(self, *, epsilon: float, delta: float, releases: int, template: Charge) -> float:
        """Smallest z meeting (ε, δ) over ``releases`` releases of ``template`` (cached)."""
        z = self.calibrate_many(
            epsilons=[epsilon], delta=delta, releases=releases, template=template
        )
        return float(z[0])

    def calibrate_many(
        self,
        *,
        epsilons: Sequence[float] | np.ndarray,
        delta: float,
        releases: int,
        template: Charge,
        progress: Callable[[int, int], None] | None = None,
    ) -> np.ndarray:
        """``calibrate`` for several ε targets sharing (δ, releases, template), one z each.

        The targets share one decreasing curve ε(z): they are solved from the largest ε
        (smallest z) up, each search handed the previous answer as a start (``_search``: the
        pld accountant uses it, the others search as ``calibrate`` always did), and every
        answer is cached by (template, ε, δ, releases) as ``calibrate``'s.
        ``progress(done, total)`` is called after each distinct target that had to be solved.
        """
        if not (isinstance(releases, int | np.integer) and releases >= 1):
            raise ScenarioError("releases", releases, "must be an integer >= 1")
        if not 0 < delta < 1:
            raise ScenarioError("delta", delta, "must lie in (0, 1)")
        if not self.describes(template.noise):
            raise ScenarioError(
                "accountant", self.name, f"cannot describe {template.noise!r} releases"
            )
        targets = [float(e) for e in np.asarray(epsilons, dtype=float).reshape(-1)]
        base = (template.noise, template.sample_rate, template.steps, template.delta)
        tail = (float(delta), int(releases))
        todo = sorted({e for e in targets if (*base, e, *tail) not in self._calibrated})
        if todo:
            solved = self._solve_targets(
                todo[::-1],
                delta=float(delta),
                releases=int(releases),
                template=template,
                progress=None if progress is None else lambda k: progress(k, len(todo)),
            )
            for eps, z in zip(todo[::-1], solved):
                self._calibrated[(*base, eps, *tail)] = z
        return np.array([self._calibrated[(*base, e, *tail)] for e in targets], dtype=float)

    def _solve_targets(
        self,
        targets: Sequence[float],
        *,
        delta: float,
        releases: int,
        template: Charge,
        progress: Callable[[int], None] | None,
    ) -> list[float]:
        """z for each of ``targets`` (distinct, largest ε first): one ``_search`` each, every
        search started from the previous answer. ``progress(k)`` after the k-th."""
        out: list[float] = []
        hint: float | None = None
        for done, eps in enumerate(targets, start=1):
            hint = self._search(
                epsilon=eps, delta=delta, releases=releases, template=template, hint=hint
            )
            out.append(hint)
            if progress is not None:
                progress(done)
        return out

    def _search(
        self, *, epsilon: float, delta: float, releases: int, template: Charge, hint: float | None
    ) -> float:
        """One target's smallest z: Brent on this accountant's ``composed_epsilon``.

        ``hint`` (a nearby target's answer) is not used here, so every accountant that keeps
        this search returns what it returned target by target.
        """
        del hint
        return search_noise(
            lambda z: self.composed_epsilon(
                replace(template, noise_multiplier=z), count=releases, delta=delta
            ),
            epsilon=epsilon,
            rtol=self.calibration_rtol,
        )

    calibration_rtol: ClassVar[float] = 1e-7


class StateAccountant(AccountantBase):
    """An accountant whose per-client state is a vector that adds up over releases.

    Subclasses give ``increments(charges) -> [k, width]`` (the state one release adds) and
    ``to_epsilon(states [k, width], deltas [k]) -> [k]``; composition is addition, so a round's
    releases are priced and recorded as a few array operations for the whole population.
    """

    width: int = 1

    def __init__(self) -> None:
        super().__init__()
        self.state = np.zeros((0, self.width))

    def increments(self, charges: Charges) -> np.ndarray:
        raise NotImplementedError

    def to_epsilon(self, states: np.ndarray, deltas: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def start(self, deltas: np.ndarray) -> None:
        self.deltas = np.asarray(deltas, dtype=float).copy()
        self.state = np.zeros((len(self.deltas), self.width))

    def _increments(self, charges: Charges) -> np.ndarray:
        self._check(charges)
        paid = ~charges.free
        if paid.all():
            return self.increments(charges)
        inc = np.zeros((len(charges), self.width))
        if paid.any():
            inc[paid] = self.increments(charges[np.flatnonzero(paid)])
        return inc

    def charge(self, ids: np.ndarray, charges: Charges) -> None:
        ids = np.asarray(ids, dtype=np.int64)
        np.add.at(self.state, ids, self._increments(charges))

    def epsilon(self, ids: np.ndarray | None = None) -> np.ndarray:
        if ids is None:
            return self.to_epsilon(self.state, self.deltas)
        ids = np.asarray(ids, dtype=np.int64)
        return self.to_epsilon(self.state[ids], self.deltas[ids])

    def epsilon_if(self, ids: np.ndarray, charges: Charges) -> np.ndarray:
        ids = np.asarray(ids, dtype=np.int64)
        inc = self._increments(charges)
        rank = occurrence_rank(ids)
        if not rank.any():
            rows = self.state[ids] + inc
        else:
            uniq, where = np.unique(ids, return_inverse=True)
            running = self.state[uniq].copy()
            rows = np.empty_like(inc)
            for r in range(int(rank.max()) + 1):
                at = rank == r  # at most one row per client
                running[where[at]] += inc[at]
                rows[at] = running[where[at]]
        return self.to_epsilon(rows, self.deltas[ids])

    def composed_epsilon(self, release: Charge, *, count: int, delta: float) -> float:
        inc = self._increments(Charges.of([release]))[0]
        return float(self.to_epsilon((count * inc)[None, :], np.array([delta]))[0])


def calibrate_targets(
    accountant: Accountant,
    *,
    epsilons: Sequence[float] | np.ndarray,
    delta: float,
    releases: int,
    template: Charge,
    progress: Callable[[int, int], None] | None = None,
) -> np.ndarray:
    """One z per ε target: ``calibrate_many`` where the accountant has it, else target by target
    (a plug-in accountant that only implements the Protocol's ``calibrate``)."""
    if isinstance(accountant, AccountantBase):
        return accountant.calibrate_many(
            epsilons=epsilons, delta=delta, releases=releases, template=template, progress=progress
        )
    targets = [float(e) for e in np.asarray(epsilons, dtype=float).reshape(-1)]
    out = np.empty(len(targets))
    for i, eps in enumerate(targets):
        out[i] = accountant.calibrate(
            epsilon=eps, delta=delta, releases=releases, template=template
        )
        if progress is not None:
            progress(i + 1, len(targets))
    return out


def make_accountant(name: str, *, key: str = "privacy.accountant") -> Accountant:
    """A fresh accountant plug-in by registered name (unknown names list the valid ones)."""
    registry.entry("accountant", name, key=key)
    return registry.create("accountant", name)


def check_describes(name: str, noise: str, *, key: str = "privacy.accountant") -> None:
    """Refuse an accountant that cannot describe a mechanism's releases.

    Raises:
        ScenarioError: naming ``key``, the accountant, and the accountants that would do.
    """
    if make_accountant(name, key=key).describes(noise):
        return
    able = [n for n in registry.names("accountant") if make_accountant(n).describes(noise)]
    raise ScenarioError(
        key,
        name,
        f"cannot account for {noise!r} releases; accountants that can: {', '.join(able) or 'none'}",
    )


def check_reachable(name: str, scenario: Any, *, releases: int, template: Charge, key: str) -> None:
    """Refuse budgets no noise can meet: calibrate the strictest client of ``scenario``.

    The smallest ε_total and δ_total the budget distributions can draw are calibrated for
    ``releases`` releases like ``template`` under accountant ``name``; a target that no noise
    multiplier reaches (or a non-finite one) is a validation error naming
    ``population.budget.epsilon``, raised before anything runs.
    """
    budget = scenario.population.budget
    epsilon = float(budget.epsilon.support()[0])
    delta = float(budget.delta.support()[0])
    try:
        make_accountant(name, key=f"{key}.accountant").calibrate(
            epsilon=epsilon,
            delta=delta,
            releases=releases,
            template=replace(template, delta=delta / releases),
        )
    except ScenarioError as err:
        raise ScenarioError(
            "population.budget.epsilon",
            epsilon,
            f"{key} cannot calibrate noise for it under accountant {name!r} over {releases} "
            f"releases at delta {delta:g}: {err.allowed}",
        ) from None


def within(epsilon: np.ndarray, total: np.ndarray) -> np.ndarray:
    """``epsilon <= total`` up to ``EXCEED_RTOL`` (float round-off of sums of shares)."""
    return np.asarray(epsilon) <= np.asarray(total) * (1.0 + EXCEED_RTOL) + 1e-15
