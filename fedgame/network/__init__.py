"""fedgame.network."""
