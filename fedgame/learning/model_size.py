"""Size of a model skeleton worked out from its architecture alone, without torch.

``fedgame validate`` estimates a run's memory before anything is built (see
:mod:`fedgame.scenario.footprint`); a model plug-in that declares :class:`SizedModel` states its
parameter count and per-sample activation sizes from its configuration and the data's sample
shape, with the same shape checks its ``build`` makes, so the check costs no torch import.
Layer by layer the sizes are those of the module ``build`` returns (``tests/learning`` compares
them with a real module's parameters and forward-hook output sizes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class ModelSize:
    """Parameter count and per-sample activation sizes of a model skeleton."""

    num_params: int
    activations: int  # sum over leaf layers of one sample's output elements
    widest: int  # largest single leaf-layer output for one sample

    @classmethod
    def of_layers(cls, *, num_params: int, widths: Sequence[int]) -> ModelSize:
        """From the parameter count and each leaf layer's per-sample output size, in order."""
        return cls(int(num_params), int(sum(widths)), int(max(widths, default=1)))


@runtime_checkable
class BuildsModel(Protocol):
    """A model plug-in: ``build`` returns the torch module skeleton (on ``meta``) for the data.

    The learner calls it to make the model; the memory estimate checks it (with
    :class:`SizedModel` first) and sizes a plug-in without either as unknown.
    """

    def build(self, *, input_shape: tuple[int, ...], num_classes: int) -> Any: ...


@runtime_checkable
class SizedModel(Protocol):
    """Optional capability of a model plug-in: its :class:`ModelSize` without building it.

    ``size`` raises the same ``ScenarioError`` as ``build`` for a sample shape the model does
    not fit.
    """

    def size(self, *, input_shape: tuple[int, ...], num_classes: int) -> ModelSize: ...


def dense_stack(widths: Sequence[int]) -> tuple[int, list[int]]:
    """Flatten, then linear layers ``widths[0] -> widths[1] -> ...``, ReLU between them.

    Returns ``(parameters, leaf-layer output widths)``: a linear layer ``a -> b`` holds
    ``(a + 1) b`` parameters; the flatten layer outputs ``widths[0]`` values, each hidden linear
    layer and its ReLU ``b`` each, the last linear layer ``widths[-1]``.
    """
    params = sum((a + 1) * b for a, b in pairwise(widths))
    outputs = [widths[0]]
    for b in widths[1:-1]:
        outputs += [b, b]
    return params, [*outputs, widths[-1]]
