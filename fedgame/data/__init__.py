"""fedgame.data."""
