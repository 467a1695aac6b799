"""MNIST-1D: procedurally generated 1-D digits (Greydanus 2020), drawn from a passed ``rng``.

Greydanus, "Scaling down deep learning" (2020), Sec. 2. Ten hand-made templates of length 12
are padded with 36-60 zeros, dilated to 72 points, scaled, translated, given correlated noise
on the background and i.i.d. noise everywhere, sheared and resampled to 40 points; the whole
dataset is then standardised to mean 0 and standard deviation 1. Defaults follow the original
generator (``mnist1d.data.get_dataset_args``); the transforms are vectorised over samples, so a
fedgame draw is not bitwise the published pickle but has the same distribution.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from fedgame.data.datasets import DataFootprint, Dataset, split_sizes, stratified_split
from fedgame.registry import register

_TEMPLATES = (
    (5, 6, 6.5, 6.75, 7, 7, 7, 7, 6.75, 6.5, 6, 5),
    (5, 3, 3, 3.4, 3.8, 4.2, 4.6, 5, 5.4, 5.8, 5, 5),
    (5, 6, 6.5, 6.5, 6, 5.25, 4.75, 4, 3.5, 3.5, 4, 5),
    (5, 6, 6.5, 6.5, 6, 5, 5, 6, 6.5, 6.5, 6, 5),
    (5, 4.4, 3.8, 3.2, 2.6, 2.6, 5, 5, 5, 5, 5, 5),
    (5, 3, 3, 3, 3, 5, 6, 6.5, 6.5, 6, 4.5, 5),
    (5, 4, 3.5, 3.25, 3, 3, 3, 3, 3.25, 3.5, 4, 5),
    (5, 7, 7, 6.6, 6.2, 5.8, 5.4, 5, 4.6, 4.2, 5, 5),
    (5, 4, 3.5, 3.5, 4, 5, 5, 4, 3.5, 3.5, 4, 5),
    (5, 4, 3.5, 3.5, 4, 5, 5, 5, 5, 4.7, 4.3, 5),
)


def templates() -> np.ndarray:
    """The ten digit templates ``[10, 12]``: whitened, shifted to start at 0, divided by 6."""
    x = np.asarray(_TEMPLATES, dtype=np.float64)
    x = (x - x.mean(1, keepdims=True)) / x.std(1, keepdims=True)
    return (x - x[:, :1]) / 6.0


def resample(x: np.ndarray, lengths: np.ndarray, size: int) -> np.ndarray:
    """Linearly resample row ``i``'s first ``lengths[i]`` values to ``size`` evenly spaced points.

    Row-wise equivalent of ``scipy.interpolate.interp1d(linspace(0, 1, L), x)(linspace(0, 1,
    size))`` as used by the original generator.
    """
    pos = np.linspace(0.0, 1.0, size)[None, :] * (lengths[:, None] - 1)
    lo = np.floor(pos).astype(np.int64)
    hi = np.minimum(lo + 1, lengths[:, None] - 1)
    frac = pos - lo
    left = np.take_along_axis(x, lo, axis=1)
    right = np.take_along_axis(x, hi, axis=1)
    return left * (1.0 - frac) + right * frac


@register("dataset", "mnist1d")
class Mnist1D:
    """MNIST-1D (Greydanus 2020): 10 classes of length-40 signals, generated without download.

    Classes are balanced (``num_samples // 10`` each); the train/test split is stratified.
    Features are standardised over the whole dataset; samples have shape ``(40,)`` by default.
    """

    class Config(BaseModel):
        """Parameters of ``mnist1d`` (defaults from the original generator)."""

        model_config = ConfigDict(extra="forbid", frozen=True)
        num_samples: int = Field(
            10000, ge=10, description="sequences generated (train + test), >= 10"
        )
        test_fraction: float = Field(
            0.2, gt=0.0, lt=1.0, description="share of the sequences held out for testing, (0, 1)"
        )
        padding: tuple[int, int] = Field(
            (36, 60), description="[low, high] range of the padded length before resampling, points"
        )
        scale_coeff: float = Field(
            0.4, ge=0.0, lt=2.0, description="amplitude scaling spread: x (1 + c (U - 1/2)), [0, 2)"
        )
        max_translation: int = Field(
            48, ge=1, description="largest circular shift of a sequence, points, >= 1"
        )
        corr_noise_scale: float = Field(
            0.25, ge=0.0, description="std of the smoothed (correlated) background noise, >= 0"
        )
        iid_noise_scale: float = Field(
            2e-2, ge=0.0, description="std of the i.i.d. noise added everywhere, >= 0"
        )
        shear_scale: float = Field(
            0.75,
            ge=0.0,
            description="shear spread: slope c (U - 1/2) added along the sequence, >= 0",
        )
        final_seq_length: int = Field(
            40, ge=2, description="points per sequence after resampling (the features), >= 2"
        )

        @field_validator("padding")
        @classmethod
        def _check_padding(cls, value: tuple[int, int]) -> tuple[int, int]:
            low, high = value
            if not 0 <= low <= high:
                raise ValueError("must be [low, high] with 0 <= low <= high")
            return value

    def __init__(self, config: Config) -> None:
        self.config = config

    def generate(self, *, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Draw ``(x [n, final_seq_length] float64 standardised, y [n] int64)``."""
        from scipy.ndimage import gaussian_filter1d

        cfg = self.config
        low, high = cfg.padding
        per_class = cfg.num_samples // 10
        y = rng.permutation(np.repeat(np.arange(10, dtype=np.int64), per_class))
        n, t_len = y.size, len(_TEMPLATES[0])
        width = t_len + high
        x = np.zeros((n, width))
        x[:, :t_len] = templates()[y] + 1e-8
        pad = low + np.floor(rng.random(n) * (high - low + 1)).astype(np.int64)
        x = resample(x, t_len + pad, width)  # pad, then dilate
        x *= 1.0 + cfg.scale_coeff * (rng.random(n)[:, None] - 0.5)
        shift = rng.integers(0, cfg.max_translation, n)
        cols = (np.arange(width)[None, :] - shift[:, None]) % width
        x = np.take_along_axis(x, cols, axis=1)  # np.roll row by row

        corr = gaussian_filter1d(cfg.corr_noise_scale * rng.standard_normal((n, width)), 2, axis=1)
        x = np.where(x != 0, x, corr)
        x = x + cfg.iid_noise_scale * rng.standard_normal((n, width))
        coeff = cfg.shear_scale * (rng.random(n)[:, None] - 0.5)
        x = x - coeff * np.linspace(-0.5, 0.5, width)[None, :]
        x = resample(x, np.full(n, width), cfg.final_seq_length)
        return (x - x.mean()) / x.std(), y

    def footprint(self, *, num_clients: int) -> DataFootprint:
        """Sizes of the stratified split; generation holds about six ``[n, width]`` arrays."""
        per_class, length = self.config.num_samples // 10, self.config.final_seq_length
        train, test = split_sizes([per_class] * 10, test_fraction=self.config.test_fraction)
        width = len(_TEMPLATES[0]) + self.config.padding[1] + length
        return DataFootprint(train, test, (length,), 10, load_bytes=48 * 10 * per_class * width)

    def load(self, *, rng: np.random.Generator, num_clients: int) -> Dataset:
        """Generate the signals and split them into train and test."""
        x, y = self.generate(rng=rng)
        train, test = stratified_split(y, test_fraction=self.config.test_fraction, rng=rng)
        x = x.astype(np.float32)
        return Dataset(
            name="mnist1d",
            x_train=x[train],
            y_train=y[train],
            x_test=x[test],
            y_test=y[test],
            num_classes=10,
            input_shape=(self.config.final_seq_length,),
        )
