"""``python -m fedgame`` runs the command line (the same as the ``fedgame`` script)."""

from fedgame.cli import script

if __name__ == "__main__":
    script()
