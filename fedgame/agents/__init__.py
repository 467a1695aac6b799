"""fedgame.agents."""
