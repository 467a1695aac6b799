"""fedgame.scenario."""
