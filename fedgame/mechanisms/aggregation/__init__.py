"""fedgame.mechanisms.aggregation."""
