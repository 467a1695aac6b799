"""fedgame.network: client topologies; importing it registers them."""

# ruff: noqa: F401
import fedgame.network.topology
