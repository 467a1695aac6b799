"""Imports every built-in plug-in module so that its ``@register`` decorators run.

Adding a mechanism: write its file, then add one import line here.
"""

# ruff: noqa: F401
from __future__ import annotations

import fedgame.data.datasets
import fedgame.data.idx
import fedgame.data.mnist1d
import fedgame.data.partition
import fedgame.data.synthetic
import fedgame.learning.models
import fedgame.mechanisms.aggregation.weighted
import fedgame.mechanisms.faults.independent
import fedgame.mechanisms.incentive.none
import fedgame.mechanisms.policy.always
import fedgame.mechanisms.selection.all
import fedgame.mechanisms.selection.uniform
import fedgame.network.topology
import fedgame.privacy.accounting
import fedgame.privacy.gaussian
import fedgame.privacy.none
