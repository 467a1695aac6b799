"""fedgame.game."""
