"""fedgame.mechanisms.incentive."""
