"""fedgame.data: datasets and partitions; importing it registers their plug-ins."""

# ruff: noqa: F401
import fedgame.data.datasets
import fedgame.data.idx
import fedgame.data.mnist1d
import fedgame.data.partition
import fedgame.data.sampled
import fedgame.data.synthetic
