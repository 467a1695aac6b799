"""The privacy section's shared knobs: one config for every calibrated Gaussian mechanism.

``gaussian``, ``gaussian_local``, ``zcdp_gaussian``, ``ldp``, ``lightdp``, ``smpc_dp`` and
``ideal_smpc`` read the same keys with the same meaning (``level: sample`` excepted: the
paper-004 mechanisms read it as NbAFL's record level 2C/|D_min|, ``zcdp_gaussian`` has its own
``record`` level): ``clip`` (the L2 norm C each update, or per-sample gradient, is
clipped to), ``adjacency`` (add/remove-one: factor 1; replace-one: factor 2), ``level`` (what is
clipped and so what the sensitivity is about: the whole ``update``, or each ``sample``),
``participations`` (the planned releases T each client's budget is split over),
``calibration`` (a registered calibration, :mod:`fedgame.privacy.calibrations`),
``allow_loose_classic`` (let a tail-bound calibration run past its proven range, ε < 1) and
``accountant`` (the accountant plug-in that prices every release); ``c2`` and ``bcs_split``
are the knobs of calibration ``dpfl_bcs``. A mechanism subclasses
:class:`PrivacySettings` to change a default or add its own knobs. Mechanisms without a
registered calibration (``laplace_local``, ``dpsgd_local``, ``central_gaussian``) subclass
:class:`ReleaseSettings`, the clip/adjacency/level/participations/accountant part.

``sensitivity`` is the old name of ``level`` in ``ldp``, ``lightdp``, ``smpc_dp`` and
``ideal_smpc``: it still works for one release and prints one deprecation line.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, model_validator

from fedgame.privacy.calibrations import CalibrationName

Participations = Literal["auto", "scenario"] | PositiveInt

#: (old key, new key) of the privacy section, accepted for one release
RENAMED = {"sensitivity": "level"}


def deprecated_key(old: str, new: str) -> str:
    """The one line a deprecated spelling prints."""
    return (
        f"privacy.{old} is deprecated: write privacy.{new} (same values); the old spelling "
        "will be refused in the next release"
    )


def fixed_participations(value: Participations) -> int | None:
    """The fixed T of a ``participations`` setting (None: from the scenario or selection)."""
    return value if isinstance(value, int) else None


class ReleaseSettings(BaseModel):
    """Knobs of every clipped release: ``clip``, ``adjacency``, ``level``, ``participations``,
    ``accountant`` (``laplace_local``, ``dpsgd_local`` and ``central_gaussian`` read these)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    clip: PositiveFloat = Field(
        1.0,
        description=(
            "L2 norm C each update (level update) or per-sample gradient (level sample) is "
            "clipped to"
        ),
    )
    adjacency: Literal["add_remove", "replace"] = Field(
        "add_remove",
        description="neighbouring datasets: add_remove (sensitivity C) or replace (2C)",
    )
    level: Literal["update", "sample"] = Field(
        "update",
        description="what is clipped and protected: the whole update, or each sample",
    )
    participations: Participations = Field(
        "scenario",
        description=(
            "planned releases T each client's budget is split over: scenario (rounds x "
            "expected selected fraction), auto (the selection's per-client plan, else "
            "scenario) or a fixed integer"
        ),
    )
    accountant: str | None = Field(
        "basic",
        description="accountant plug-in that prices every release (fedgame list accountant)",
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed_keys(cls, data: Any) -> Any:
        """Map a deprecated key to its new name, with one deprecation line."""
        if not isinstance(data, dict):
            return data
        for old, new in RENAMED.items():
            if old in data and old not in cls.model_fields:
                data = dict(data)
                value = data.pop(old)
                if new in data:
                    raise ValueError(f"set {new} only ({old} is its deprecated name)")
                data[new] = value
                warnings.warn(deprecated_key(old, new), FutureWarning, stacklevel=2)
        if data.get("participations", "scenario") is None:  # the old spelling of "scenario"
            data = {**data, "participations": "scenario"}
        return data


class PrivacySettings(ReleaseSettings):
    """Knobs shared by the calibrated Gaussian mechanisms (see the module docstring)."""

    calibration: CalibrationName = Field(
        "analytic",
        description=(
            "how the noise multiplier is chosen (fedgame list calibration): analytic (exact, "
            "any epsilon), classic, lightdp, dpfl_bcs or accountant"
        ),
    )
    allow_loose_classic: bool = Field(
        False,
        description=(
            "allow a tail-bound calibration (classic, lightdp) where a per-round epsilon "
            "reaches 1 (not a proven guarantee)"
        ),
    )
    c2: PositiveFloat = Field(
        1.0,
        description=(
            "calibration dpfl_bcs: the constant c2 of paper 000's analysis calibration (never "
            "given by the paper)"
        ),
    )
    bcs_split: Literal["analysis", "per_round"] = Field(
        "analysis",
        description="calibration dpfl_bcs: analysis (Thm 2) or per_round (Alg. 2's linear split)",
    )
