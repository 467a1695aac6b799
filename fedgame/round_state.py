"""What the phases of a round hand to each other, and the model's groups of client agents."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from fedgame.agents.client import ClientAgent
from fedgame.learning.batched import LocalResult
from fedgame.mechanisms.base import FaultDraw
from fedgame.privacy.base import PrivacyPlan
from fedgame.views import ClientViews, Offer, Responses, RoundInfo, Selection


@dataclass
class RoundState:
    """What the phases of the current round hand to each other."""

    info: RoundInfo
    started: float
    views: ClientViews | None = None
    offer: Offer = field(default_factory=Offer)
    selection: Selection = field(default_factory=lambda: Selection(()))
    #: ``selection.client_ids`` as an array (the clients that train, once the budget admitted)
    selected: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    local: LocalResult | None = None
    privacy: PrivacyPlan | None = None
    responses: Responses | None = None  # of the selected clients, aligned with the plan
    updates: torch.Tensor | None = None
    uploaded: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=bool))
    withdrawn_budget: int = 0  # releases the budget refused this round
    faults: FaultDraw | None = None
    aggregation_failed: bool = False
    extra: dict[str, float] = field(default_factory=dict)
    #: each delivered client's estimated contribution to the round (e.g. its Shapley value),
    #: when the incentive values contributions (``ValuesContributions``); None otherwise
    contributions: dict[int, float] | None = None


@dataclass(frozen=True)
class AgentGroup:
    """The clients of one agent type and whether the type answers as a batch."""

    agent_type: type[ClientAgent]
    ids: np.ndarray
    batched: bool
