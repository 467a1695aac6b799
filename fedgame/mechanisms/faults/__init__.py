"""Fault models (family ``faults``); importing this registers every one of them (each module
here that registers a plug-in: a new fault model is one new file)."""

from fedgame.registry import import_plugins

import_plugins(__name__, __path__)
