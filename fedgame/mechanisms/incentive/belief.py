"""An incomplete-information leader: it starts from a prior on ν and learns it from the budgets.

A game incentive (``qi_dpfl``, ``max``, ``random``, ``fixed``, ``stackelberg``) given a
``belief`` does not know the clients' privacy values (ours; paper 003's leader knows them)::

    incentive:
      kind: qi_dpfl
      belief:
        kind: lognormal                              # the estimator (a registered name)
        prior: {kind: lognormal, median: 1.0, sd: 1.0}   # or {kind: discrete, values, weights}
        obs_sd: 0.1
        explore: 0.0         # learn the untried from the seen, optimism κ (active_set: optimal)

Each round it plays against its estimate ν̂ (admission, R_t) and, before the next offer,
folds in what the round's public record reveals (:mod:`fedgame.game.belief`: a budget at the
first-order condition reveals ν, a client that stayed out a lower bound, one held at its cap
an upper bound). That ν is unknown is structural: the leader decides on a :class:`MarketView`
whose client views do not have ``privacy_value`` (:func:`blind`; reading it raises). It does
not exclude a client on its guess (Theorem 1's followers leave the active set by themselves,
revealing a bound); with ``active_set: optimal`` a client it keeps out reveals nothing, so
``explore`` > 0 corrects its estimate of the clients it has never seen play by those it has
seen (empirical Bayes) and admits them a little optimistically (:class:`BeliefLeader`).

The estimator is a declared hook (:class:`~fedgame.game.belief.PrivacyValueBelief`): register
another with :func:`register_estimator` and name it in ``belief.kind``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Literal, overload

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from fedgame.game.belief import (
    ContestObservation,
    LogNormalBelief,
    PrivacyValueBelief,
    ReportsUncertainty,
)
from fedgame.views import MarketView, RoundRecord, ids_of

#: view fields a leader without knowledge of ν may not read
HIDDEN = frozenset({"privacy_value"})

PositiveFinite = Annotated[float, Field(gt=0, allow_inf_nan=False)]
Weight = Annotated[float, Field(ge=0, allow_inf_nan=False)]
#: ln of the largest value a belief's ν (or its precision) may reach: ν within e^±LOG_RANGE
LOG_RANGE = math.log(1e300)
#: range of the observation precision 1/obs_sd² (it is added up over rounds and multiplied
#: by ln ν, so it keeps room below the float range)
OBS_PRECISION_RANGE = (1e-200, 1e200)
#: prior standard deviations within which the belief's ν is kept representable
PRIOR_SPREAD_SDS = 5.0


def _in_log_range(value: float) -> bool:
    return abs(math.log(value)) <= LOG_RANGE


class LogNormalPrior(BaseModel):
    """ν ~ exp(N(log median, sd²)) for every client."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["lognormal"] = "lognormal"
    median: PositiveFinite = Field(1.0, description="prior median of nu (> 0)")
    sd: PositiveFinite = Field(1.0, description="prior standard deviation of log nu (> 0)")

    def range_problem(self) -> str | None:
        """Why exp(log median ± 5·sd), the prior's range of ν, leaves 1e±300 (None: it
        does not)."""
        reach = abs(math.log(self.median)) + PRIOR_SPREAD_SDS * self.sd
        if reach <= LOG_RANGE:
            return None
        return (
            f"a prior whose nu range exp(log median ± {PRIOR_SPREAD_SDS:g}·sd) stays within "
            f"1e-300 to 1e300: |ln median| + {PRIOR_SPREAD_SDS:g}·sd is {reach:.4g}, at most "
            f"{LOG_RANGE:.4g} (median {self.median:g}, sd {self.sd:g})"
        )

    def log_moments(self) -> tuple[float, float]:
        """(mean, variance) of log ν."""
        return math.log(self.median), self.sd**2

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        return np.exp(rng.normal(math.log(self.median), self.sd, size=n))


class DiscretePrior(BaseModel):
    """ν = values[k] with probability weights[k] for every client."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["discrete"]
    values: list[PositiveFinite] = Field(min_length=1, description="possible nu values (> 0)")
    weights: list[Weight] = Field(
        min_length=1, description="their probabilities (>= 0, one per value, sum 1)"
    )

    @field_validator("weights")
    @classmethod
    def _distribution(cls, weights: list[float], info: ValidationInfo) -> list[float]:
        values = info.data.get("values")
        if values is not None and len(weights) != len(values):
            raise ValueError(f"needs one weight per value ({len(values)}), got {len(weights)}")
        total = sum(weights)
        if not math.isclose(total, 1.0, rel_tol=1e-9, abs_tol=1e-9):
            raise ValueError(f"weights must sum to 1 (a distribution), got {total:g}")
        return weights

    def range_problem(self) -> str | None:
        """Why a value leaves 1e±300 (None: none does)."""
        bad = next((v for v in self.values if not _in_log_range(v)), None)
        return None if bad is None else f"values of nu within 1e-300 to 1e300, not {bad:g}"

    def log_moments(self) -> tuple[float, float]:
        """(mean, variance) of log ν."""
        logs, w = np.log(self.values), np.asarray(self.weights) / sum(self.weights)
        mean = float(w @ logs)
        return mean, float(w @ (logs - mean) ** 2)

    def sample(self, n: int, *, rng: np.random.Generator) -> np.ndarray:
        w = np.asarray(self.weights) / sum(self.weights)
        return rng.choice(np.asarray(self.values, dtype=float), size=n, p=w)


Prior = Annotated[LogNormalPrior | DiscretePrior, Field(discriminator="kind")]
EstimatorFactory = Callable[..., PrivacyValueBelief]
_ESTIMATORS: dict[str, EstimatorFactory] = {"lognormal": LogNormalBelief}


def register_estimator(name: str) -> Callable[[EstimatorFactory], EstimatorFactory]:
    """Class decorator: make a :class:`PrivacyValueBelief` available as ``belief.kind: name``
    (built as ``cls(prior, num_clients=N, spec=BeliefSpec)``)."""

    def decorate(cls: EstimatorFactory) -> EstimatorFactory:
        existing = _ESTIMATORS.get(name)
        if existing is not None and existing is not cls:
            raise ValueError(f"belief estimator {name!r} registered twice")
        _ESTIMATORS[name] = cls
        return cls

    return decorate


def unregister_estimator(name: str) -> None:
    """Remove a registered estimator (the built-in ``lognormal`` stays)."""
    if name != "lognormal":
        _ESTIMATORS.pop(name, None)


def estimator_names() -> list[str]:
    """Registered estimator names, sorted."""
    return sorted(_ESTIMATORS)


class BeliefSpec(BaseModel):
    """``incentive.belief``: the estimator, its prior on ν and its observation noise."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: str = Field("lognormal", description="belief estimator: a registered name")
    prior: Prior = Field(
        default_factory=lambda: LogNormalPrior(median=1.0, sd=1.0),
        description="prior on each client's nu",
    )
    obs_sd: PositiveFinite = Field(
        0.1, description="noise sd of a revealed log nu (> 0; small: followers best-respond)"
    )
    explore: float = Field(
        0.0,
        ge=0,
        allow_inf_nan=False,
        description="optimism kappa >= 0 of active_set optimal: admit by nu_hat*exp(-kappa*sd)",
    )

    @field_validator("prior", mode="before")
    @classmethod
    def _lognormal_by_default(cls, prior: Any) -> Any:
        """A prior without ``kind`` is the log-normal one (its defaults' kind)."""
        if isinstance(prior, dict) and "kind" not in prior:
            return {"kind": "lognormal", **prior}
        return prior

    @field_validator("prior")
    @classmethod
    def _representable(cls, prior: LogNormalPrior | DiscretePrior) -> Any:
        problem = prior.range_problem()
        if problem:
            raise ValueError(problem)
        return prior

    @field_validator("obs_sd")
    @classmethod
    def _precision_in_range(cls, obs_sd: float) -> float:
        """1/obs_sd², the precision each observation adds, within :data:`OBS_PRECISION_RANGE`."""
        low, high = OBS_PRECISION_RANGE
        precision = math.inf if obs_sd < 1e-150 else 1.0 / (obs_sd * obs_sd)
        if not low <= precision <= high:
            raise ValueError(
                f"an observation noise whose precision 1/obs_sd^2 lies in [{low:g}, {high:g}] "
                f"(obs_sd between {high**-0.5:g} and {low**-0.5:g}); 1/obs_sd^2 is {precision:.4g}"
            )
        return obs_sd

    @field_validator("kind")
    @classmethod
    def _known(cls, kind: str) -> str:
        if kind not in _ESTIMATORS:
            raise ValueError(f"allowed belief estimators: {', '.join(estimator_names())}")
        return kind

    @model_validator(mode="after")
    def _explores_with_uncertainty(self) -> BeliefSpec:
        cls = _ESTIMATORS.get(self.kind)
        if self.explore > 0 and isinstance(cls, type) and not issubclass(cls, ReportsUncertainty):
            raise ValueError(
                f"explore > 0 needs an estimator that reports its uncertainty (log_sd()); "
                f"{self.kind!r} does not"
            )
        return self

    @field_validator("explore")
    @classmethod
    def _optimism_in_range(cls, explore: float, info: ValidationInfo) -> float:
        prior = info.data.get("prior")
        spread = explore * math.sqrt(prior.log_moments()[1]) if prior is not None else 0.0
        if spread > LOG_RANGE:
            raise ValueError(
                f"explore * (prior sd of log nu) at most {LOG_RANGE:.4g}, so that the optimism "
                f"factor exp(-explore*sd) stays above 1e-300; it is {spread:.4g}"
            )
        return explore

    def optimism_floor(self) -> float:
        """exp(−κ·sd) at the prior, the smallest factor an exploring leader scales ν̂ by
        (the posterior sd only shrinks)."""
        return math.exp(-self.explore * math.sqrt(self.prior.log_moments()[1]))

    def build(self, num_clients: int) -> PrivacyValueBelief:
        """The estimator this spec names, at its prior."""
        belief = _ESTIMATORS[self.kind](self.prior, num_clients=num_clients, spec=self)
        if not isinstance(belief, PrivacyValueBelief):
            raise TypeError(f"belief estimator {self.kind!r} lacks estimate()/observe()")
        if self.explore > 0 and not isinstance(belief, ReportsUncertainty):
            raise TypeError(f"belief estimator {self.kind!r} lacks log_sd(), needed by explore")
        return belief


class _BlindView:
    """One client's view without the hidden fields (reading one raises AttributeError)."""

    __slots__ = ("_view",)

    def __init__(self, view: Any) -> None:
        self._view = view

    def __getattr__(self, name: str) -> Any:
        if name in HIDDEN:
            raise AttributeError(f"{name!r} is unknown to a leader with a belief")
        return getattr(self._view, name)


class BlindViews(Sequence[Any]):
    """Client views without ``privacy_value``: ``column``/``ids`` as ``ClientViews``."""

    __slots__ = ("_views",)

    def __init__(self, views: Sequence[Any]) -> None:
        self._views = views

    @property
    def ids(self) -> np.ndarray:
        return ids_of(self._views)

    def column(self, name: str) -> np.ndarray:
        if name in HIDDEN:
            raise KeyError(f"{name!r} is unknown to a leader with a belief")
        column = getattr(self._views, "column", None)
        if column is not None:
            return np.asarray(column(name))
        return np.array([getattr(v, name) for v in self._views])

    def __len__(self) -> int:
        return len(self._views)

    @overload
    def __getitem__(self, index: int) -> Any: ...

    @overload
    def __getitem__(self, index: slice) -> BlindViews: ...

    def __getitem__(self, index: Any) -> Any:
        views: Any = self._views  # ClientViews also takes masks and position arrays
        if isinstance(index, slice | np.ndarray):
            return BlindViews(views[index])
        return _BlindView(views[index])

    def __iter__(self) -> Iterator[Any]:
        return (_BlindView(v) for v in self._views)


def blind(market: MarketView) -> MarketView:
    """``market`` with client views that do not carry ν."""
    return dataclasses.replace(market, clients=BlindViews(market.clients))


class BeliefLeader:
    """The leader's belief and the contest it last offered (to read the responses against).

    With ``explore`` = κ > 0 the leader also learns about the clients it has never seen play
    from those it has *seen* (offered a contest and answered: a revealed ν or a bound). Once
    two are seen, an untried client is valued at the larger of its own estimate and the seen
    clients' geometric mean, exp(mean log ν̂_seen) (empirical Bayes, one-sided: budgets that
    show the prior too optimistic correct it for everyone; a prior too pessimistic is left to
    the optimism), for pricing R_t and for admission; it is admitted by that value discounted
    by exp(−κ·s), s the standard deviation of log ν̂ over the seen clients (optimism only on
    the untried, as large as the population's spread; none for the seen). Before two clients
    are seen every client is untried alike, and the optimal set does not depend on a common
    scale, so the estimate is used as it is. Measured in ``analysis/belief_explore.py``
    (docs/qi_dpfl.md).
    """

    def __init__(self, spec: BeliefSpec) -> None:
        self.spec = spec
        # cross-round memory, all of it: the belief about ν, the contest offered in round t
        # (read against the responses in round t+1's public record) and the clients seen play
        self.belief: PrivacyValueBelief | None = None
        self._offered: ContestObservation | None = None
        self.seen = np.zeros(0, dtype=bool)

    def start(self, num_clients: int) -> None:
        """The belief at the prior, for clients 0..num_clients−1."""
        self.belief = self.spec.build(num_clients)
        self._offered = None
        self.seen = np.zeros(num_clients, dtype=bool)

    def _estimates(self) -> np.ndarray:
        """ν̂ of every client by id; exploring, the untried at least at the seen clients'
        geometric mean (class doc)."""
        if self.belief is None:
            return np.zeros(0)
        values = np.asarray(self.belief.estimate(), dtype=float)
        if self.spec.explore > 0 and np.count_nonzero(self.seen) >= 2:
            typical = float(np.exp(np.log(values[self.seen]).mean()))
            values = np.where(self.seen, values, np.maximum(values, typical))
        return values

    def estimate(self, ids: np.ndarray) -> np.ndarray:
        """ν̂ of ``ids`` (with ``explore`` > 0, the untried corrected by the seen: class doc)."""
        if self.belief is None:
            self.start(int(ids.max()) + 1 if ids.size else 0)
        return self._estimates()[ids]

    def optimistic(self, ids: np.ndarray) -> np.ndarray:
        """The values the leader admits ``ids`` by: :meth:`estimate`, the untried discounted
        by exp(−κ·s) (class doc); κ = 0: ν̂ (greedy)."""
        values = self.estimate(ids)
        if self.spec.explore == 0 or np.count_nonzero(self.seen) < 2:
            return values
        everyone = self._estimates()
        spread = float(np.log(everyone[self.seen]).std())
        untried = ~self.seen[ids]
        return np.where(untried, values * np.exp(-self.spec.explore * spread), values)

    def offered(self, observation: ContestObservation) -> None:
        """Remember this round's contest (``rho`` unknown yet)."""
        self._offered = observation

    def learn(self, previous: RoundRecord | None) -> None:
        """Fold in the budgets the last contest's players answered (public record)."""
        offered, self._offered = self._offered, None
        if offered is None or previous is None or self.belief is None or not offered.ids.size:
            return
        rec = previous.responses
        if not len(rec):
            return
        size = int(max(rec.ids.max(initial=-1), offered.ids.max())) + 1
        position = np.full(size, -1)
        position[rec.ids] = np.arange(len(rec.ids))
        where = position[offered.ids]
        found = where >= 0
        at = np.maximum(where, 0)
        took = found & rec.participate[at]
        stayed_out = found & ~rec.participate[at] & (rec.reason[at] == "inactive")
        rho = np.where(took, rec.rho[at], math.nan)
        rho = np.where(stayed_out, 0.0, rho)
        self.belief.observe(dataclasses.replace(offered, rho=rho))
        answered = offered.ids[took | stayed_out]
        self.seen[answered[answered < self.seen.size]] = True
