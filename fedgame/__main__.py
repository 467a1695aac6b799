"""``python -m fedgame`` runs the command line."""

import sys

from fedgame.cli import main

sys.exit(main())
