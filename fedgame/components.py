"""The plug-ins of one world, one typed field each (no lookups by string).

``Components`` is what ``build_world`` instantiates from a scenario: one instance per component
section, typed by its family's Protocol, plus each behaviour's decision rule. The model and the
plug-ins read fields (``components.selection``); :meth:`Components.by_path` lists them with
their scenario paths (``"network.faults"``), which name their random streams and their place in
error messages.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from fedgame.mechanisms.base import (
        Aggregator,
        FaultModel,
        IncentiveMechanism,
        SelectionPolicy,
    )
    from fedgame.privacy.base import PrivacyMechanism

#: scenario path of each field (the order plug-ins are prepared in)
PATHS: dict[str, str] = {
    "dataset": "data.dataset",
    "partition": "data.partition",
    "model": "model",
    "incentive": "incentive",
    "selection": "selection",
    "privacy": "privacy",
    "aggregation": "aggregation",
    "topology": "network.topology",
    "faults": "network.faults",
}


@dataclass(frozen=True)
class Components:
    """Every plug-in of a world (client policies per behaviour label in ``behaviours``)."""

    dataset: Any
    partition: Any
    model: Any
    incentive: IncentiveMechanism
    selection: SelectionPolicy
    privacy: PrivacyMechanism
    aggregation: Aggregator
    topology: Any
    faults: FaultModel
    #: behaviour label -> its policy instance (behaviours that are ``ClientAgent`` subclasses
    #: decide themselves and are not listed)
    behaviours: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_paths(cls, instances: Mapping[str, Any]) -> Components:
        """From ``{scenario path: instance}`` (every path of :data:`PATHS`)."""
        return cls(**{name: instances[path] for name, path in PATHS.items()})

    def by_path(self) -> Iterator[tuple[str, Any]]:
        """(scenario path, instance) of every plug-in, behaviours as ``behaviour:LABEL``."""
        for name, path in PATHS.items():
            yield path, getattr(self, name)
        for label, decision in self.behaviours.items():
            yield f"behaviour:{label}", decision
