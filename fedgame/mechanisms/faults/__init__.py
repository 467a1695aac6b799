"""fedgame.mechanisms.faults."""
