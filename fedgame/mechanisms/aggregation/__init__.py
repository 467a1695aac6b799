"""Aggregators (family ``aggregation``); importing this registers them."""

# ruff: noqa: F401
import fedgame.mechanisms.aggregation.robust
import fedgame.mechanisms.aggregation.secure
import fedgame.mechanisms.aggregation.weighted
import fedgame.mechanisms.aggregation.weighted_eps
