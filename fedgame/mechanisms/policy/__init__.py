"""fedgame.mechanisms.policy."""
