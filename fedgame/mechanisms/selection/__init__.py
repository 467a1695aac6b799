"""fedgame.mechanisms.selection."""
