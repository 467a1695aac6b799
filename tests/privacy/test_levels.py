"""The noise follows the privacy level the game settled on, or the scenario is refused.

Over the whole registry: every privacy mechanism × every policy either couples (the mechanism
declares it follows the level the policy chooses) or is refused at validation with one line
naming both keys; for every coupling mechanism and every accountant that can describe its
release, two clients that chose different ρ get the noise and the ε charge their ρ implies.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
from helpers_dp import scenario
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame import registry
from fedgame.errors import ScenarioError
from fedgame.model import FedGameModel
from fedgame.privacy.base import Charge, Charges
from fedgame.privacy.calibrate import analytic_gaussian_epsilon
from fedgame.privacy.levels import rho_laplace_epsilon, rho_noise_multipliers
from fedgame.run.single import simulate
from fedgame.scenario.load import validate
from fedgame.views import Responses, RoundInfo

PAIRS = [(p, q) for p in registry.names("privacy") for q in registry.names("policy")]


def _spec(family: str, name: str) -> dict:
    return {"kind": name, **copy.deepcopy(dict(registry.example(family, name).config))}


def _game(base: dict, privacy: str, policy: str, **privacy_keys) -> dict:
    needs = copy.deepcopy(dict(registry.example("privacy", privacy).needs))
    data = scenario(base, **needs)
    data.update(
        rounds=2,
        incentive={"kind": "qi_dpfl"},
        selection={"kind": "all"},
        privacy={**_spec("privacy", privacy), **privacy_keys},
        policy=_spec("policy", policy),
    )
    data["population"].update(clients=6, straggle_prob=0.0)
    data["population"]["budget"]["epsilon"] = 200.0
    data["network"] = {**data.get("network", {}), "faults": {"kind": "none"}}
    return data


def _follows(privacy: str, policy: str) -> bool:
    chooses = registry.entry("policy", policy).cls.chooses
    return chooses == "default" or chooses in registry.entry("privacy", privacy).cls.follows


def test_every_policy_declares_a_level_and_every_mechanism_what_it_follows():
    for name in registry.names("policy"):
        assert registry.entry("policy", name).cls.chooses in ("default", "epsilon", "rho"), name
    for name in registry.names("privacy"):
        follows = registry.entry("privacy", name).cls.follows
        assert isinstance(follows, frozenset) and follows <= {"epsilon", "rho"}, name
    # the game's followers choose ρ, and some mechanism follows it
    assert any(registry.entry("policy", n).cls.chooses == "rho" for n in registry.names("policy"))


@pytest.mark.parametrize(("privacy", "policy"), PAIRS, ids=[f"{p}-{q}" for p, q in PAIRS])
def test_each_pair_couples_or_is_refused_naming_both_keys(tiny, privacy, policy):
    data = _game(tiny, privacy, policy)
    if _follows(privacy, policy):
        validate(data)
        return
    with pytest.raises(ScenarioError) as err:
        validate(data)
    message = str(err.value)
    assert err.value.key == "privacy.kind" and "\n" not in message
    assert f"policy.kind '{policy}'" in message
    followers = [n for n in registry.names("privacy") if _follows(n, policy)]
    assert f"follow {registry.entry('policy', policy).cls.chooses}: {', '.join(followers)}" in (
        message
    )


def test_a_mixed_population_names_the_behaviour_that_does_not_couple(tiny):
    data = _game(tiny, "central_gaussian", "always")
    del data["policy"]
    data["population"]["behaviours"] = [
        {"kind": "always", "share": 0.5},
        {"kind": "best_response", "share": 0.5},
    ]
    with pytest.raises(ScenarioError, match=r"population\.behaviours\.1\.kind 'best_response'"):
        validate(data)


#: (mechanism, accountant) pairs: every mechanism that follows ρ, every accountant that can
#: describe its releases
FOLLOWING = [
    (p, a)
    for p in registry.names("privacy")
    if "rho" in registry.entry("privacy", p).cls.follows
    and registry.entry("privacy", p).cls.noise != "none"
    for a in registry.names("accountant")
    if registry.create("accountant", a).describes(registry.entry("privacy", p).cls.noise)
]


def _tiny() -> dict:
    from conftest import TINY

    return copy.deepcopy(TINY)


_MODELS: dict[tuple[str, str], FedGameModel] = {}


def _model(privacy: str, accountant: str) -> FedGameModel:
    """A built world of 6 best-responding clients under this mechanism and accountant."""
    key = (privacy, accountant)
    if key not in _MODELS:
        data = _game(_tiny(), privacy, "best_response", accountant=accountant)
        _MODELS[key] = FedGameModel(validate(data))
    return _MODELS[key]


def _reported_epsilon(accountant: str, charge: Charge, delta: float) -> float:
    """ε a fresh ledger of ``accountant`` reports after this one release, at ``delta``."""
    ledger = registry.create("accountant", accountant)
    ledger.start(np.array([delta]))
    return float(ledger.epsilon_if(np.array([0]), Charges.of([charge]))[0])


@pytest.mark.parametrize(("privacy", "accountant"), FOLLOWING, ids=["-".join(x) for x in FOLLOWING])
@settings(max_examples=8, deadline=None)
@given(rho=st.lists(st.floats(0.01, 20.0), min_size=2, max_size=2, unique=True))
def test_two_clients_that_chose_different_rho_get_the_noise_and_charge_it_implies(
    privacy, accountant, rho
):
    """One client answering twice, at two budgets: each release is the multiplier
    z = 1/sqrt(2ρ) (Laplace: ε = sqrt(2ρ), so z = b/Δ₁ = 1/ε too), the two noise scales are
    the same sensitivity times their z, and the accountant prices exactly that release:
    never below the exact ε of one Gaussian of multiplier z, never above what ρ-zCDP
    promises (ρ + 2 sqrt(ρ ln(1/δ)); Laplace: the pure ε = sqrt(2ρ))."""
    model = _model(privacy, accountant)
    ids = np.array([0, 0])
    views = model.table.views(ids)
    answers = Responses(ids, np.ones(2, bool), rho=np.array(rho))
    plan = model.privacy.plan(views, answers, info=RoundInfo(1, 2, 6))
    z = rho_noise_multipliers(np.array(rho))
    charges = Charges.of(plan.charges)
    np.testing.assert_allclose(charges.noise_multiplier, z, rtol=1e-12)
    assert set(charges.noise.tolist()) == {model.privacy.noise}
    np.testing.assert_allclose(plan.noise_std[0] / plan.noise_std[1], z[0] / z[1], rtol=1e-9)
    delta = float(views[0].delta)
    for r, charge in zip(rho, charges):
        reported = _reported_epsilon(accountant, charge, delta)
        promised = r + 2.0 * math.sqrt(r * math.log(1.0 / delta))  # ρ-zCDP ⇒ (·, δ)-DP
        if model.privacy.noise == "laplace":
            pure = float(rho_laplace_epsilon(np.array(r)))  # = 1/z
            exact = pure + 2.0 * math.log1p(-delta)  # Laplace: δ(ε) = 1 - e^((ε - ε0)/2)
            promised = max(promised, pure)
        else:
            exact = float(
                analytic_gaussian_epsilon(noise_multiplier=charge.noise_multiplier, delta=delta)
            )
        assert exact * (1 - 1e-6) <= reported <= promised * (1 + 1e-6)


@pytest.mark.parametrize(
    "privacy",
    sorted({p for p, _ in FOLLOWING}),
)
def test_in_a_run_each_client_is_charged_the_release_its_rho_buys(tiny, privacy):
    """QI-DPFL followers under each mechanism that follows ρ: after round 1 every client
    that uploaded has spent exactly what one release at z = 1/sqrt(2ρ_i) costs under the
    mechanism's accountant, and clients that chose different ρ got different noise."""
    result = simulate(validate(_game(tiny, privacy, "best_response")))
    first = result.clients[(result.clients["round"] == 1) & result.clients["uploaded"]]
    assert len(first) >= 2 and first["rho"].nunique() >= 2
    model_accountant = FedGameModel(validate(_game(tiny, privacy, "best_response")))
    name = model_accountant.privacy.accountant.name
    noise = model_accountant.privacy.noise
    for row in first.itertuples():
        charge = Charge(
            noise, float(rho_noise_multipliers(np.array(row.rho))), delta=row.delta_round
        )
        assert row.epsilon_spent == pytest.approx(
            _reported_epsilon(name, charge, row.delta), rel=1e-9
        )
    assert first["noise_std"].nunique() >= 2


@pytest.mark.parametrize(
    ("calibration", "refused"),
    [("analytic", False), ("classic", False), ("accountant", True), ("dpfl_bcs", True)],
)
def test_a_chosen_epsilon_is_refused_under_a_calibration_of_the_whole_run(
    tiny, scratch_registry, calibration, refused
):
    """``gaussian`` follows a chosen ε only where it calibrates one release at a time."""
    always = scratch_registry.entry("policy", "always").cls
    chooser = type("EpsilonChooser", (always,), {"chooses": "epsilon"})
    scratch_registry.register("policy", "epsilon_chooser_test")(chooser)
    data = _game(tiny, "gaussian", "epsilon_chooser_test")
    data["privacy"]["calibration"] = calibration
    data["privacy"]["allow_loose_classic"] = True
    if not refused:
        validate(data)
        return
    with pytest.raises(ScenarioError) as err:
        validate(data)
    assert err.value.key == "privacy.calibration" and err.value.value == calibration
    assert "policy.kind 'epsilon_chooser_test'" in str(err.value)
    assert "\n" not in str(err.value)
