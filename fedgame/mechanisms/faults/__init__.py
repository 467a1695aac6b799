"""Fault models (family ``faults``); importing this registers them."""

# ruff: noqa: F401
import fedgame.mechanisms.faults.correlated
import fedgame.mechanisms.faults.deadline
import fedgame.mechanisms.faults.independent
