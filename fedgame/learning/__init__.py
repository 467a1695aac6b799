"""fedgame.learning: the batched learner and its models; importing it registers the models."""

# ruff: noqa: F401
import fedgame.learning.models
