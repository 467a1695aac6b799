"""fedgame.privacy."""
