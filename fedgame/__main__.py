"""``python -m fedgame`` runs the command line (the same as the ``fedgame`` script)."""

import sys

from fedgame.cli import main

if __name__ == "__main__":
    sys.exit(main())
