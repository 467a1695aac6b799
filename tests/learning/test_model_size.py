"""Model sizes stated without torch agree with the modules the plug-ins build."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedgame import registry
from fedgame.errors import ScenarioError
from fedgame.learning.model_size import ModelSize, SizedModel, dense_stack
from fedgame.learning.models import init_parameters


def _measured(kind: str, config: dict, shape: tuple[int, ...], classes: int) -> ModelSize:
    """Oracle: parameters of the built module, leaf-layer output sizes from forward hooks."""
    module = registry.create("model", kind, config).build(input_shape=shape, num_classes=classes)
    params = init_parameters(module, generator=torch.Generator().manual_seed(0))
    real = module.to_empty(device="cpu")
    real.load_state_dict(params)
    widths: list[int] = []
    leaves = [m for m in real.modules() if not list(m.children())]
    hooks = [
        m.register_forward_hook(lambda _m, _i, out: widths.append(out[0].numel())) for m in leaves
    ]
    with torch.no_grad():
        real(torch.zeros(1, *shape))
    for hook in hooks:
        hook.remove()
    return ModelSize.of_layers(num_params=sum(p.numel() for p in params.values()), widths=widths)


CASES = [
    ("logreg", {}, (1, 8, 8)),
    ("logreg", {}, (40,)),
    ("logreg", {"bias": False}, (1, 8, 8)),
    ("logreg", {"bias": False}, (40,)),
    ("mlp", {}, (1, 28, 28)),
    ("mlp", {"hidden": [32, 7, 5]}, (40,)),
    ("cnn", {}, (1, 28, 28)),
    ("cnn", {}, (64,)),
    ("cnn", {"channels": [3, 5], "kernel_size": 3}, (3, 9, 9)),
    ("cnn", {"channels": [2, 4], "kernel_size": 1}, (7, 7)),
    ("lenet5", {}, (1, 28, 28)),
    ("lenet5", {"activation": "tanh"}, (3, 32, 32)),
    ("lenet5", {}, (144,)),
]


@pytest.mark.parametrize(("kind", "config", "shape"), CASES)
def test_stated_size_equals_the_built_module(kind: str, config: dict, shape: tuple[int, ...]):
    plugin = registry.create("model", kind, config)
    assert isinstance(plugin, SizedModel)
    stated = plugin.size(input_shape=shape, num_classes=10)
    assert stated == _measured(kind, config, shape, 10)


@settings(max_examples=25, deadline=None)
@given(
    side=st.integers(4, 17),
    channels=st.integers(1, 3),
    kernel=st.sampled_from([1, 3, 5]),
    classes=st.integers(2, 12),
)
def test_cnn_size_for_any_square_image(side: int, channels: int, kernel: int, classes: int):
    config = {"channels": [2, 3], "kernel_size": kernel}
    shape = (channels, side, side)
    stated = registry.create("model", "cnn", config).size(input_shape=shape, num_classes=classes)
    assert stated == _measured("cnn", config, shape, classes)


@pytest.mark.parametrize(
    ("config", "shape"), [({}, (1, 8, 9)), ({}, (1, 3, 3)), ({"kernel_size": 4}, (1, 8, 8))]
)
def test_size_refuses_what_build_refuses(config: dict, shape: tuple[int, ...]):
    plugin = registry.create("model", "cnn", config)
    with pytest.raises(ScenarioError) as built:
        plugin.build(input_shape=shape, num_classes=10)
    with pytest.raises(ScenarioError) as sized:
        plugin.size(input_shape=shape, num_classes=10)
    assert str(sized.value) == str(built.value)


def test_dense_stack_counts_weights_and_biases():
    # 4 -> 3 -> 2: (4 + 1) 3 + (3 + 1) 2 = 23 parameters; flatten 4, linear 3, relu 3, linear 2
    assert dense_stack([4, 3, 2]) == (23, [4, 3, 3, 2])


def test_lenet5_has_the_papers_61706_parameters():
    """Paper 000's Fashion-MNIST LeNet-5 (note 000 §6.2): 156 + 2,416 + 48,120 + 10,164 + 850."""
    stated = registry.create("model", "lenet5", {}).size(input_shape=(1, 28, 28), num_classes=10)
    assert stated.num_params == 61_706


@pytest.mark.parametrize("shape", [(1, 8, 8), (1, 11, 11), (1, 12, 13), (40,)])
def test_lenet5_refuses_images_too_small_or_not_square(shape: tuple[int, ...]):
    plugin = registry.create("model", "lenet5", {})
    with pytest.raises(ScenarioError, match=r"lenet5.*side S >= 12") as built:
        plugin.build(input_shape=shape, num_classes=10)
    with pytest.raises(ScenarioError) as sized:
        plugin.size(input_shape=shape, num_classes=10)
    assert str(sized.value) == str(built.value)
