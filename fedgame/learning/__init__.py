"""fedgame.learning."""
