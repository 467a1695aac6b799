"""Imports every built-in plug-in module so that its ``@register`` decorators run.

Adding a mechanism: write its file, then add one import line here. Importing this module is
what ``fedgame validate``, ``list`` and ``explain`` pay for, so a plug-in module imports torch,
scipy, networkx and dp_accounting inside the functions that use them (type hints under
``TYPE_CHECKING``), never at its top: ``tests/test_cli_startup.py`` checks it.
"""

# ruff: noqa: F401
from __future__ import annotations

import fedgame.data.datasets
import fedgame.data.idx
import fedgame.data.mnist1d
import fedgame.data.partition
import fedgame.data.sampled
import fedgame.data.synthetic
import fedgame.learning.models
import fedgame.mechanisms.aggregation.robust
import fedgame.mechanisms.aggregation.secure
import fedgame.mechanisms.aggregation.weighted
import fedgame.mechanisms.aggregation.weighted_eps
import fedgame.mechanisms.faults.correlated
import fedgame.mechanisms.faults.deadline
import fedgame.mechanisms.faults.independent
import fedgame.mechanisms.incentive.none
import fedgame.mechanisms.incentive.qi_dpfl
import fedgame.mechanisms.incentive.stackelberg
import fedgame.mechanisms.policy.always
import fedgame.mechanisms.policy.game
import fedgame.mechanisms.policy.learning
import fedgame.mechanisms.selection.all
import fedgame.mechanisms.selection.bcs
import fedgame.mechanisms.selection.emd_threshold
import fedgame.mechanisms.selection.optimal_queries
import fedgame.mechanisms.selection.power_of_choice
import fedgame.mechanisms.selection.presampled
import fedgame.mechanisms.selection.round_robin
import fedgame.mechanisms.selection.uniform
import fedgame.network.topology
import fedgame.privacy.accountants
import fedgame.privacy.baselines
import fedgame.privacy.central_gaussian
import fedgame.privacy.dpsgd_local
import fedgame.privacy.gaussian
import fedgame.privacy.gaussian_local
import fedgame.privacy.laplace_local
import fedgame.privacy.lightdp
import fedgame.privacy.none
import fedgame.privacy.zcdp_gaussian
