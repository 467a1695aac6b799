"""fedgame.run."""
