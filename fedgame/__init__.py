"""fedgame: an agent-based economic game simulator for differentially private federated learning.

Mesa agents (a parameter server and strategic clients) decide rewards, privacy levels and
participation each round; one batched PyTorch learner trains every selected client at once.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
