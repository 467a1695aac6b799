"""Model plug-ins, parameter initialisation and the flat parameter layout."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError
from torch.func import functional_call

from fedgame.errors import ScenarioError
from fedgame.learning.models import CNN, MLP, LogReg, ParamLayout, init_parameters
from fedgame.registry import create

SHAPES = [(1, 28, 28), (1, 8, 8), (64,), (3, 8, 8)]


def _gen(seed: int) -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen


@pytest.mark.parametrize("kind", ["logreg", "mlp", "cnn"])
@pytest.mark.parametrize("shape", SHAPES)
def test_registered_models_map_inputs_to_logits(kind: str, shape: tuple[int, ...]) -> None:
    module = create("model", kind).build(input_shape=shape, num_classes=7)
    params = init_parameters(module, generator=_gen(0))
    logits = functional_call(module, params, (torch.randn(5, *shape),))
    assert logits.shape == (5, 7)
    assert all(p.device.type == "meta" for p in module.parameters())


def test_logreg_is_one_linear_layer() -> None:
    module = LogReg().build(input_shape=(40,), num_classes=10)
    params = init_parameters(module, generator=_gen(0))
    assert sum(p.numel() for p in params.values()) == 40 * 10 + 10


def test_logreg_without_bias_has_d_times_c_parameters() -> None:
    plugin = create("model", "logreg", {"bias": False})
    module = plugin.build(input_shape=(1, 8, 8), num_classes=10)
    params = init_parameters(module, generator=_gen(0))
    assert [tuple(p.shape) for p in params.values()] == [(10, 64)]
    assert plugin.size(input_shape=(1, 8, 8), num_classes=10).num_params == 64 * 10
    logits = functional_call(module, params, (torch.zeros(3, 1, 8, 8),))
    assert torch.equal(logits, torch.zeros(3, 10))  # W·0 = 0: no bias anywhere


def test_scenario_accepts_a_bias_free_logreg() -> None:
    from fedgame.scenario.load import validate

    scenario = validate({"model": {"kind": "logreg", "bias": False}})
    assert scenario.config("model").bias is False
    assert validate({"model": {"kind": "logreg"}}).config("model").bias is True
    with pytest.raises(ScenarioError, match="bias"):
        validate({"model": {"kind": "logreg", "bias": "sometimes"}})


def test_mlp_hidden_layers_follow_config() -> None:
    mlp = create("model", "mlp", {"hidden": [5, 3]})
    params = init_parameters(mlp.build(input_shape=(4,), num_classes=2), generator=_gen(0))
    assert [tuple(p.shape) for p in params.values()] == [(5, 4), (5,), (3, 5), (3,), (2, 3), (2,)]


def test_mlp_config_rejects_unknown_and_bad_values() -> None:
    with pytest.raises(ValidationError):
        MLP.Config(hidden=[64], width=3)
    with pytest.raises(ValidationError):
        MLP.Config(hidden=[0])


@pytest.mark.parametrize("shape", [(1, 8, 6), (1, 3, 3), (2, 3, 4, 5), (63,)])
def test_cnn_rejects_unsupported_shapes(shape: tuple[int, ...]) -> None:
    with pytest.raises(ScenarioError, match="square images"):
        CNN().build(input_shape=shape, num_classes=10)


def test_cnn_flat_size_is_computed_from_the_input() -> None:
    module = CNN().build(input_shape=(1, 28, 28), num_classes=10)
    params = init_parameters(module, generator=_gen(0))
    linear = [p for n, p in params.items() if p.ndim == 2]
    assert linear[0].shape == (10, 16 * 7 * 7)


def test_init_is_deterministic_from_the_generator() -> None:
    module = MLP().build(input_shape=(1, 8, 8), num_classes=10)
    a = init_parameters(module, generator=_gen(3))
    b = init_parameters(module, generator=_gen(3))
    c = init_parameters(module, generator=_gen(4))
    assert all(torch.equal(a[n], b[n]) for n in a)
    assert not torch.equal(a["1.weight"], c["1.weight"])


def test_init_uses_uniform_fan_in_bounds() -> None:
    module = CNN().build(input_shape=(1, 8, 8), num_classes=10)
    params = init_parameters(module, generator=_gen(0))
    fan_in = {"1": 1 * 25, "4": 8 * 25, "8": 16 * 2 * 2}
    for name, p in params.items():
        bound = 1.0 / math.sqrt(fan_in[name.split(".")[0]])
        assert p.abs().max() <= bound
        if p.numel() >= 100:  # spread over most of the interval
            assert p.abs().max() > 0.8 * bound


def test_init_float64() -> None:
    module = LogReg().build(input_shape=(3,), num_classes=2)
    params = init_parameters(module, generator=_gen(0), dtype=torch.float64)
    assert all(p.dtype == torch.float64 for p in params.values())


def test_layout_round_trip() -> None:
    params = {"a": torch.arange(6.0).reshape(2, 3), "b": torch.tensor([7.0, 8.0])}
    layout = ParamLayout.of(params)
    flat = layout.flatten(params)
    assert flat.tolist() == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 7.0, 8.0]
    stacked = layout.unflatten(torch.stack([flat, 2 * flat]))
    assert stacked["a"].shape == (2, 2, 3)
    assert torch.equal(stacked["b"][1], torch.tensor([14.0, 16.0]))
