"""fedgame.mechanisms."""
