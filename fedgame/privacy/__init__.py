"""Privacy mechanisms (family ``privacy``), calibrations and accountants; importing this
registers every one of them (each module here that registers a plug-in: a new mechanism or
calibration is one new file; accountants: :mod:`fedgame.privacy.accountants`)."""

# ruff: noqa: F401
import fedgame.privacy.accountants
from fedgame.registry import import_plugins

import_plugins(__name__, __path__)
