"""Layers the model plug-ins of :mod:`fedgame.learning.models` build beside torch's own."""

from __future__ import annotations

from torch import Tensor, nn


class Unflatten(nn.Module):
    """Reshape flat ``[B, C*S*S]`` inputs to images ``[B, C, S, S]`` (no-op on images)."""

    def __init__(self, shape: tuple[int, int, int]) -> None:
        super().__init__()
        self.shape = shape

    def forward(self, x: Tensor) -> Tensor:
        return x.reshape(x.shape[0], *self.shape)
