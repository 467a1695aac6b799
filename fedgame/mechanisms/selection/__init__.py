"""Selection rules (family ``selection``); importing this registers them."""

# ruff: noqa: F401
import fedgame.mechanisms.selection.all
import fedgame.mechanisms.selection.bcs
import fedgame.mechanisms.selection.emd_threshold
import fedgame.mechanisms.selection.optimal_queries
import fedgame.mechanisms.selection.power_of_choice
import fedgame.mechanisms.selection.presampled
import fedgame.mechanisms.selection.round_robin
import fedgame.mechanisms.selection.uniform
