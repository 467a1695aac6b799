"""The ``servers:`` and ``market:`` keys of a scenario, and each server's own scenario.

A server entry names the keys of a one-server scenario it sets for itself (``data``,
``model``, ``training``, ``incentive``, ``selection``, ``aggregation``, ``privacy``); the others
(population, rounds, network, game, ...) are the market's and shared. A server's scenario is
the market scenario with its keys put in place, validated exactly as a one-server scenario
(so every plug-in check applies); an error names ``servers.<i>.<key>``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt

#: the keys a server entry may set for itself (besides its name)
SERVER_KEYS = ("data", "model", "training", "incentive", "selection", "aggregation", "privacy")


class ServerSpec(BaseModel):
    """One competing server: its name and the one-server keys it sets for itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    name: str = Field(
        pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,39}$",
        description="the server's name (the rounds table's server column)",
    )
    data: dict[str, Any] | None = Field(
        default=None, description="its task's data: {dataset, partition} (default: the scenario's)"
    )
    model: Any = Field(default=None, description="its global model (default: the scenario's model)")
    training: dict[str, Any] | None = Field(
        default=None, description="its local training settings (default: the scenario's)"
    )
    incentive: Any = Field(
        default=None, description="its reward offer, a contest incentive (default: the scenario's)"
    )
    selection: Any = Field(default=None, description="how it selects (default: the scenario's)")
    aggregation: Any = Field(
        default=None, description="how it aggregates (default: the scenario's)"
    )
    privacy: Any = Field(
        default=None, description="its privacy mechanism (same accountant for all servers)"
    )


class MarketRules(BaseModel):
    """How the leaders compete (used only with ``servers:``).

    ``competition``: ``independent`` (each leader offers what its incentive would offer as a
    monopolist) or ``best_response`` (iterated best response among the leaders, each
    minimising its server cost against the others' rewards with the followers' joint
    equilibrium inside).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
    competition: Literal["independent", "best_response"] = Field(
        default="best_response",
        description="independent (monopolist offers) or best_response (leaders' iterated "
        "best response within each round)",
    )
    leader_iterations: PositiveInt = Field(
        default=20,
        le=1000,
        description="most rounds of leaders' best responses per federated round",
    )
    leader_tol: PositiveFloat = Field(
        default=1e-4,
        description="relative reward change under which the leaders' play has converged",
    )
    follower_iterations: PositiveInt = Field(
        default=200, le=100000, description="most sweeps of the clients' joint best response"
    )
    follower_tol: PositiveFloat = Field(
        default=1e-10, description="budget change under which the clients' joint play has converged"
    )
    batched_evaluation: bool = Field(
        default=False,
        description="evaluate the global models of servers with one architecture and data in "
        "one batched pass (equal to separate evaluations up to float rounding, so not bit for "
        "bit: off by default)",
    )


def server_tree(base: dict[str, Any], spec: ServerSpec) -> dict[str, Any]:
    """The one-server scenario tree of ``spec``: the market's tree with the server's keys in
    place and no ``servers``/``market``. ``data``, and a component given without ``kind``
    (``incentive: {gamma: 0.3}``), are merged key by key into the market's; the others
    replace it."""
    tree = {k: v for k, v in base.items() if k not in ("servers", "market", "sweep")}
    tree["name"] = f"{base.get('name', 'scenario')}.{spec.name}"[:100]
    for key in SERVER_KEYS:
        value = getattr(spec, key)
        if value is None:
            continue
        base_value = tree.get(key)
        if key == "data" or (
            isinstance(value, dict) and "kind" not in value and isinstance(base_value, dict)
        ):  # data key by key; a component without kind: the market's with these params
            tree[key] = {**dict(base_value or {}), **value}
        else:
            tree[key] = value
    return tree


def server_scenarios(scenario: Any) -> tuple[Any, ...]:
    """Each server's validated one-server ``Scenario``, in ``servers`` order.

    Raises:
        ScenarioError: a bad entry, named ``servers.<i>.<key>`` (a repeated name, a key its
            one-server scenario rejects, an incentive that offers no contest, or a privacy
            mechanism whose accountant differs from the first server's).
    """
    import fedgame.registry as registry
    from fedgame.errors import ScenarioError
    from fedgame.scenario.load import validate, validated_tree

    base = validated_tree(scenario, mode="json")
    seen: set[str] = set()
    out = []
    accountant: str | None = None
    for i, spec in enumerate(scenario.servers):
        key = f"servers.{i}"
        if spec.name in seen:
            raise ScenarioError(f"{key}.name", spec.name, "a name no other server has")
        seen.add(spec.name)
        try:
            one = validate(server_tree(base, spec))
        except ScenarioError as err:
            raise ScenarioError(f"{key}.{err.key}", err.value, err.allowed) from None
        kind = one.incentive.kind
        if not getattr(registry.entry("incentive", kind).cls, "offers_contest", False):
            contests = sorted(
                n
                for n in registry.names("incentive")
                if getattr(registry.entry("incentive", n).cls, "offers_contest", False)
            )
            raise ScenarioError(
                f"{key}.incentive",
                kind,
                f"a contest incentive (one of {', '.join(contests)}): clients split their "
                "budget among the servers' contests",
            )
        acc = _accountant_name(one)
        if accountant is None:
            accountant = acc
        elif acc != accountant:
            raise ScenarioError(
                f"{key}.privacy",
                f"{one.privacy.kind} (accountant {acc})",
                f"a mechanism with the first server's accountant ({accountant}): each client "
                "has one ledger",
            )
        out.append(one)
    return tuple(out)


def _accountant_name(scenario: Any) -> str:
    """The accountant plug-in class that would price the server's releases."""
    import fedgame.registry as registry

    privacy = registry.create("privacy", scenario.privacy.kind, scenario.config("privacy"))
    return type(privacy.accountant).__name__
