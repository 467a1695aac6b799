"""Client policies, the followers (family ``policy``); importing this registers every one of
them (each module here that registers a plug-in: a new policy is one new file)."""

from fedgame.registry import import_plugins

import_plugins(__name__, __path__)
