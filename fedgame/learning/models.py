"""Model plug-ins (family ``"model"``) and parameter initialisation without global RNG.

A model plug-in builds a stateless ``nn.Module`` skeleton on the ``meta`` device: it holds the
architecture only. Parameters live outside it, as plain tensors drawn by
:func:`init_parameters` from a ``torch.Generator``, and are plugged in with
``torch.func.functional_call``. Every module here is ``vmap``-compatible (no BatchNorm, no
in-place ops on inputs), so the batched learner can train many clients at once.

Every built-in model also states its size without torch (:class:`SizedModel`), so a scenario is
checked (``fedgame validate``) without importing torch; torch is imported where a module is
built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt

from fedgame.errors import ScenarioError
from fedgame.learning.model_size import ModelSize, dense_stack
from fedgame.registry import register

if TYPE_CHECKING:
    import torch
    from torch import Tensor, nn


def _meta() -> torch.device:
    import torch

    return torch.device("meta")


@register("model", "logreg")
class LogReg:
    """Multinomial logistic regression: flatten the input, one linear layer to the logits
    (``W x + b``, or ``W x`` with ``bias: false``, the bias-free linear model of paper 002)."""

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        bias: bool = Field(
            default=True, description="add a bias per class (false: logits W x, d*C parameters)"
        )

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()

    def build(self, *, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        """The module skeleton (on ``meta``) for inputs of ``input_shape``."""
        from torch import nn

        d = math.prod(input_shape)
        linear = nn.Linear(d, num_classes, bias=self.config.bias, device=_meta())
        return nn.Sequential(nn.Flatten(), linear)

    def size(self, *, input_shape: tuple[int, ...], num_classes: int) -> ModelSize:
        """Sizes of :meth:`build`'s module: ``(d + 1) C`` parameters for ``d`` input values,
        ``d C`` without the bias."""
        d = math.prod(input_shape)
        params, widths = dense_stack([d, num_classes])
        if not self.config.bias:
            params -= num_classes
        return ModelSize.of_layers(num_params=params, widths=widths)


@register("model", "mlp")
class MLP:
    """Multi-layer perceptron with ReLU activations between the ``hidden`` layers."""

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        hidden: list[PositiveInt] = Field(
            default_factory=lambda: [64], description="width of each hidden ReLU layer, in order"
        )

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()

    def build(self, *, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        """The module skeleton (on ``meta``) for inputs of ``input_shape``."""
        from torch import nn

        layers: list[nn.Module] = [nn.Flatten()]
        width = math.prod(input_shape)
        for h in self.config.hidden:
            layers += [nn.Linear(width, h, device=_meta()), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, num_classes, device=_meta()))
        return nn.Sequential(*layers)

    def size(self, *, input_shape: tuple[int, ...], num_classes: int) -> ModelSize:
        """Sizes of :meth:`build`'s module (a dense stack through the ``hidden`` widths)."""
        widths = [math.prod(input_shape), *self.config.hidden, num_classes]
        params, outputs = dense_stack(widths)
        return ModelSize.of_layers(num_params=params, widths=outputs)


@register("model", "cnn")
class CNN:
    """Small CNN: two ``same``-padded conv-ReLU-maxpool(2) blocks, then a linear layer.

    Inputs are square images ``(C, S, S)``, ``(S, S)`` or flat ``(S*S,)`` with ``S >= 4``
    (so 1x28x28 MNIST-like data and 1x8x8 digits both fit).
    """

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        channels: tuple[PositiveInt, PositiveInt] = Field(
            default=(8, 16), description="output channels of the two convolutions, each >= 1"
        )
        kernel_size: PositiveInt = Field(default=5, description="convolution kernel width, >= 1")

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()

    def build(self, *, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        """The module skeleton (on ``meta``) for square images of ``input_shape``."""
        from torch import nn

        from fedgame.learning.layers import Unflatten

        c, s, k, side = self._geometry(input_shape)
        c1, c2 = self.config.channels
        m = _meta()
        return nn.Sequential(
            Unflatten((c, s, s)),
            nn.Conv2d(c, c1, k, padding=k // 2, device=m),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, k, padding=k // 2, device=m),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(c2 * side * side, num_classes, device=m),
        )

    def size(self, *, input_shape: tuple[int, ...], num_classes: int) -> ModelSize:
        """Sizes of :meth:`build`'s module: a ``k x k`` convolution ``a -> b`` channels holds
        ``(a k^2 + 1) b`` parameters and outputs ``b`` maps of the current side; each 2x2
        max-pool halves the side (rounding down)."""
        c, s, k, side = self._geometry(input_shape)
        c1, c2 = self.config.channels
        half = s // 2
        params = (c * k * k + 1) * c1 + (c1 * k * k + 1) * c2 + (c2 * side * side + 1) * num_classes
        widths = [c * s * s, c1 * s * s, c1 * s * s, c1 * half * half]
        widths += [c2 * half * half, c2 * half * half, c2 * side * side, c2 * side * side]
        return ModelSize.of_layers(num_params=params, widths=[*widths, num_classes])

    def _geometry(self, input_shape: tuple[int, ...]) -> tuple[int, int, int, int]:
        """``(channels, side, kernel, side after both pools)``; ``ScenarioError`` when the
        input is not a square image or the kernel is even (checked by ``build`` and ``size``)."""
        c, s = _image_shape(tuple(input_shape))
        k = self.config.kernel_size
        if k % 2 == 0:
            raise ScenarioError("kernel_size", k, "an odd kernel size (same padding)")
        return c, s, k, s // 2 // 2


@register("model", "lenet5")
class LeNet5:
    """LeNet-5 as paper 000 runs it on Fashion-MNIST (note 000 §6.2, 61,706 parameters on
    1x28x28 and 10 classes): conv 5x5 to 6 channels (padding 2), max-pool 2, conv 5x5 to 16
    channels (no padding), max-pool 2, then dense 120 and 84, each convolution and dense
    layer but the last followed by the activation (ReLU, or LeCun's tanh).

    Inputs are square images ``(C, S, S)``, ``(S, S)`` or flat ``(S*S,)`` with ``S >= 12``
    (the second convolution needs a 5 x 5 window after the first pool).
    """

    class Config(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        activation: Literal["relu", "tanh"] = Field(
            default="relu", description="activation after each hidden layer: relu or tanh"
        )

    #: channels of the two convolutions and widths of the two hidden dense layers
    CHANNELS, DENSE = (6, 16), (120, 84)

    def __init__(self, config: Config | None = None) -> None:
        self.config = config or self.Config()

    def build(self, *, input_shape: tuple[int, ...], num_classes: int) -> nn.Module:
        """The module skeleton (on ``meta``) for square images of ``input_shape``."""
        from torch import nn

        from fedgame.learning.layers import Unflatten

        c, s, side = self._geometry(input_shape)
        (c1, c2), (d1, d2) = self.CHANNELS, self.DENSE
        m = _meta()
        act = nn.ReLU if self.config.activation == "relu" else nn.Tanh
        return nn.Sequential(
            Unflatten((c, s, s)),
            nn.Conv2d(c, c1, 5, padding=2, device=m),
            act(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, 5, device=m),
            act(),
            nn.MaxPool2d(2),
            nn.Flatten(),
            nn.Linear(c2 * side * side, d1, device=m),
            act(),
            nn.Linear(d1, d2, device=m),
            act(),
            nn.Linear(d2, num_classes, device=m),
        )

    def size(self, *, input_shape: tuple[int, ...], num_classes: int) -> ModelSize:
        """Sizes of :meth:`build`'s module: ``(a k^2 + 1) b`` parameters per ``k x k``
        convolution ``a -> b``, then a dense stack ``16 q^2 -> 120 -> 84 -> C`` where ``q`` is
        the side after the second pool (5 on 28 x 28: 156 + 2,416 + 48,120 + 10,164 + 850)."""
        c, s, side = self._geometry(input_shape)
        (c1, c2), (d1, d2) = self.CHANNELS, self.DENSE
        half, inner = s // 2, s // 2 - 4
        dense, dense_widths = dense_stack([c2 * side * side, d1, d2, num_classes])
        params = (c * 25 + 1) * c1 + (c1 * 25 + 1) * c2 + dense
        widths = [c * s * s, c1 * s * s, c1 * s * s, c1 * half * half]
        widths += [c2 * inner * inner, c2 * inner * inner, c2 * side * side]
        return ModelSize.of_layers(num_params=params, widths=[*widths, *dense_widths])

    def _geometry(self, input_shape: tuple[int, ...]) -> tuple[int, int, int]:
        """``(channels, side, side after the second pool)``; ``ScenarioError`` when the input
        is not a square image of side >= 12."""
        c, s = _image_shape(tuple(input_shape), kind="lenet5", min_side=12)
        return c, s, (s // 2 - 4) // 2


def _image_shape(
    shape: tuple[int, ...], *, kind: str = "cnn", min_side: int = 4
) -> tuple[int, int]:
    """``(channels, side)`` of a square image shape, or ``ScenarioError`` naming ``kind``."""
    allowed = f"square images (C, S, S), (S, S) or (S*S,) with side S >= {min_side}"
    if len(shape) == 1:
        side = math.isqrt(shape[0])
        c, h, w = 1, side, (side if side * side == shape[0] else -1)
    elif len(shape) == 2:
        c, (h, w) = 1, shape
    elif len(shape) == 3:
        c, h, w = shape
    else:
        raise ScenarioError("kind", kind, f"input shape {shape} unsupported; {allowed}")
    if h != w or h < min_side or c < 1:
        raise ScenarioError("kind", kind, f"input shape {shape} unsupported; {allowed}")
    return c, h


def init_parameters(
    module: nn.Module, *, generator: torch.Generator, dtype: torch.dtype | None = None
) -> dict[str, Tensor]:
    """Fresh parameters for ``module`` drawn from ``generator`` (on its device).

    Uses PyTorch's default scheme for Linear and Conv layers: kaiming-uniform with
    ``a=sqrt(5)`` for weights and ``U(±1/sqrt(fan_in))`` for biases, which both reduce to
    ``U(±1/sqrt(fan_in))`` with ``fan_in`` = inputs per output unit of the owning layer.
    ``dtype`` defaults to ``torch.float32``.
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    out: dict[str, Tensor] = {}
    device = generator.device
    for prefix, sub in module.named_modules():
        weight = getattr(sub, "weight", None)
        if not isinstance(weight, torch.Tensor) or weight.ndim < 2:
            if any(True for _ in sub.parameters(recurse=False)):
                raise ValueError(f"cannot initialise parameters of {type(sub).__name__}")
            continue
        bound = 1.0 / math.sqrt(weight[0].numel())
        for name, p in sub.named_parameters(recurse=False):
            u = torch.rand(p.shape, generator=generator, device=device, dtype=dtype)
            out[f"{prefix}.{name}" if prefix else name] = (2.0 * u - 1.0) * bound
    expected = [n for n, _ in module.named_parameters()]
    return {n: out[n] for n in expected}


@dataclass(frozen=True)
class ParamLayout:
    """Where each named parameter sits in a flat parameter vector (dict order)."""

    names: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    offsets: tuple[int, ...]
    numel: int

    @classmethod
    def of(cls, params: Mapping[str, Tensor]) -> ParamLayout:
        """Layout of ``params`` in their insertion order."""
        shapes = tuple(tuple(p.shape) for p in params.values())
        sizes = [math.prod(s) for s in shapes]
        offsets = tuple(sum(sizes[:i]) for i in range(len(sizes)))
        return cls(tuple(params), shapes, offsets, sum(sizes))

    def flatten(self, params: Mapping[str, Tensor]) -> Tensor:
        """Concatenate ``params`` into one flat vector ``[P]``."""
        import torch

        return torch.cat([params[n].reshape(-1) for n in self.names])

    def unflatten(self, flat: Tensor) -> dict[str, Tensor]:
        """Views of ``flat`` (``[..., P]``) as named tensors ``[..., *shape]``."""
        lead = flat.shape[:-1]
        return {
            n: flat[..., o : o + math.prod(s)].reshape(*lead, *s)
            for n, s, o in zip(self.names, self.shapes, self.offsets)
        }
